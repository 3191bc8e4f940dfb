"""System checks and the warnings the console shows as banners.

Each area (vault, runner) adds its warnings to `console_warnings()` so pages and
`manage.py check` report the same problems."""

from __future__ import annotations

from collections.abc import Callable

from django.core import checks

# Functions returning a list of human-readable warning strings for the banner.
_WARNING_SOURCES: list[Callable[[], list[str]]] = []


def warning_source(fn: Callable[[], list[str]]) -> Callable[[], list[str]]:
    _WARNING_SOURCES.append(fn)
    return fn


def console_warnings() -> list[str]:
    warnings: list[str] = []
    for source in _WARNING_SOURCES:
        try:
            warnings.extend(source())
        except Exception as exc:  # a broken check must not take pages down
            warnings.append(f"{source.__name__} failed: {type(exc).__name__}")
    return warnings


@checks.register()
def check_console(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    return [
        checks.Warning(message, id=f"tools_app.W{index:03d}")
        for index, message in enumerate(console_warnings(), start=1)
    ]


@checks.register()
def check_runner_privilege(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """A root worker that cannot drop privileges for tools refuses every run: an error."""
    from tools_app.runner import privilege, sandbox, seccomp

    isolation, reason = sandbox.isolation_level()
    errors = []
    if refusal := privilege.refusal(isolation, reason):
        errors.append(
            checks.Error(
                f"The worker refuses to run tools: {refusal}",
                hint="Install bubblewrap, or run the worker as an unprivileged user.",
                id="tools_app.E001",
            )
        )
    if isolation == "bwrap":
        try:
            seccomp.program()
        except seccomp.SeccompUnavailable as exc:
            errors.append(
                checks.Error(
                    f"Tools cannot start: their seccomp filter cannot be built ({exc}).",
                    hint="Install the Debian package libseccomp2.",
                    id="tools_app.E002",
                )
            )
    return errors
