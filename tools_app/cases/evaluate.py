"""A run's outcome judged against a case (docs/cases.md, "Expectations").

Each expectation gives one Check: passed, failed (the tool did not do what the case
expects) or error (the expectation cannot be evaluated: a bad regex, a JMESPath error, a
value of the wrong type). Evaluating never raises: whatever goes wrong is a Check ERROR.
Checks carry what was expected and what came, and a unified diff of the two for text and
JSON (pretty-printed), which the check page shows side by side."""

from __future__ import annotations

import copy
import difflib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import jmespath
import jmespath.exceptions
import jsonschema
import referencing
import referencing.exceptions

from tools_app.cases.document import WILDCARD, Case, Expectation, parse_path, schema_problem

FINISHED = ("succeeded", "failed")  # the run ended with a result from the tool
# Bounds on what a Check stores (the page shows it, the database keeps it).
MAX_SHOWN = 20_000
MAX_DIFF = 40_000


class Verdict(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"


@dataclass(frozen=True)
class Outcome:
    status: str  # the run's status: succeeded, failed, timed_out, cancelled, lost
    result: Mapping[str, Any] | None  # MCP CallToolResult: content, structuredContent?, isError?
    duration: float | None = None
    artifacts: tuple[tuple[str, str], ...] = ()  # (name, media_type)
    error: str = ""


@dataclass(frozen=True)
class Check:
    kind: str
    verdict: Verdict
    message: str
    expected: Any = None
    actual: Any = None
    diff: str = ""
    line: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "verdict": str(self.verdict),
            "message": self.message,
            "expected": _shown(self.expected),
            "actual": _shown(self.actual),
            "diff": self.diff[:MAX_DIFF],
            "line": self.line,
        }


@dataclass(frozen=True)
class CaseResult:
    verdict: Verdict
    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        return self.verdict == Verdict.PASSED

    def to_json(self) -> dict[str, Any]:
        return {"verdict": str(self.verdict), "checks": [c.to_json() for c in self.checks]}


def _shown(value: Any) -> Any:
    """A value small enough to store: long text cut, a large JSON value as its start."""
    if isinstance(value, str):
        return value if len(value) <= MAX_SHOWN else value[:MAX_SHOWN] + "\n[... cut]"
    if isinstance(value, dict | list):
        text = _pretty(value)
        if len(text) > MAX_SHOWN:
            return text[:MAX_SHOWN] + "\n[... cut]"
    return value


def result_text(result: Mapping[str, Any] | None) -> str:
    """The result's text content items joined by newlines (what `text` compares)."""
    if not isinstance(result, Mapping):
        return ""
    content = result.get("content")
    if not isinstance(content, list):
        return ""
    return "\n".join(
        item["text"]
        for item in content
        if isinstance(item, Mapping)
        and item.get("type", "text") == "text"
        and isinstance(item.get("text"), str)
    )


def is_error(result: Mapping[str, Any] | None) -> bool:
    return bool(isinstance(result, Mapping) and result.get("isError"))


NO_JSON = object()


def structured(result: Mapping[str, Any] | None) -> Any:
    """structuredContent, else the text when it is JSON (a code tool that prints JSON),
    else NO_JSON."""
    if isinstance(result, Mapping) and "structuredContent" in result:
        return result["structuredContent"]
    text = result_text(result).strip()
    if text[:1] in ("{", "["):
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            return NO_JSON
    return NO_JSON


