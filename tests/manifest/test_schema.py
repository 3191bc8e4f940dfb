"""JSON Schema of tool inputs, registry entries per format, and parameter validation."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from tools_app.manifest.schema import FORMATS, input_schema, tool_entry, validate_params
from tools_app.manifest.toolmd import Manifest, parse_toolmd

TOOLMD = """---
name: lookup
label: Lookup
description: Looks things up.
version: 3
language: python
integrations: [email_db]
timeout: 120
network: false
inputs:
  query:
    type: string
    description: What to look for.
  limit:
    type: integer
    description: How many rows.
    optional: true
    default: 10
  ratio:
    type: number
    description: A ratio.
    optional: true
  exact:
    type: boolean
    description: Exact match only.
    optional: true
    default: false
  mode:
    type: enum
    values: fast, thorough
    description: Search mode.
    optional: true
    default: fast
  api_token:
    type: string
    description: Overrides the integration's token.
    optional: true
    sensitive: true
---
# Lookup
"""


@pytest.fixture
def manifest() -> Manifest:
    result = parse_toolmd(TOOLMD, "lookup/TOOL.md", "lookup")
    assert result.manifest is not None, result.problems
    return result.manifest


def test_it_builds_a_draft_2020_12_schema(manifest: Manifest) -> None:
    schema = input_schema(manifest)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["required"] == ["query"]
    assert list(schema["properties"]) == ["query", "limit", "ratio", "exact", "mode", "api_token"]
    props = schema["properties"]
    assert props["query"] == {"type": "string", "description": "What to look for."}
    assert props["limit"] == {"type": "integer", "description": "How many rows.", "default": 10}
    assert props["ratio"]["type"] == "number" and "default" not in props["ratio"]
    assert props["exact"] == {
        "type": "boolean",
        "description": "Exact match only.",
        "default": False,
    }
    assert props["mode"] == {
        "type": "string",
        "description": "Search mode.",
        "enum": ["fast", "thorough"],
        "default": "fast",
    }
    assert props["api_token"]["writeOnly"] is True


def test_it_builds_an_empty_object_schema_without_inputs() -> None:
    m = parse_toolmd("---\nname: t\ndescription: D.\n---\n").manifest
    schema = input_schema(m)
    assert schema["properties"] == {} and schema["required"] == []
    Draft202012Validator.check_schema(schema)


def test_it_works_from_a_stored_manifest(manifest: Manifest) -> None:
    stored = json.loads(json.dumps(manifest.to_dict()))
    assert input_schema(Manifest.from_dict(stored)) == input_schema(manifest)


# --- registry formats ---------------------------------------------------------------------


def test_it_lists_a_native_entry_with_extra(manifest: Manifest) -> None:
    entry = tool_entry(manifest, fmt="native", extra={"sha256": "ab" * 32})
    assert entry["name"] == "lookup" and entry["label"] == "Lookup"
    assert entry["version"] == 3 and entry["language"] == "python"
    assert entry["integrations"] == ["email_db"]
    assert (entry["timeout"], entry["network"]) == (120, False)
    assert entry["input_schema"] == input_schema(manifest)
    assert entry["sha256"] == "ab" * 32


def test_it_lists_an_openai_function(manifest: Manifest) -> None:
    entry = tool_entry(manifest, fmt="openai", extra={"sha256": "x"})
    assert entry["type"] == "function" and set(entry) == {"type", "function"}
    function = entry["function"]
    assert set(function) == {"name", "description", "parameters"}
    assert function["name"] == "lookup" and function["description"] == "Looks things up."
    assert "$schema" not in function["parameters"]
    assert function["parameters"]["type"] == "object"


def test_it_lists_an_anthropic_tool(manifest: Manifest) -> None:
    entry = tool_entry(manifest, fmt="anthropic", extra={"sha256": "x"})
    assert set(entry) == {"name", "description", "input_schema"}
    assert "$schema" not in entry["input_schema"]
    assert entry["input_schema"]["required"] == ["query"]


def test_it_lists_an_mcp_tool(manifest: Manifest) -> None:
    entry = tool_entry(manifest, fmt="mcp", extra={"sha256": "x", "version": 3})
    assert entry["name"] == "lookup" and entry["title"] == "Lookup"
    assert entry["inputSchema"]["type"] == "object"
    assert entry["_meta"] == {"sha256": "x", "version": 3}
    assert "_meta" not in tool_entry(manifest, fmt="mcp")


@pytest.mark.parametrize("fmt", FORMATS)
def test_it_gives_json_for_every_format(manifest: Manifest, fmt: str) -> None:
    entry = tool_entry(manifest, fmt=fmt)
    assert json.loads(json.dumps(entry, allow_nan=False)) == entry


def test_it_refuses_an_unknown_format(manifest: Manifest) -> None:
    with pytest.raises(ValueError, match="native, openai, openai-responses, anthropic, mcp"):
        tool_entry(manifest, fmt="gemini")


# --- validate_params ------------------------------------------------------------------------


def test_it_applies_defaults(manifest: Manifest) -> None:
    params, errors = validate_params(manifest, {"query": "x"})
    assert errors == []
    assert params == {"query": "x", "limit": 10, "exact": False, "mode": "fast"}


def test_it_keeps_given_values_over_defaults(manifest: Manifest) -> None:
    params, errors = validate_params(manifest, {"query": "x", "limit": 3, "mode": "thorough"})
    assert errors == [] and params["limit"] == 3 and params["mode"] == "thorough"


def test_it_lists_every_error(manifest: Manifest) -> None:
    params, errors = validate_params(
        manifest,
        {"limit": "ten", "ratio": True, "exact": "yes", "mode": "slow", "other": 1, "more": 2},
    )
    assert errors == [
        "exact: must be true or false, got a string",
        "limit: must be an integer, got a string",
        "mode: 'slow' is not one of fast, thorough",
        "more, other: unknown parameter (allowed: query, limit, ratio, exact, mode, api_token)",
        "query: is required",
        "ratio: must be a number, got a boolean",
    ]
    assert params["limit"] == "ten"


def test_it_treats_null_as_not_given(manifest: Manifest) -> None:
    params, errors = validate_params(manifest, {"query": None, "limit": None})
    assert errors == ["query: is required"]
    assert params["limit"] == 10 and "query" not in params


def test_it_accepts_integers_for_numbers_but_not_floats_for_integers(manifest: Manifest) -> None:
    assert validate_params(manifest, {"query": "q", "ratio": 2})[1] == []
    assert validate_params(manifest, {"query": "q", "limit": 2.5})[1] == [
        "limit: must be an integer, got a number"
    ]


def test_it_refuses_non_finite_numbers(manifest: Manifest) -> None:
    _, errors = validate_params(manifest, {"query": "q", "ratio": float("nan")})
    assert errors == ["ratio: must be a finite number"]


def test_it_never_quotes_a_sensitive_value(manifest: Manifest) -> None:
    _, errors = validate_params(manifest, {"query": "q", "api_token": 12345678})
    assert errors == ["api_token: must be a string, got a number"]
    assert "12345678" not in " ".join(errors)


def test_it_does_not_change_the_callers_params(manifest: Manifest) -> None:
    given = {"query": "q"}
    validate_params(manifest, given)
    assert given == {"query": "q"}


@pytest.mark.parametrize("params", [None, [], "query=x", 3])
def test_it_requires_an_object(manifest: Manifest, params: object) -> None:
    filled, errors = validate_params(manifest, params)
    assert filled == {} and len(errors) == 1 and errors[0].startswith("params: must be an object")
