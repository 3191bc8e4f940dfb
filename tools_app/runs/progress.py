"""A tool's numeric progress: the optional `progress` and `total` of an update.

`onUpdate({content, progress, total})` follows MCP's `notifications/progress` (progress,
total, and the update's text as its message). The values come from the tool, which may
send anything (the harness forwards what it got, and a tool can write the protocol pipe
itself), so they are checked where updates are stored: a bad pair is dropped from that
update, its text is kept, and the run gets one notice per kind of problem. A notice never
repeats the value (it could be anything the tool holds, and notices are shown to every
viewer of the run, unlike its progress); it names the value's kind only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# What the harnesses send instead of a value that is not a finite number (its kind), and
# how a notice names it: only these, so a forged one cannot carry text onto the page.
VALUE_KIND_NAMES = {
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "string": "a string",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
    "null": "null",
    "bigint": "a bigint",
    "symbol": "a symbol",
    "function": "a function",
    "undefined": "undefined",
}


@dataclass(frozen=True)
class Progress:
    progress: float
    total: float | None  # None: the tool did not say how much there is (no bar then)

    @property
    def percent(self) -> int | None:
        """Whole percent done, rounded down (100 only once progress reaches total)."""
        if self.total is None:
            return None
        return max(0, min(100, math.floor(self.progress * 100 / self.total)))


class BadProgress(ValueError):
    """Why an update's progress was ignored; the text is a notice, safe for any viewer."""


def kind_of(value: Any) -> str:
    """How a notice names a bad value: its kind, never its content."""
    if isinstance(value, str):
        return VALUE_KIND_NAMES.get(value, "a string")
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, float) and math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, int | float):
        return "a number too large"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "a value of another kind"


def _number(value: Any, name: str) -> float:
    # bool is an int in Python, and JSON's true is no count.
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an integer of hundreds of digits
            number = math.inf
        if math.isfinite(number):
            return number
    raise BadProgress(f"{name} must be a finite number, got {kind_of(value)}")


def read(update: Any) -> Progress | None:
    """The update's progress, None when it has none; BadProgress when it is nonsense."""
    if not isinstance(update, dict):
        return None
    has_progress = update.get("progress") is not None
    has_total = update.get("total") is not None
    if not has_progress:
        if has_total:
            raise BadProgress("total without progress")
        return None
    progress = _number(update["progress"], "progress")
    if progress < 0:
        raise BadProgress("progress must be 0 or more")
    if not has_total:
        return Progress(progress, None)
    total = _number(update["total"], "total")
    if total <= 0:
        raise BadProgress("total must be more than 0")
    if progress > total:
        raise BadProgress("progress must not be more than total")
    return Progress(progress, total)


def shown(number: float) -> str:
    """A count as people read it: 3.0 as "3", 2.5 as "2.5", 0.3333 as "0.33"."""
    if number.is_integer():
        return str(int(number))
    return f"{number:.2f}".rstrip("0").rstrip(".")
