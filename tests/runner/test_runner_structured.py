"""Structured results of code tools (issue 29): a result's `structuredContent`, held by the
runner to the tool's declared `outputs` (tools_app/manifest/outputs.py), in each language
whose harness passes it on, and what a hostile tool gets for lying about it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.runner.test_runner import run_tool, texts
from tools_app.runner import FAILED, SUCCEEDED, Limits

OUTPUTS = {
    "count": {"type": "integer", "description": "", "nullable": False},
    "label": {"type": "string", "description": "", "nullable": True},
}

RETURNING = {
    "typescript": """
        export async function execute(id: string, params: {n: number}) {
          return {content: [{type: "text", text: "done"}],
                  structuredContent: %s};
        }
    """,
    "javascript": """
        export async function execute(id, params) {
          return {content: [{type: "text", text: "done"}], structuredContent: %s};
        }
    """,
    "python": """
        def execute(tool_call_id, params, signal, on_update):
            return {"content": [{"type": "text", "text": "done"}], "structuredContent": %s}
    """,
}


def returning(language: str, value: str) -> str:
    return RETURNING[language] % value


@pytest.mark.parametrize("language", sorted(RETURNING))
def test_it_passes_a_matching_structured_result_on(tmp_path: Path, language: str) -> None:
    value = '{"count": params.n, "label": null}'
    if language == "python":
        value = '{"count": params["n"], "label": None}'
    outcome = run_tool(
        tmp_path, language, returning(language, value), params={"n": 3}, outputs=OUTPUTS
    )
    assert outcome.status == SUCCEEDED, texts(outcome)
    assert outcome.result["structuredContent"] == {"count": 3, "label": None}
    assert outcome.result["content"] == [{"type": "text", "text": "done"}]


@pytest.mark.parametrize("language", sorted(RETURNING))
def test_it_fails_a_result_that_does_not_match_the_outputs(tmp_path: Path, language: str) -> None:
    value = '{"count": "three", "extra": 1}'
    outcome = run_tool(tmp_path, language, returning(language, value), outputs=OUTPUTS)
    assert outcome.status == FAILED
    assert "structuredContent" not in outcome.result
    assert texts(outcome).startswith(
        "The tool's structuredContent does not match its outputs: count: expected integer, "
        "got a string; extra: is not one of the tool's outputs."
    )
    assert "done" in texts(outcome)  # what the tool said is kept after the reason


def test_it_fails_a_result_without_the_structured_content_it_promised(tmp_path: Path) -> None:
    source = """
        export async function execute() { return {content: [{type: "text", text: "hi"}]}; }
    """
    outcome = run_tool(tmp_path, "javascript", source, outputs=OUTPUTS)
    assert outcome.status == FAILED
    assert "declares outputs but its result has no structuredContent" in texts(outcome)
    # A tool that reports an error owes no structured result.
    failing = source.replace('text: "hi"}]', 'text: "no"}], isError: true')
    outcome = run_tool(tmp_path, "javascript", failing, outputs=OUTPUTS)
    assert texts(outcome) == "no"


def test_it_keeps_structured_content_of_a_tool_without_outputs(tmp_path: Path) -> None:
    outcome = run_tool(tmp_path, "python", returning("python", '{"any": [1, {"b": True}]}'))
    assert outcome.status == SUCCEEDED
    assert outcome.result["structuredContent"] == {"any": [1, {"b": True}]}


@pytest.mark.parametrize(
    ("language", "value", "why"),
    [
        ("javascript", "[1, 2]", "structuredContent must be an object, got [1,2]"),
        ("javascript", "(() => { const a = {}; a.a = a; return a; })()", "deeper than 64"),
        ("javascript", "{n: 10n}", "is not JSON"),
        ("python", "[1, 2]", "structuredContent must be a dict, got [1, 2]"),
        ("python", '{"n": float("nan")}', "is not JSON"),
        ("python", "{(1, 2): 3}", "is not JSON"),
    ],
)
def test_the_harness_names_a_structured_result_that_is_not_json_object(
    tmp_path: Path, language: str, value: str, why: str
) -> None:
    outcome = run_tool(tmp_path, language, returning(language, value))
    assert outcome.status == FAILED
    assert texts(outcome).startswith("The tool returned a malformed result: ")
    assert why in texts(outcome)


@pytest.mark.parametrize("language", ["javascript", "python"])
def test_the_harness_refuses_structured_content_too_deep_or_too_large(
    tmp_path: Path, language: str
) -> None:
    if language == "python":
        deep = "(lambda: [v := {}, [v.__setitem__('a', v := {}) for _ in range(70)]][0])()"
        large = '{"x": "y" * 5000}'
    else:
        deep = "(() => { const r = {}; let v = r; for (let i = 0; i < 70; i++) v = v.a = {};"
        deep += " return r; })()"
        large = '{x: "y".repeat(5000)}'
    outcome = run_tool(tmp_path, language, returning(language, deep))
    assert "structuredContent is nested deeper than 64 levels" in texts(outcome)
    limits = Limits(timeout=5, grace_seconds=1, max_result_bytes=4096)
    outcome = run_tool(tmp_path, language, returning(language, large), limits=limits)
    assert "over the result limit of 4096" in texts(outcome)


# The harness runs in the tool's own process, so a hostile tool can write any protocol
# line itself: the runner must hold to everything the harness would have checked.
FORGED = """
    import {writeSync} from "node:fs";
    export async function execute() {
      writeSync(3, JSON.stringify({type: "result", isError: false,
        content: [{type: "text", text: "forged"}], structuredContent: %s}) + "\\n");
      return {content: [{type: "text", text: "real"}]};
    }