def _pretty(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        return repr(value)


def text_diff(expected: str, actual: str) -> str:
    lines = difflib.unified_diff(
        expected.splitlines(keepends=True),
        actual.splitlines(keepends=True),
        fromfile="expected",
        tofile="actual",
    )
    diff = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return diff[:MAX_DIFF]


def json_diff(expected: Any, actual: Any) -> str:
    return text_diff(_pretty(expected) + "\n", _pretty(actual) + "\n")


def _short(value: Any, size: int = 80) -> str:
    """A value in a message: text quoted, JSON compact, both cut to `size`."""
    if isinstance(value, str):
        text = " ".join(value.split())
        return repr(text) if len(text) <= size else repr(text[: size - 3] + "...")
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        text = repr(value)
    return text if len(text) <= size else text[: size - 3] + "..."


# --- The kinds ------------------------------------------------------------------------------


def _check(e: Expectation, verdict: Verdict, message: str, **kw: Any) -> Check:
    return Check(e.kind, verdict, message, line=e.line, **kw)


def _is_error(e: Expectation, outcome: Outcome) -> Check:
    actual = is_error(outcome.result)
    if actual == e.value:
        what = "an error" if actual else "no error"
        return _check(e, Verdict.PASSED, f"the result is {what}", expected=e.value, actual=actual)
    message = (
        "the result is an error, the case expects none"
        if actual
        else "the result is no error, the case expects one"
    )
    return _check(e, Verdict.FAILED, message, expected=e.value, actual=actual)


def _text(e: Expectation, outcome: Outcome) -> Check:
    actual = result_text(outcome.result)
    if actual == e.value:
        return _check(e, Verdict.PASSED, "the text is as expected", expected=e.value, actual=actual)
    return _check(
        e,
        Verdict.FAILED,
        "the text differs",
        expected=e.value,
        actual=actual,
        diff=text_diff(e.value, actual),
    )


def _contains(e: Expectation, outcome: Outcome) -> Check:
    actual = result_text(outcome.result)
    found = e.value in actual
    want = e.kind == "contains"
    if found == want:
        says = "contains" if found else "does not contain"
        return _check(
            e, Verdict.PASSED, f"the text {says} {_short(e.value)}", expected=e.value, actual=actual
        )
    says = "does not contain" if want else "contains"
    return _check(
        e, Verdict.FAILED, f"the text {says} {_short(e.value)}", expected=e.value, actual=actual
    )


def _regex(e: Expectation, outcome: Outcome) -> Check:
    actual = result_text(outcome.result)
    try:
        match = re.search(e.value, actual)
    except (re.error, RecursionError, OverflowError) as exc:
        return _check(
            e, Verdict.ERROR, f"the regular expression cannot be used: {exc}", expected=e.value
        )
    if match:
        return _check(
            e,
            Verdict.PASSED,
            f"the text matches at {_short(match.group(0))}",
            expected=e.value,
            actual=actual,
        )
    return _check(
        e,
        Verdict.FAILED,
        f"the text does not match {_short(e.value)}",
        expected=e.value,
        actual=actual,
    )


def drop_paths(value: Any, paths: list[str]) -> Any:
    """A copy of `value` without what each path names (missing paths are fine)."""
    value = copy.deepcopy(value)
    for path in paths:
        parts = parse_path(path)
        if parts:
            _drop(value, parts)
    return value


def _drop(node: Any, parts: list[str | int]) -> None:
    head, rest = parts[0], parts[1:]
    if head == WILDCARD:
        targets = list(range(len(node))) if isinstance(node, list) else []
        if isinstance(node, dict):
            targets = list(node)
    elif isinstance(head, int):
        targets = [head] if isinstance(node, list) and -len(node) <= head < len(node) else []
    else:
        targets = [head] if isinstance(node, dict) and head in node else []
    if not rest:
        if isinstance(node, dict):
            for key in targets:
                node.pop(key, None)
        elif isinstance(node, list):
            for index in sorted(targets, reverse=True):
                del node[index]
        return
    for key in targets:
        _drop(node[key], rest)


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true is no 1 and a list no tuple matters not."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _json_actual(e: Expectation, outcome: Outcome) -> Any:
    value = structured(outcome.result)
    if value is NO_JSON:
        return _check(
            e,
            Verdict.FAILED,
            "the result has no structuredContent and its text is not JSON",
            expected=e.value,
            actual=result_text(outcome.result),
        )
    return value


def _json_equals(e: Expectation, outcome: Outcome) -> Check:
    actual = _json_actual(e, outcome)
    if isinstance(actual, Check):
        return actual
    ignore = list(e.options.get("ignore") or ())
    expected = drop_paths(e.value, ignore)
    actual = drop_paths(actual, ignore)
    if _equal(expected, actual):
        return _check(
            e, Verdict.PASSED, "the JSON is as expected", expected=expected, actual=actual
        )
    return _check(
        e,
        Verdict.FAILED,
        "the JSON differs",
        expected=expected,
        actual=actual,
        diff=json_diff(expected, actual),
    )


def contained(expected: Any, actual: Any) -> bool:
    """A mapping is contained when each of its keys is in `actual` with a contained value;
    a list when each of its items is contained in some item of `actual`; a scalar when equal."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and contained(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return isinstance(actual, list) and all(
            any(contained(item, other) for other in actual) for item in expected
        )
    return _equal(expected, actual)


def projection(expected: Any, actual: Any) -> Any:
    """What of `actual` the subset looks at: its keys named by `expected` (for a diff)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return {k: projection(v, actual[k]) for k, v in expected.items() if k in actual}
    return actual


def _json_subset(e: Expectation, outcome: Outcome) -> Check:
    actual = _json_actual(e, outcome)
    if isinstance(actual, Check):
        return actual
    if contained(e.value, actual):
        return _check(
            e,
            Verdict.PASSED,
            "the JSON contains what the case expects",
            expected=e.value,
            actual=actual,
        )
    shown = projection(e.value, actual)
    return _check(
        e,
        Verdict.FAILED,
        "the JSON does not contain what the case expects",
        expected=e.value,
        actual=shown,
        diff=json_diff(e.value, shown),
    )


def _compare(op: str, actual: Any, value: Any) -> bool | str:
    """The comparison's truth, or why it cannot be made (a string)."""
    if op == "==":
        return _equal(actual, value)
    if op == "!=":
        return not _equal(actual, value)
    if op == "contains":
        if isinstance(actual, str):
            return isinstance(value, str) and value in actual
        if isinstance(actual, list):
            return any(_equal(item, value) for item in actual)
        if isinstance(actual, dict):
            return isinstance(value, str) and value in actual
        return f"contains needs a string, list or object, the expression gave {_type(actual)}"
    if op == "matches":
        if not isinstance(actual, str):
            return f"matches needs a string, the expression gave {_type(actual)}"
        return re.search(value, actual) is not None
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (actual, value))
    strings = isinstance(actual, str) and isinstance(value, str)
    if not (numbers or strings):
        return f"{op} compares numbers or strings, the expression gave {_type(actual)}"
    return {
        ">": actual > value,
        ">=": actual >= value,
        "<": actual < value,
        "<=": actual <= value,
    }[op]


