"""The console's system checks (`manage.py check`): the configuration warnings every area
reports (tools_app/config_warnings.py) and the runner's host."""

from __future__ import annotations

from django.core import checks

from tools_app.config_warnings import ConsoleWarning, Level, console_warnings, warning_source


@checks.register()
def check_console(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    return [
        checks.Warning(warning.text, id=f"tools_app.W{index:03d}")
        for index, warning in enumerate(console_warnings(), start=1)
    ]


def runner_problems() -> list[tuple[str, str, str]]:
    """(check id, problem, fix) for each reason the worker cannot run tools on this host.

    Not a system check error for every command: migrate, validate_tools, sync_tools and the
    like run no tool, and a console without a usable sandbox must still start so its pages
    say why. The worker refuses each run itself (runner.core), with the reason on the run;
    here the reason goes to the banner, the System page and `manage.py check` (a warning),
    and `check --deploy` fails on it (an error), since a production host must run tools."""
    from tools_app.runner import privilege, sandbox, seccomp

    isolation, reason = sandbox.isolation_level()
    problems = []
    if refusal := privilege.refusal(isolation, reason):
        problems.append(
            (
                "tools_app.E001",
                f"The worker refuses to run tools: {refusal}",
                "Install bubblewrap, or run the worker as an unprivileged user.",
            )
        )
    if isolation == "bwrap":
        try:
            seccomp.program()
        except seccomp.SeccompUnavailable as exc:
            problems.append(
                (
                    "tools_app.E002",
                    f"Tools cannot start: their seccomp filter cannot be built ({exc}).",
                    "Install the Debian package libseccomp2.",
                )
            )
    return problems


@warning_source
def runner_warnings() -> list[ConsoleWarning]:
    return [
        ConsoleWarning(problem, "Tools cannot run on this host", Level.ERROR)
        for _id, problem, _fix in runner_problems()
    ]


@checks.register(deploy=True)
def check_runner_privilege(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """`check --deploy`: a host whose worker cannot run tools is not ready for production."""
    return [checks.Error(problem, hint=fix, id=id) for id, problem, fix in runner_problems()]
