"""System checks and the warnings the console shows as banners.

Each area (vault, runner) adds its warnings to `console_warnings()` so pages and
`manage.py check` report the same problems."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.core import checks


class Level:
    """How bad a console warning is: an error means something does not work now (tools
    cannot run, secrets cannot be read); a warning means it works but needs an admin."""

    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True)
class ConsoleWarning:
    """One configuration problem. `text` is the whole sentence (System page, `manage.py
    check`); `short` is a few words for the one-line banner, which links to the System
    page's list of warnings for the rest."""

    text: str
    short: str
    level: str = Level.WARNING

    def __str__(self) -> str:
        return self.text


# Functions returning the warnings of one area (vault, runner, egress, ...).
_WARNING_SOURCES: list[Callable[[], list[ConsoleWarning]]] = []


def warning_source(
    fn: Callable[[], list[ConsoleWarning]],
) -> Callable[[], list[ConsoleWarning]]:
    _WARNING_SOURCES.append(fn)
    return fn


def console_warnings() -> list[ConsoleWarning]:
    """Every area's warnings, errors first (the banner shows the worst one)."""
    warnings: list[ConsoleWarning] = []
    for source in _WARNING_SOURCES:
        try:
            warnings.extend(source())
        except Exception as exc:  # a broken check must not take pages down
            text = f"{source.__name__} failed: {type(exc).__name__}"
            warnings.append(ConsoleWarning(text, "A configuration check failed", Level.ERROR))
    return sorted(warnings, key=lambda warning: warning.level != Level.ERROR)


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
