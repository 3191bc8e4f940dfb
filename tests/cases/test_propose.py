"""Expectations proposed from a run, and "Accept the new output": what either gives passes
against the run it came from."""

from __future__ import annotations

import json
from typing import Any

from tools_app.cases.document import parse_cases
from tools_app.cases.evaluate import Outcome, Verdict, evaluate
from tools_app.cases.propose import MAX_EXACT_TEXT, accepted, propose
from tools_app.cases.write import add_case


def run(text: str = "Title: Example\n\nBody", structured: Any = None, **kw: Any) -> Outcome:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
    if structured is not None:
        result["structuredContent"] = structured
    if kw.pop("error", False):
        result["isError"] = True
    return Outcome(kw.pop("status", "succeeded"), result, kw.pop("duration", 0.3), **kw)


def as_case(expect: list[dict[str, Any]], name: str = "c"):
    """Through the file and back: what is proposed is what a saved case holds."""
    text = add_case(None, {"name": name, "expect": expect})
    result = parse_cases(text)
    assert result.problems == [], result.problems
    return result.cases[0]


def test_it_proposes_from_what_the_run_gave():
    outcome = run(structured={"title": "Example"}, artifacts=(("shot.png", "image/png"),))
    assert propose(outcome) == [
        {"is_error": False},
        {"text": "Title: Example\n\nBody"},
        {"json_equals": {"title": "Example"}},
        {"duration_under": 1},
        {"artifact": "shot.png", "media_type": "image/png"},
    ]
    assert evaluate(as_case(propose(outcome)), outcome).verdict == Verdict.PASSED


def test_it_proposes_contains_for_long_text_and_a_generous_budget():
    long = "  \nFirst line of a long page\n" + "more text " * MAX_EXACT_TEXT
    proposed = propose(run(long, duration=2.2, error=True))
    assert proposed == [
        {"is_error": True},
        {"contains": "First line of a long page"},
        {"duration_under": 7},
    ]


def test_it_proposes_what_it_can_for_a_run_without_result_or_duration():
    assert propose(Outcome("lost", None, None)) == [{"is_error": False}]


def test_it_accepts_the_new_output_keeping_the_kinds():
    old = run("Version 1", structured={"v": 1, "items": [1, 2], "at": "t1"}, duration=0.2)
    case = as_case(
        [
            {"is_error": False},
            {"text": "Version 1"},
            {"contains": "Version"},
            {"regex": "^Version 1$"},
            {"json_equals": {"v": 1, "items": [1, 2], "at": None}, "ignore": ["at"]},
            {"json_subset": {"v": 1}},
            {"jmespath": "length(items)", "op": ">=", "value": 2},
            {"schema": {"type": "object", "required": ["v"]}},
            {"duration_under": 1},
        ]
    )
    assert evaluate(case, old).passed
    new = run("Release 2\nnotes", structured={"v": 2, "items": [1], "at": "t2"}, duration=5.0)
    assert evaluate(case, new).verdict == Verdict.FAILED
    renewed = accepted(case, new)
    assert renewed == [
        {"is_error": False},
        {"text": "Release 2\nnotes"},
        {"contains": "Release 2"},
        {"regex": "Release\\ 2"},
        {"json_equals": {"v": 2, "items": [1], "at": "t2"}, "ignore": ["at"]},
        {"json_subset": {"v": 2}},
        {"jmespath": "length(items)", "op": "==", "value": 1},
        {"schema": {"type": "object", "required": ["v"]}},  # still passes: kept as written
        {"duration_under": 15},
    ]
    assert evaluate(as_case(renewed), new).verdict == Verdict.PASSED


def test_it_drops_what_the_new_output_cannot_give_and_falls_back_to_proposing():
    case = as_case([{"not_contains": "Error"}, {"artifact": "a.png"}])
    new = run("Error: now it fails", error=True)
    assert accepted(case, new) == propose(new)
    mixed = as_case([{"not_contains": "Error"}, {"is_error": False}])
    assert accepted(mixed, new) == [{"is_error": True}]


def test_it_updates_an_artifacts_media_type():
    case = as_case([{"artifact": "out.txt", "media_type": "text/plain"}])
    new = run(artifacts=(("out.txt", "text/markdown"),))
    assert accepted(case, new) == [{"artifact": "out.txt", "media_type": "text/markdown"}]
    json.dumps(accepted(case, new))
