"""The text form of a list input (`string[]`, `number[]`, `integer[]`, `boolean[]`): one
item per line, as a person pastes a column of ids into the run form or a preset. Blank
lines are skipped, but an error names the line as the person sees it (counting blank
ones), so they can find it. No HTTP here."""

from __future__ import annotations

import json
import math
from typing import Any

WANTED = {"integer": "an integer", "number": "a number", "boolean": "true or false"}


class LineError(ValueError):
    """An item that is not of the list's item type; the message names its line."""


def parse_lines(item_type: str, text: str) -> list[Any] | None:
    """The items of `text` converted to `item_type`, or None when it holds no item."""
    items = [
        _item(item_type, number, line)
        for number, line in enumerate((text or "").splitlines(), 1)
        if line.strip()
    ]
    return items or None


def _item(item_type: str, number: int, line: str) -> Any:
    if item_type == "string":
        return line
    try:
        item = json.loads(line.strip())
    except (ValueError, RecursionError):
        item = line
    ok = {
        "integer": isinstance(item, int) and not isinstance(item, bool),
        "number": isinstance(item, int | float)
        and not isinstance(item, bool)
        and math.isfinite(item),
        "boolean": isinstance(item, bool),
    }[item_type]
    if not ok:
        raise LineError(f"line {number}: must be {WANTED[item_type]}, one item per line.")
    return item


def as_lines(items: list[Any]) -> str:
    """A list as the text that parse_lines reads back."""
    return "\n".join(json.dumps(v) if isinstance(v, bool) else str(v) for v in items)
