"""The warnings the console shows as banners, on the System page and in `manage.py check`.

Each area (vault, integration types, egress, runner) adds its warnings to
`console_warnings()`, so pages and `manage.py check` (tools_app/checks.py) report the same
problems. Apart from the system checks, so that those areas can add theirs without
importing the checks, which look into them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


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
