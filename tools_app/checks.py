"""The console's system checks (`manage.py check`): the configuration warnings every area
reports (tools_app/config_warnings.py), the runner's host, and the static checks over every
tool's latest version (`--tag tools`)."""

from __future__ import annotations

from django.core import checks
from django.db import DatabaseError
from django.db.models import F

from tools_app.config_warnings import ConsoleWarning, Level, console_warnings, warning_source
from tools_app.integrations.environment import integration_env
from tools_app.lib.strictyaml import Problem
from tools_app.manifest.staticcheck import check_tool
from tools_app.manifest.toolmd import Manifest, parse_toolmd
from tools_app.models import ToolVersion


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


# --- `manage.py check --tag tools` ----------------------------------------------------------

STATIC_CHECK_IDS = {
    "env": "tools_app.W101",
    "network": "tools_app.W102",
    "body": "tools_app.W104",
    "integrations": "tools_app.W105",
}


def static_check_id(problem: Problem) -> str:
    if problem.key.startswith("inputs."):
        return "tools_app.W103"
    return STATIC_CHECK_IDS.get(problem.key, "tools_app.W100")


def check_version(version: ToolVersion) -> list[Problem]:
    """The static-check warnings for a stored version (shown on the editor page after a
    save), told of the integrations it declares as the console knows them now."""
    parsed = parse_toolmd(version.toolmd)
    manifest = parsed.manifest or Manifest.from_dict(version.manifest)
    env = integration_env(manifest.integrations)
    return check_tool(version.tool.name, version.file_bytes(), manifest, env=env)


@checks.register("tools")
def check_tools(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """Static checks over every tool's latest version (`manage.py check --tag tools`)."""
    latest = ToolVersion.objects.filter(number=F("tool__latest_number")).select_related("tool")
    try:
        versions = list(latest.order_by("tool__name"))
    except DatabaseError:  # not migrated yet: nothing to check
        return []
    return [
        checks.Warning(
            str(problem),
            hint=f"version {version.number}",
            obj=version.tool,
            id=static_check_id(problem),
        )
        for version in versions
        for problem in check_version(version)
    ]