def _type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {_short(value, 40)}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _jmespath(e: Expectation, outcome: Outcome) -> Check:
    op = e.options.get("op", "==")
    value = e.options.get("value")
    expected = {"op": op, "value": value}
    data = structured(outcome.result)
    if data is NO_JSON:
        return _check(
            e,
            Verdict.FAILED,
            "the result has no structuredContent and its text is not JSON",
            expected=expected,
            actual=result_text(outcome.result),
        )
    try:
        actual = jmespath.search(e.value, data)
    except jmespath.exceptions.JMESPathError as exc:
        return _check(e, Verdict.ERROR, f"the JMESPath expression fails: {exc}", expected=expected)
    try:
        verdict = _compare(op, actual, value)
    except (re.error, RecursionError, TypeError) as exc:
        return _check(e, Verdict.ERROR, f"cannot compare: {exc}", expected=expected, actual=actual)
    shown = f"{e.value} gave {_short(actual, 60)}"
    if isinstance(verdict, str):
        return _check(e, Verdict.FAILED, f"{shown}: {verdict}", expected=expected, actual=actual)
    if verdict:
        return _check(
            e,
            Verdict.PASSED,
            f"{shown}, {op} {_short(value, 60)}",
            expected=expected,
            actual=actual,
        )
    return _check(
        e,
        Verdict.FAILED,
        f"{shown}, not {op} {_short(value, 60)}",
        expected=expected,
        actual=actual,
        diff=json_diff(value, actual) if op == "==" else "",
    )


def _schema(e: Expectation, outcome: Outcome) -> Check:
    why = schema_problem(e.value)
    if why is not None:
        return _check(e, Verdict.ERROR, f"the schema {why}", expected=e.value)
    data = structured(outcome.result)
    if data is NO_JSON:
        return _check(
            e,
            Verdict.FAILED,
            "the result has no structuredContent and its text is not JSON",
            expected=e.value,
            actual=result_text(outcome.result),
        )
    # No registry to fetch from: a $ref outside the schema is refused, never downloaded.
    validator = jsonschema.Draft202012Validator(e.value, registry=referencing.Registry())
    try:
        errors = sorted(validator.iter_errors(data), key=lambda err: list(err.path))
    except referencing.exceptions.Unresolvable as exc:
        return _check(e, Verdict.ERROR, f"the schema cannot be used: {exc}", expected=e.value)
    except (RecursionError, re.error, ValueError, TypeError) as exc:
        return _check(
            e, Verdict.ERROR, f"the schema cannot be used: {type(exc).__name__}", expected=e.value
        )
    if not errors:
        return _check(
            e, Verdict.PASSED, "the JSON matches the schema", expected=e.value, actual=data
        )
    lines = [
        f"{'/'.join(str(p) for p in err.path) or '(root)'}: {err.message}" for err in errors[:5]
    ]
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return _check(
        e,
        Verdict.FAILED,
        "the JSON does not match the schema: " + "; ".join(lines) + more,
        expected=e.value,
        actual=data,
        diff="\n".join(lines),
    )