"""


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ('"a string"', "it must be an object, got a string"),
        ("[[1]]", "it must be an object, got an array"),
        ('{x: "y".repeat(5000)}', "it is 5009 bytes, over the limit of 4 KiB"),
    ],
)
def test_the_runner_refuses_a_forged_structured_result(
    tmp_path: Path, value: str, why: str
) -> None:
    limits = Limits(timeout=5, grace_seconds=1, max_result_bytes=4096)
    outcome = run_tool(tmp_path, "javascript", FORGED % value, limits=limits)
    assert outcome.status == FAILED
    assert texts(outcome).startswith("The tool's structuredContent was refused: ")
    assert why in texts(outcome)
    assert "structuredContent" not in outcome.result


def test_the_runner_drops_a_protocol_line_nested_past_the_stack(tmp_path: Path) -> None:
    source = """
        import {writeSync} from "node:fs";
        export async function execute() {
          writeSync(3, "[".repeat(200000) + "]".repeat(200000) + "\\n");
          return {content: [{type: "text", text: "after"}]};
        }
    """
    outcome = run_tool(tmp_path, "javascript", source)
    assert (outcome.status, texts(outcome)) == (SUCCEEDED, "after")
    assert any("nested too deep was dropped" in notice for notice in outcome.notices)


def test_it_cleans_and_redacts_structured_content(tmp_path: Path) -> None:
    secret = "s3cr3t-structured-canary"
    source = returning(
        "javascript",
        '{[process.env.KEY]: process.env.KEY, nul: "a\\u0000b", lone: "\\ud800x", '
        "deep: [{k: `x${process.env.KEY}y`}]}",
    )
    outcome = run_tool(
        tmp_path, "javascript", source, env={"KEY": secret}, secrets={"{{api.KEY}}": secret}
    )
    assert outcome.status == SUCCEEDED, texts(outcome)
    structured = outcome.result["structuredContent"]
    assert secret not in repr(outcome.result)
    assert structured["{{api.KEY}}"] == "{{api.KEY}}"
    assert structured["deep"] == [{"k": "x{{api.KEY}}y"}]
    assert structured["nul"] == "a\ufffdb"
    assert structured["lone"] == "\ufffdx"


def test_the_runner_drops_a_forged_result_nested_past_the_cap(tmp_path: Path) -> None:
    deep = "JSON.parse('{\"a\":'.repeat(70) + '1' + '}'.repeat(70))"
    outcome = run_tool(tmp_path, "javascript", FORGED % deep)
    assert (outcome.status, texts(outcome)) == (SUCCEEDED, "real")
    assert any("nested too deep was dropped" in notice for notice in outcome.notices)
