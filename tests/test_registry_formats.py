"""Registry formats checked against the providers' own SDK types (openai, anthropic, mcp),
and OpenAI's strict mode: every input required, optional ones nullable, null = not given."""

from __future__ import annotations

from typing import Any

import mcp_types
import pytest
from anthropic.types import ToolParam
from jsonschema import Draft202012Validator
from openai.types.chat import ChatCompletionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import TypeAdapter
from test_schema import TOOLMD

from tools_app.schema import strict_schema, tool_entry, validate_params
from tools_app.toolmd import Manifest, parse_toolmd

SDK_TYPES: dict[str, Any] = {
    "openai": ChatCompletionToolParam,
    "openai-responses": FunctionToolParam,
    "anthropic": ToolParam,
}


@pytest.fixture
def manifest() -> Manifest:
    result = parse_toolmd(TOOLMD, "lookup/TOOL.md", "lookup")
    assert result.manifest is not None, result.problems
    return result.manifest


def known_keys(typed_dict: Any) -> set[str]:
    return set(typed_dict.__required_keys__ | typed_dict.__optional_keys__)


def check_typed(entry: dict, typed_dict: Any) -> None:
    """Valid for the SDK's TypedDict, and no key it does not know (the APIs refuse those)."""
    TypeAdapter(typed_dict).validate_python(entry, strict=True)
    assert set(entry) <= known_keys(typed_dict), set(entry) - known_keys(typed_dict)


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("fmt", ["openai", "openai-responses"])
def test_it_gives_openai_tools_the_sdk_accepts(manifest, fmt, strict):
    entry = tool_entry(manifest, fmt=fmt, strict=strict)
    check_typed(entry, SDK_TYPES[fmt])
    if fmt == "openai":
        from openai.types.shared_params import FunctionDefinition

        check_typed(entry["function"], FunctionDefinition)
        assert entry["function"].get("strict", False) is strict
    else:
        assert entry["strict"] is strict and entry["name"] == "lookup"


def test_it_gives_anthropic_tools_the_sdk_accepts(manifest):
    check_typed(tool_entry(manifest, fmt="anthropic"), ToolParam)


def test_it_gives_mcp_tools_the_sdk_accepts(manifest):
    tool = mcp_types.Tool.model_validate(tool_entry(manifest, fmt="mcp", extra={"sha256": "x"}))
    assert tool.name == "lookup" and tool.title == "Lookup" and tool.meta == {"sha256": "x"}


def test_it_refuses_strict_for_other_formats(manifest):
    for fmt in ("native", "anthropic", "mcp"):
        with pytest.raises(ValueError, match="strict applies"):
            tool_entry(manifest, fmt=fmt, strict=True)


def all_objects(schema: dict):
    yield schema
    for value in schema.get("properties", {}).values():
        if isinstance(value, dict) and value.get("type") == "object":
            yield from all_objects(value)


def test_strict_requires_every_input_and_makes_optional_ones_nullable(manifest):
    schema = strict_schema(manifest)
    Draft202012Validator.check_schema(schema)
    assert schema["required"] == list(manifest.inputs)
    assert all(obj["additionalProperties"] is False for obj in all_objects(schema))
    props = schema["properties"]
    assert props["query"]["type"] == "string"
    assert props["limit"]["type"] == ["integer", "null"]
    assert props["mode"]["enum"] == ["fast", "thorough", None]
    # Strict mode refuses these keywords; the default moves into the description.
    assert not any("default" in p or "writeOnly" in p for p in props.values())
    assert "Default: 10." in props["limit"]["description"]


def test_a_strict_models_answer_is_valid_and_nulls_mean_not_given(manifest):
    """What a model answers under the strict schema: every key, null for the ones it
    leaves out. The console takes it as if those keys were absent (defaults apply)."""
    answer = {"query": "q", "limit": None, "ratio": None, "exact": None, "mode": None}
    answer["api_token"] = None
    Draft202012Validator(strict_schema(manifest)).validate(answer)

    params, errors = validate_params(manifest, answer)

    assert errors == []
    assert params == {"query": "q", "limit": 10, "exact": False, "mode": "fast"}


@pytest.mark.django_db
def test_the_registry_serves_strict_openai_tools(make_tool):
    from agent_api import agent_client, reset_api_caches

    reset_api_caches()
    make_tool("lookup", language="python", inputs={"q": {"type": "string", "description": "Q."}})
    client = agent_client("registry:read")

    plain = client.get("/api/v1/registry", {"format": "openai-responses"})
    strict = client.get("/api/v1/registry", {"format": "openai-responses", "strict": "true"})

    assert plain.status_code == strict.status_code == 200
    assert plain["ETag"] != strict["ETag"]
    assert plain.json()["tools"][0]["strict"] is False
    entry = strict.json()["tools"][0]
    check_typed(entry, FunctionToolParam)
    assert entry["strict"] is True and entry["parameters"]["additionalProperties"] is False
    chat = client.get("/api/v1/registry", {"format": "openai", "strict": "1"}).json()
    assert chat["tools"][0]["function"]["strict"] is True


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"format": "anthropic", "strict": "true"}, "strict applies"),
        ({"format": "openai", "strict": "maybe"}, "true or false"),
    ],
)
def test_the_registry_refuses_a_bad_strict(query, message):
    from agent_api import agent_client, reset_api_caches

    reset_api_caches()
    response = agent_client("registry:read").get("/api/v1/registry", query)
    assert response.status_code == 422
    assert message in response.json()["detail"][0]["msg"]
