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

from tests.manifest.test_schema import TOOLMD
from tools_app.manifest.schema import strict_schema, tool_entry, validate_params
from tools_app.manifest.toolmd import Manifest, parse_toolmd

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
    from tests.support.agent_api import agent_client, reset_api_caches

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
    from tests.support.agent_api import agent_client, reset_api_caches

    reset_api_caches()
    response = agent_client("registry:read").get("/api/v1/registry", query)
    assert response.status_code == 422
    assert message in response.json()["detail"][0]["msg"]


def strict_problems(schema: dict, where: str = "parameters") -> list[str]:
    """What OpenAI's strict mode would refuse in `schema`: a node without a type, an
    object whose keys are open or not all required, or a keyword it does not take."""
    problems = []
    if "type" not in schema and "enum" not in schema:
        problems.append(f"{where}: no type")
    problems += [f"{where}: {key}" for key in schema if key in NOT_STRICT_KEYWORDS]
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    if "object" in types:
        if schema.get("additionalProperties") is not False:
            problems.append(f"{where}: additionalProperties is not false")
        if sorted(schema.get("required", [])) != sorted(schema.get("properties", {})):
            problems.append(f"{where}: not every property is required")
        for name, child in schema.get("properties", {}).items():
            problems += strict_problems(child, f"{where}.{name}")
    if "array" in types:
        problems += strict_problems(schema["items"], f"{where}[]")
    return problems


NOT_STRICT_KEYWORDS = {"default", "writeOnly", "contentEncoding", "minLength", "maxLength"}


def test_the_strict_checker_sees_what_strict_mode_refuses():
    assert strict_problems({"type": "object", "properties": {"a": {}}, "required": ["a"]}) == [
        "parameters: additionalProperties is not false",
        "parameters.a: no type",
    ]


def test_strict_makes_a_file_input_strict_all_the_way_down(manifest):
    """A file is an object inside the params: its optional mime_type becomes required and
    nullable, and the keywords strict mode refuses go."""
    file_toolmd = TOOLMD.replace(
        "inputs:\n", "inputs:\n  photo:\n    type: file\n    description: A photo.\n", 1
    )
    result = parse_toolmd(file_toolmd, "lookup/TOOL.md", "lookup")
    assert result.manifest is not None, result.problems

    schema = strict_schema(result.manifest)

    assert schema is not None and strict_problems(schema) == []
    photo = schema["properties"]["photo"]
    assert photo["properties"]["mime_type"]["type"] == ["string", "null"]


def test_strict_states_defaults_as_json():
    result = parse_toolmd(TOOLMD, "lookup/TOOL.md", "lookup")
    assert result.manifest is not None
    descriptions = [p["description"] for p in strict_schema(result.manifest)["properties"].values()]
    assert any(d.endswith("Default: false.") for d in descriptions), descriptions
    assert not any("Default: False" in d or "Default: None" in d for d in descriptions)


def test_a_tool_with_a_json_input_is_served_without_strict():
    """Strict mode cannot describe "any JSON value" (an object's keys must be listed): the
    tool is served as a non-strict tool with its ordinary schema, not with a broken one."""
    json_toolmd = TOOLMD.replace(
        "inputs:\n",
        "inputs:\n  extra:\n    type: json\n    description: Anything.\n    optional: true\n",
        1,
    )
    result = parse_toolmd(json_toolmd, "lookup/TOOL.md", "lookup")
    assert result.manifest is not None, result.problems

    chat = tool_entry(result.manifest, fmt="openai", strict=True)
    responses = tool_entry(result.manifest, fmt="openai-responses", strict=True)

    assert "strict" not in chat["function"] and responses["strict"] is False
    assert "extra" in responses["parameters"]["properties"]
    check_typed(responses, FunctionToolParam)


@pytest.mark.django_db
def test_every_seed_tool_is_served_in_every_format_and_flag():
    """The seed catalog as a fresh install has it (apify_run_actor has an optional json
    input, which once answered 500 under strict): every format, strict or not."""
    from tests.support import REPO
    from tests.support.agent_api import agent_client, reset_api_caches
    from tools_app.catalog.sync import sync_tools

    reset_api_caches()
    sync_tools(REPO / "seed" / "tools")
    client = agent_client("registry:read")
    combinations = [(fmt, "false") for fmt in ("native", "anthropic", "mcp")]
    combinations += [(fmt, flag) for fmt in ("openai", "openai-responses") for flag in ("0", "1")]
    served = 0
    for fmt, flag in combinations:
        response = client.get("/api/v1/registry", {"format": fmt, "strict": flag})
        assert response.status_code == 200, (fmt, flag, response.content[:300])
        for entry in response.json()["tools"]:
            served += 1
            function = entry.get("function", entry)
            if function.get("strict"):
                assert strict_problems(function["parameters"]) == [], function["name"]
            if fmt in SDK_TYPES:
                check_typed(entry, SDK_TYPES[fmt])
    assert served >= len(combinations) * 6


@pytest.mark.parametrize("strict", [False, True])
def test_an_input_with_an_empty_description_is_served_in_every_format(strict):
    """TOOL.md takes `description: ''` with a warning (an OpenAPI import leaves an
    undocumented parameter so): the schemas leave the keyword out, which every SDK takes."""
    empty = TOOLMD.replace("description: What to look for.", "description: ''")
    empty = empty.replace("description: How many rows.", "description:")
    result = parse_toolmd(empty, "lookup/TOOL.md", "lookup")
    assert result.manifest is not None, result.problems
    assert [(p.key, p.severity) for p in result.problems] == [
        ("inputs.query.description", "warning"),
        ("inputs.limit.description", "warning"),
    ]

    for fmt in ("openai", "openai-responses"):
        entry = tool_entry(result.manifest, fmt=fmt, strict=strict)
        check_typed(entry, SDK_TYPES[fmt])
        properties = entry.get("function", entry)["parameters"]["properties"]
        assert "description" not in properties["query"]
        if strict:  # the default moves into the description, with nothing before it
            assert properties["limit"]["description"] == "Default: 10."
            assert strict_problems(entry.get("function", entry)["parameters"]) == []
    if strict:
        return
    check_typed(tool_entry(result.manifest, fmt="anthropic"), ToolParam)
    mcp_types.Tool.model_validate(tool_entry(result.manifest, fmt="mcp"))
    native = tool_entry(result.manifest, fmt="native")
    Draft202012Validator.check_schema(native["input_schema"])
    assert "description" not in native["input_schema"]["properties"]["query"]
