"""Expectations drawn from what a run actually gave: proposed when a run is saved as a case
(the person keeps those they want), and "Accept the new output", which rewrites a failing
case's expectations to what its latest run gave. Both in the file form (dicts)."""

from __future__ import annotations

import math
import re
from typing import Any

from tools_app.cases.document import Case, Expectation
from tools_app.cases.evaluate import (
    NO_JSON,
    Outcome,
    Verdict,
    check_one,
    contained,
    is_error,
    projection,
    result_text,
    structured,
)

# Longer text is proposed as `contains` of its first line: a whole page compared exactly
# breaks on any change, which is rarely what a case means.
MAX_EXACT_TEXT = 2000
MAX_CONTAINS = 200


def budget(duration: float) -> int:
    """A generous duration budget: three times what the run took, at least a second."""
    return max(1, math.ceil(3 * duration))


def first_line(text: str) -> str:
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line[:MAX_CONTAINS]


def _text_expectation(text: str) -> dict[str, Any] | None:
    if len(text) <= MAX_EXACT_TEXT:
        return {"text": text}
    line = first_line(text)
    return {"contains": line} if line else None


def propose(outcome: Outcome) -> list[dict[str, Any]]:
    result = outcome.result
    proposed: list[dict[str, Any]] = [{"is_error": is_error(result)}]
    if result is not None:
        text = _text_expectation(result_text(result))
        if text is not None:
            proposed.append(text)
        if "structuredContent" in result:
            proposed.append({"json_equals": result["structuredContent"]})
    if outcome.duration is not None and math.isfinite(outcome.duration):
        proposed.append({"duration_under": budget(outcome.duration)})
    for name, media_type in outcome.artifacts:
        proposed.append({"artifact": name, **({"media_type": media_type} if media_type else {})})
    return proposed


def _renewed(e: Expectation, outcome: Outcome) -> dict[str, Any] | None:
    """The expectation of the same kind that `outcome` meets, or None (dropped)."""
    result = outcome.result
    text = result_text(result)
    data = structured(result)
    if e.kind == "is_error":
        return {"is_error": is_error(result)}
    if e.kind == "text":
        return {"text": text}
    if e.kind == "contains":
        line = first_line(text)
        return {"contains": line} if line else None
    if e.kind == "regex":
        line = first_line(text)
        return {"regex": re.escape(line)} if line else None
    if e.kind == "json_equals" and data is not NO_JSON:
        return {"json_equals": data, **e.options}
    if e.kind == "json_subset" and data is not NO_JSON:
        shown = projection(e.value, data)
        if isinstance(shown, dict | list) and shown and contained(shown, data):
            return {"json_subset": shown}
        return {"json_subset": data} if isinstance(data, dict | list) else None
    if e.kind == "jmespath" and data is not NO_JSON:
        check = check_one(Expectation("jmespath", e.value, {"op": "==", "value": None}), outcome)
        if check.verdict == Verdict.ERROR:
            return None
        return {"jmespath": e.value, "op": "==", "value": check.actual}
    if e.kind == "duration_under" and outcome.duration is not None:
        return {"duration_under": budget(outcome.duration)}
    if e.kind == "artifact":
        found = [kind for name, kind in outcome.artifacts if name == e.value]
        if found:
            return {"artifact": e.value, **({"media_type": found[0]} if found[0] else {})}
    return None  # not_contains and schema cannot be drawn from the output; errored ones


def accepted(case: Case, outcome: Outcome) -> list[dict[str, Any]]:
    """The case's expectations with their values replaced by what `outcome` gave (those
    that pass already are kept as written; kinds are kept), or propose()'s when none is left."""
    renewed: list[dict[str, Any]] = []
    for e in case.expect:
        if check_one(e, outcome).verdict == Verdict.PASSED:
            item: dict[str, Any] | None = e.to_yaml()
        else:
            item = _renewed(e, outcome)
        if item is not None and item not in renewed:
            renewed.append(item)
    return renewed or propose(outcome)
