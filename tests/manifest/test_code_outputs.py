"""A code tool's `outputs` (issue 29): declared in TOOL.md like an http tool's but without a
`path`, listed as the tool's output schema, and the check a structured result is held to
(tools_app/manifest/outputs.py)."""

from __future__ import annotations

from jsonschema import Draft202012Validator

from tools_app.manifest.outputs import structured_problems
from tools_app.manifest.schema import output_schema, tool_entry
from tools_app.manifest.toolmd import Manifest, ParseResult, parse_toolmd

BASE = ("name: t", "description: A tool.")
OUTPUTS = (
    "outputs:",
    "  count: {type: integer, description: How many.}",
    "  label: {type: string, nullable: true}",
    "  raw: {type: json}",
)


def parse(*lines: str) -> ParseResult:
    return parse_toolmd("---\n" + "".join(f"{line}\n" for line in lines) + "---\n", "t/TOOL.md")


def messages(result: ParseResult) -> list[str]:
    return [str(problem) for problem in result.problems]


def test_it_parses_the_outputs_of_a_code_tool() -> None:
    result = parse(*BASE, "language: python", *OUTPUTS)
    assert result.ok, messages(result)
    assert result.manifest.outputs == {
        "count": {"type": "integer", "description": "How many.", "nullable": False},
        "label": {"type": "string", "description": "", "nullable": True},
        "raw": {"type": "json", "description": "", "nullable": False},
    }
    stored = Manifest.from_dict(result.manifest.to_dict())
    assert stored.outputs == result.manifest.outputs


def test_it_stores_a_code_tool_without_outputs_as_before() -> None:
    # Versions signed before code tools had outputs keep their exact stored form.
    assert "outputs" not in parse(*BASE).manifest.to_dict()


def test_it_names_what_is_wrong_with_code_outputs_and_where() -> None:
    result = parse(
        *BASE,
        "outputs:",
        "  id: {type: string, path: data.id}",
        "  n: {type: integer, sort: up}",
        "  m: {type: date}",
    )
    assert messages(result) == [
        "t/TOOL.md:5: outputs.id.path: is only for kind: http (a code tool returns "
        "structuredContent itself)",
        "t/TOOL.md:6: outputs.n.sort: unknown output key 'sort' (allowed: type, description, "
        "nullable)",
        "t/TOOL.md:7: outputs.m.type: 'date' is not one of string, number, integer, boolean, json",
    ]


def test_it_refuses_outputs_for_a_bash_tool() -> None:
    assert messages(parse(*BASE, "language: bash", *OUTPUTS)) == [
        "t/TOOL.md:5: outputs: a bash tool cannot return structuredContent (its result is its "
        "stdout): declare outputs in a TypeScript, JavaScript or Python tool"
    ]


def test_it_lists_the_output_schema_of_a_code_tool() -> None:
    manifest = parse(*BASE, "language: javascript", *OUTPUTS).manifest
    schema = output_schema(manifest)
    assert schema == {
        "type": "object",
        "properties": {
            "count": {"type": "integer", "description": "How many."},
            "label": {"type": ["string", "null"]},
            "raw": {"not": {"type": "null"}},
        },
        "required": ["count", "raw"],
        "additionalProperties": False,
    }
    Draft202012Validator.check_schema(schema)
    assert tool_entry(manifest, fmt="mcp")["outputSchema"] == schema
    assert tool_entry(manifest, fmt="native")["output_schema"] == schema
    assert "output_schema" not in tool_entry(parse(*BASE).manifest, fmt="native")


def test_the_check_and_the_listed_schema_agree() -> None:
    manifest = parse(*BASE, "language: python", *OUTPUTS).manifest
    validator = Draft202012Validator(output_schema(manifest))
    cases = [
        {"count": 1, "label": None, "raw": [1]},
        {"count": 1, "raw": {"a": 1}},
        {"count": 1.5, "raw": 1},
        {"count": True, "raw": 1},
        {"label": "x", "raw": 1},
        {"count": 1, "raw": 1, "other": 2},
        {"count": 1, "label": 3, "raw": None},
    ]
    for value in cases:
        problems = structured_problems(manifest.outputs, value)
        assert (problems == []) == validator.is_valid(value), (value, problems)


def test_it_words_each_mismatch() -> None:
    outputs = parse(*BASE, *OUTPUTS).manifest.outputs
    assert structured_problems(outputs, [1]) == [
        "structuredContent must be an object, got an array"
    ]
    assert structured_problems(outputs, {"count": "3", "label": 1, "zz": 0}) == [
        "count: expected integer, got a string",
        "label: expected string, got an integer",
        "raw: is missing",
        "zz: is not one of the tool's outputs",
    ]
