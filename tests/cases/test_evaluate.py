"""A run's outcome judged against a case: each expectation kind passing and failing, what
cannot be evaluated as an error of the case, never an exception."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tools_app.cases.document import Case, Expectation, parse_cases
from tools_app.cases.evaluate import (
    MAX_SHOWN,
    CaseResult,
    Outcome,
    Verdict,
    contained,
    drop_paths,
    evaluate,
    result_text,
)

PAGE = {"title": "Example Domain", "fetched_at": "2026-01-01T00:00:00Z",
        "links": [{"url": "https://iana.org", "id": 7}, {"url": "https://example.net", "id": 8}],
        "count": 2}  # fmt: skip


def outcome(
    text: str = "Example Domain\nThis domain is for examples.",
    *,
    structured: Any = PAGE,
    error: bool = False,
    status: str = "succeeded",
    duration: float | None = 0.4,
    artifacts: tuple[tuple[str, str], ...] = (("shot.png", "image/png"),),
) -> Outcome:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": error}
    if structured is not None:
        result["structuredContent"] = structured
    return Outcome(status, result, duration, artifacts)


def case_of(*expect: dict[str, Any]) -> Case:
    """A case read from the file form, so each expectation is what parsing gives."""
    text = json.dumps({"cases": [{"name": "c", "expect": list(expect)}]})
    result = parse_cases(text)
    assert result.problems == [], result.problems
    return result.cases[0]


def judge(expectation: dict[str, Any], run: Outcome | None = None) -> CaseResult:
    return evaluate(case_of(expectation), run or outcome())


PASSING = [
    {"is_error": False},
    {"text": "Example Domain\nThis domain is for examples."},
    {"contains": "for examples"},
    {"not_contains": "Traceback"},
    {"regex": r"Example\s+Domain"},
    {"json_equals": {**PAGE, "fetched_at": "another day"}, "ignore": ["fetched_at"]},
    {"json_equals": {**PAGE, "count": 2.0}},
    {"json_subset": {"title": "Example Domain", "links": [{"id": 8}]}},
    {"jmespath": "length(links)", "op": ">=", "value": 1},
    {"jmespath": "title", "value": "Example Domain"},
    {"jmespath": "title", "op": "!=", "value": "Other"},
    {"jmespath": "links[*].url", "op": "contains", "value": "https://iana.org"},
    {"jmespath": "title", "op": "contains", "value": "Domain"},
    {"jmespath": "links[0].url", "op": "matches", "value": "^https://"},
    {"jmespath": "count", "op": "<", "value": 3},
    {"jmespath": "count", "op": "<=", "value": 2},
    {"jmespath": "count", "op": ">", "value": 1.5},
    {"schema": {"type": "object", "required": ["title"],
                "properties": {"count": {"type": "integer"}}}},
    {"duration_under": 1},
    {"artifact": "shot.png"},
    {"artifact": "shot.png", "media_type": "image/png"},
]  # fmt: skip

FAILING = [
    ({"is_error": True}, "the result is no error, the case expects one"),
    ({"text": "Example Domain"}, "the text differs"),
    ({"contains": "Welcome"}, "the text does not contain 'Welcome'"),
    ({"not_contains": "examples"}, "the text contains 'examples'"),
    ({"regex": r"^This"}, "the text does not match '^This'"),
    ({"json_equals": {**PAGE, "count": 3}, "ignore": ["links[*].id"]}, "the JSON differs"),
    ({"json_equals": {**PAGE, "count": True}}, "the JSON differs"),
    ({"json_subset": {"title": "Other"}}, "the JSON does not contain what the case expects"),
    ({"json_subset": {"links": [{"id": 9}]}}, "the JSON does not contain what the case expects"),
    ({"jmespath": "length(links)", "op": ">", "value": 2}, "length(links) gave 2, not > 2"),
    ({"jmespath": "title", "value": "Other"}, "title gave 'Example Domain', not == 'Other'"),
    ({"jmespath": "missing", "op": ">", "value": 1}, "> compares numbers or strings"),
    ({"jmespath": "count", "op": "matches", "value": "2"}, "matches needs a string"),
    ({"jmespath": "count", "op": "contains", "value": 2}, "contains needs a string, list or"),
    ({"schema": {"type": "object", "required": ["author"]}}, "'author' is a required property"),
    ({"duration_under": 0.1}, "took 0.40 s, not under 0.1 s"),
    ({"artifact": "page.pdf"}, "no artifact 'page.pdf' (artifacts: shot.png)"),
    ({"artifact": "shot.png", "media_type": "image/jpeg"}, "is image/png, not image/jpeg"),
]


@pytest.mark.parametrize("expectation", PASSING, ids=lambda e: next(iter(e)))
def test_it_passes_each_kind_when_the_result_meets_it(expectation):
    result = judge(expectation)
    assert result.verdict == Verdict.PASSED, result.to_json()
    assert result.passed
    [check] = result.checks
    assert check.kind == next(iter(expectation)) and check.line == 1


@pytest.mark.parametrize(("expectation", "message"), FAILING, ids=lambda e: str(e)[:30])
def test_it_fails_each_kind_when_the_result_does_not_meet_it(expectation, message):
    result = judge(expectation)
    assert result.verdict == Verdict.FAILED
    [check] = result.checks
    assert check.verdict == Verdict.FAILED
    assert message in check.message, check.message


def test_it_shows_expected_beside_actual_with_a_text_diff():
    [check] = judge({"text": "Example Domain\nThis domain is for testing."}).checks
    assert check.expected == "Example Domain\nThis domain is for testing."
    assert check.actual == "Example Domain\nThis domain is for examples."
    assert check.diff.splitlines() == [
        "--- expected",
        "+++ actual",
        "@@ -1,2 +1,2 @@",
        " Example Domain",
        "-This domain is for testing.",
        "+This domain is for examples.",
    ]


def test_it_diffs_json_pretty_printed_after_dropping_ignored_paths():
    expected = {**PAGE, "title": "Other", "fetched_at": None}
    [check] = judge({"json_equals": expected, "ignore": ["fetched_at", "links[*].id"]}).checks
    assert "fetched_at" not in check.diff and '"id"' not in check.diff
    assert '-  "title": "Other"' in check.diff and '+  "title": "Example Domain"' in check.diff
    assert check.actual["links"] == [{"url": "https://iana.org"}, {"url": "https://example.net"}]


def test_it_reads_json_from_the_text_when_there_is_no_structured_content():
    run = outcome(json.dumps({"pages": 1, "words": ["a"]}), structured=None)
    assert judge({"json_subset": {"pages": 1}}, run).passed
    assert judge({"jmespath": "length(words)", "value": 1}, run).passed
    plain = outcome("not json", structured=None)
    [check] = judge({"json_equals": {}}, plain).checks
    assert check.verdict == Verdict.FAILED
    assert check.message == "the result has no structuredContent and its text is not JSON"


@pytest.mark.parametrize(
    ("expectation", "message"),
    [
        (Expectation("regex", "(", {}, 4), "the regular expression cannot be used"),
        (Expectation("jmespath", "length(title, count)", {"op": "==", "value": 1}, 4), "fails"),
        (Expectation("jmespath", "abs(title)", {"op": "==", "value": 1}, 4), "fails"),
        (Expectation("schema", {"$ref": "#/$defs/missing"}, {}, 4), "the schema cannot be used"),
        (Expectation("schema", {"type": "objec"}, {}, 4), "is not a valid JSON Schema"),
        (Expectation("jmespath", "title", {"op": "matches", "value": "("}, 4), "cannot compare"),
        (Expectation("frobnicate", 1, {}, 4), "unknown expectation 'frobnicate'"),
    ],
)
def test_it_makes_an_expectation_that_cannot_be_evaluated_an_error(expectation, message):
    result = evaluate(Case("c", expect=(expectation,)), outcome())
    assert result.verdict == Verdict.ERROR
    [check] = result.checks
    assert check.verdict == Verdict.ERROR and check.line == 4
    assert message in check.message, check.message


def test_it_errs_on_a_duration_it_does_not_know():
    [check] = judge({"duration_under": 5}, outcome(duration=None)).checks
    assert check.verdict == Verdict.ERROR and check.message == "the run has no duration"


def test_it_calls_a_case_that_expects_nothing_an_error():
    result = evaluate(Case("c", line=3), outcome())
    assert result.verdict == Verdict.ERROR
    assert [(c.kind, c.message, c.line) for c in result.checks] == [
        ("case", "the case expects nothing", 3)
    ]


def test_it_errs_rather_than_fails_when_both_happen():
    case = Case("c", expect=(Expectation("contains", "nope"), Expectation("regex", "(")))
    assert evaluate(case, outcome()).verdict == Verdict.ERROR


@pytest.mark.parametrize(
    ("status", "message"),
    [
        ("timed_out", "the run timed out"),
        ("cancelled", "the run was cancelled"),
        ("lost", "the run was lost (its worker stopped)"),
    ],
)
def test_it_fails_a_run_that_did_not_finish(status, message):
    result = judge({"is_error": False}, outcome(status=status))
    assert result.verdict == Verdict.FAILED
    assert [(c.kind, c.verdict) for c in result.checks] == [
        ("status", Verdict.FAILED),
        ("is_error", Verdict.PASSED),
    ]
    assert result.checks[0].message == message


def test_it_takes_a_failed_run_with_an_error_result_as_finished():
    run = outcome("Error: bad URL", structured=None, error=True, status="failed")
    assert judge({"is_error": True}, run).passed


def test_it_fails_what_needs_a_result_when_the_run_gave_none():
    lost = Outcome("lost", None, None, (), "the worker stopped")
    result = evaluate(case_of({"contains": "x"}, {"artifact": "a.png"}), lost)
    assert result.verdict == Verdict.FAILED
    assert [c.message for c in result.checks] == [
        "the run was lost (its worker stopped): the worker stopped",
        "the run gave no result",
        "no artifact 'a.png' (artifacts: none)",
    ]


def test_it_never_raises_on_odd_results():
    odd: list[Any] = [{}, {"content": "text"}, {"content": [3, {"type": "image"}]},
                      {"structuredContent": float("nan")}, {"isError": "yes"}]  # fmt: skip
    kinds = [{"text": "a"}, {"json_equals": 1}, {"jmespath": "a", "value": 1},
             {"schema": {"type": "object"}}, {"json_subset": [1]}, {"is_error": True}]  # fmt: skip
    for result in odd:
        for expectation in kinds:
            evaluate(case_of(expectation), Outcome("succeeded", result, 1.0))
    assert result_text({"content": [{"type": "text", "text": "a"}, {"type": "image"}]}) == "a"


def test_it_keeps_what_a_check_stores_small_and_json_ready():
    long = "x" * (MAX_SHOWN * 2)
    result = judge({"text": "short"}, outcome(long))
    stored = result.to_json()
    assert stored["verdict"] == "failed"
    assert len(stored["checks"][0]["actual"]) < MAX_SHOWN + 20
    json.dumps(stored)


def test_it_drops_paths_and_tests_containment():
    value = {"a": 1, "items": [{"id": 1, "n": "x"}, {"id": 2, "n": "y"}], "m": {"k": [1, 2, 3]}}
    assert drop_paths(value, ["a", "items[*].id", "m.k[0]", "no.such"]) == {
        "items": [{"n": "x"}, {"n": "y"}],
        "m": {"k": [2, 3]},
    }
    assert value["a"] == 1  # the original is left alone
    assert contained({"items": [{"n": "y"}]}, value)
    assert not contained({"items": [{"n": "z"}]}, value)
    assert contained([2], [1, 2]) and not contained([True], [1])