def _duration(e: Expectation, outcome: Outcome) -> Check:
    duration = outcome.duration
    if duration is None or not math.isfinite(duration):
        return _check(e, Verdict.ERROR, "the run has no duration", expected=e.value)
    if duration < e.value:
        return _check(
            e,
            Verdict.PASSED,
            f"took {duration:.2f} s, under {e.value} s",
            expected=e.value,
            actual=duration,
        )
    return _check(
        e,
        Verdict.FAILED,
        f"took {duration:.2f} s, not under {e.value} s",
        expected=e.value,
        actual=duration,
    )


def _artifact(e: Expectation, outcome: Outcome) -> Check:
    media = e.options.get("media_type")
    expected = {"name": e.value, **({"media_type": media} if media else {})}
    names = [name for name, _ in outcome.artifacts]
    found = [(name, kind) for name, kind in outcome.artifacts if name == e.value]
    actual = [{"name": name, "media_type": kind} for name, kind in outcome.artifacts]
    if not found:
        listed = ", ".join(names) or "none"
        return _check(
            e,
            Verdict.FAILED,
            f"no artifact {e.value!r} (artifacts: {listed})",
            expected=expected,
            actual=actual,
        )
    if media and not any(kind == media for _, kind in found):
        return _check(
            e,
            Verdict.FAILED,
            f"artifact {e.value!r} is {found[0][1]}, not {media}",
            expected=expected,
            actual=actual,
        )
    return _check(
        e, Verdict.PASSED, f"artifact {e.value!r} is there", expected=expected, actual=actual
    )


_EVALUATORS = {
    "is_error": _is_error,
    "text": _text,
    "contains": _contains,
    "not_contains": _contains,
    "regex": _regex,
    "json_equals": _json_equals,
    "json_subset": _json_subset,
    "jmespath": _jmespath,
    "schema": _schema,
    "duration_under": _duration,
    "artifact": _artifact,
}
# What needs the tool's result; with none (a lost run) these fail.
_NEEDS_RESULT = {"is_error", "text", "contains", "not_contains", "regex", "json_equals"}
_NEEDS_RESULT |= {"json_subset", "jmespath", "schema"}


def check_one(e: Expectation, outcome: Outcome) -> Check:
    """One expectation's Check; never raises."""
    evaluator = _EVALUATORS.get(e.kind)
    if evaluator is None:
        return _check(e, Verdict.ERROR, f"unknown expectation {e.kind!r}")
    if e.kind in _NEEDS_RESULT and not isinstance(outcome.result, Mapping):
        return _check(e, Verdict.FAILED, "the run gave no result", expected=e.value)
    try:
        return evaluator(e, outcome)
    except RecursionError:
        return _check(e, Verdict.ERROR, "cannot be evaluated: the values nest too deeply")
    except Exception as exc:  # an expectation that cannot be evaluated is the case's error
        return _check(e, Verdict.ERROR, f"cannot be evaluated: {type(exc).__name__}: {exc}"[:300])


def _status_check(outcome: Outcome) -> Check | None:
    """A run that did not end with the tool's result fails the case."""
    if outcome.status in FINISHED:
        return None
    says = {
        "timed_out": "the run timed out",
        "cancelled": "the run was cancelled",
        "lost": "the run was lost (its worker stopped)",
    }.get(outcome.status, f"the run did not finish (status {outcome.status})")
    if outcome.error:
        says += f": {outcome.error}"
    return Check(
        "status", Verdict.FAILED, says, expected="succeeded or failed", actual=outcome.status
    )


def evaluate(case: Case, outcome: Outcome) -> CaseResult:
    """The case's verdict on `outcome`: ERROR if any check errored, else FAILED if any
    failed, else PASSED. A case that expects nothing is an ERROR."""
    if not case.expect:
        check = Check("case", Verdict.ERROR, "the case expects nothing", line=case.line)
        return CaseResult(Verdict.ERROR, (check,))
    checks = [check_one(e, outcome) for e in case.expect]
    if (status := _status_check(outcome)) is not None:
        checks.insert(0, status)
    verdicts = {c.verdict for c in checks}
    if Verdict.ERROR in verdicts:
        verdict = Verdict.ERROR
    elif Verdict.FAILED in verdicts:
        verdict = Verdict.FAILED
    else:
        verdict = Verdict.PASSED
    return CaseResult(verdict, tuple(checks))
