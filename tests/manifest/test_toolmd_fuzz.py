"""Property tests: any input gives a manifest or errors, never an exception."""

from __future__ import annotations

import json
import string
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from tools_app.manifest.inputs import INPUT_TYPES
from tools_app.manifest.languages import LANGUAGES
from tools_app.manifest.schema import input_schema, tool_entry, validate_params
from tools_app.manifest.toolmd import ParseResult, parse_toolmd, set_frontmatter_version

FUZZ = settings(
    max_examples=200,
    deadline=None,
    # The autouse state fixture is function-scoped; these tests never touch it.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def assert_coherent(result: ParseResult) -> None:
    # A manifest exactly when there is no error; every problem names a line and a key.
    assert (result.manifest is None) == bool(result.errors)
    for problem in result.problems:
        assert problem.line >= 1 and problem.key and problem.message
        assert problem.severity in ("error", "warning")
        assert str(problem).startswith(f"{problem.path}:{problem.line}: ")
        assert "\n" not in str(problem) and "\r" not in str(problem)
    if result.manifest is not None:
        json.dumps(result.manifest.to_dict(), allow_nan=False)
        Draft202012Validator.check_schema(input_schema(result.manifest))


@FUZZ
@given(st.text())
def test_it_never_raises_on_any_text(text: str) -> None:
    assert_coherent(parse_toolmd(text))
    assert_coherent(parse_toolmd("---\n" + text))
    assert_coherent(parse_toolmd("---\n" + text + "\n---\n"))


@FUZZ
@given(st.binary())
def test_it_never_raises_on_any_bytes(data: bytes) -> None:
    assert_coherent(parse_toolmd(data))
    assert_coherent(parse_toolmd(b"---\n" + data + b"\n---\n"))


YAML_SCALARS = st.sampled_from(
    [
        "",
        "~",
        "1",
        "-5",
        "0x1f",
        "1.5",
        ".nan",
        "-.inf",
        "true",
        "no",
        "on",
        "2024-01-01",
        "abc",
        "'quoted'",
        '"a\\tb"',
        "[a, b]",
        "{a: 1}",
        "&x 1",
        "*x",
        "!!binary aGk=",
        "!tag x",
        "|\n  block",
        ">\n  folded",
        "[",
        "a: b: c",
        "fast, slow",
        "string",
        "enum",
        "typescript",
        "python",
    ]
)
KEYS = st.sampled_from(
    [
        "name",
        "label",
        "description",
        "version",
        "language",
        "inputs",
        "integrations",
        "timeout",
        "network",
        "category",
        "'on'",
        "on",
        "1",
        "<<",
        "? complex",
    ]
)
INPUT_KEYS = st.sampled_from(
    ["type", "description", "optional", "sensitive", "values", "default", "oops"]
)


@st.composite
def yamlish_frontmatter(draw: st.DrawFn) -> str:
    lines = []
    for key in draw(st.lists(KEYS, max_size=10)):
        if key == "inputs" and draw(st.booleans()):
            lines.append("inputs:")
            for name in draw(st.lists(st.sampled_from(["q", "Url", "_x", "n", "1"]), max_size=3)):
                lines.append(f"  {name}:")
                for spec_key in draw(st.lists(INPUT_KEYS, max_size=6)):
                    lines.append(f"    {spec_key}: {draw(YAML_SCALARS)}")
        else:
            lines.append(f"{key}: {draw(YAML_SCALARS)}")
    return "---\n" + "\n".join(lines) + "\n---\n" + draw(st.text(max_size=40))


@FUZZ
@given(yamlish_frontmatter(), st.booleans())
def test_it_never_raises_on_yamlish_frontmatter(text: str, crlf: bool) -> None:
    if crlf:
        text = text.replace("\n", "\r\n")
    assert_coherent(parse_toolmd(text, "x/TOOL.md", "x"))
    assert_coherent(parse_toolmd(text.encode("utf-8", "surrogatepass")))


NAMES = st.from_regex(r"\A[a-z][a-z0-9_]{0,20}\Z")
INPUT_NAMES = st.from_regex(r"\A[a-z_][a-z0-9_]{0,20}\Z")
WORDS = st.text(alphabet=string.ascii_letters + " .,:-'\"#", min_size=1, max_size=60).filter(
    lambda s: s.strip()
)
ENUM_VALUES = st.lists(
    st.text(alphabet=string.ascii_lowercase + "_ ", min_size=1, max_size=8)
    .map(str.strip)
    .filter(bool),
    min_size=1,
    max_size=4,
    unique=True,
)


@st.composite
def input_specs(draw: st.DrawFn) -> dict[str, Any]:
    type_ = draw(st.sampled_from(INPUT_TYPES))
    spec: dict[str, Any] = {"type": type_, "description": draw(WORDS)}
    if draw(st.booleans()):
        spec["optional"] = draw(st.booleans())
    if draw(st.booleans()):
        spec["sensitive"] = draw(st.booleans())
    values: list[str] = []
    if type_ == "enum":
        values = draw(ENUM_VALUES)
        spec["values"] = ", ".join(values)
    scalars = {
        # No NUL: a default holding one is refused (see test_it_refuses_a_nul_in_any_...).
        "string": st.text(st.characters(exclude_characters="\x00"), max_size=10),
        "integer": st.integers(-1000, 1000),
        "number": st.floats(allow_nan=False, allow_infinity=False) | st.integers(),
        "boolean": st.booleans(),
        "enum": st.sampled_from(values or ["x"]),
    }
    if draw(st.booleans()) and type_ not in ("json", "file", "file[]"):
        if type_.endswith("[]"):  # string[] ...: a list of the item type
            spec["default"] = draw(st.lists(scalars[type_[:-2]], max_size=3))
        else:
            spec["default"] = draw(scalars[type_])
    return spec


@st.composite
def manifests(draw: st.DrawFn) -> dict[str, Any]:
    data: dict[str, Any] = {"name": draw(NAMES), "description": draw(WORDS)}
    if draw(st.booleans()):
        data["label"] = draw(WORDS)
    if draw(st.booleans()):
        data["version"] = draw(st.integers(1, 10**6))
    if draw(st.booleans()):
        data["language"] = draw(st.sampled_from(LANGUAGES))
    if draw(st.booleans()):
        data["timeout"] = draw(st.integers(1, 900))
    if draw(st.booleans()):
        data["network"] = draw(st.booleans())
    if draw(st.booleans()):
        data["integrations"] = draw(
            st.lists(st.from_regex(r"\A[a-z][a-z0-9_-]{0,10}\Z"), unique=True, max_size=3)
        )
    if draw(st.booleans()):
        data["inputs"] = draw(st.dictionaries(INPUT_NAMES, input_specs(), max_size=4))
    return data


def dump(data: dict[str, Any], body: str = "# Tool\n") -> str:
    return "---\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True) + "---\n" + body


@FUZZ
@given(manifests())
def test_it_accepts_generated_valid_manifests_and_their_schemas(data: dict[str, Any]) -> None:
    result = parse_toolmd(dump(data), f"{data['name']}/TOOL.md", data["name"])
    assert_coherent(result)
    assert result.ok, result.errors
    m = result.manifest
    assert m.name == data["name"] and list(m.inputs) == list(data.get("inputs", {}))
    schema = input_schema(m)
    Draft202012Validator.check_schema(schema)
    for fmt in ("native", "openai", "anthropic", "mcp"):
        json.dumps(tool_entry(m, fmt=fmt), allow_nan=False)
    # Defaults alone satisfy every input that is optional.
    filled, errors = validate_params(m, {})
    required = {
        name for name, spec in m.inputs.items() if not spec.optional and not spec.has_default
    }
    assert {e.split(":")[0] for e in errors} == required
    assert set(filled) == {name for name, spec in m.inputs.items() if spec.has_default}


@FUZZ
@given(manifests(), st.integers(1, 2**31 - 1), st.booleans())
def test_it_sets_the_version_of_any_valid_manifest(
    data: dict[str, Any], version: int, crlf: bool
) -> None:
    text = dump(data)
    if crlf:
        text = text.replace("\n", "\r\n")
    new = set_frontmatter_version(text, version)
    before = parse_toolmd(text).manifest
    after = parse_toolmd(new).manifest
    assert after is not None and after.version == version
    assert after.to_dict() | {"version": 0} == before.to_dict() | {"version": 0}


@FUZZ
@given(manifests(), st.data())
def test_it_never_raises_on_mutated_valid_files(data: dict[str, Any], draw: st.DataObject) -> None:
    text = dump(data)
    position = draw.draw(st.integers(0, len(text)))
    cut = draw.draw(st.integers(0, 5))
    insert = draw.draw(
        st.sampled_from(["", "&", "*", ":", "\n", "  ", "---\n", "[", "\t", "\x00", "'"])
    )
    assert_coherent(parse_toolmd(text[:position] + insert + text[position + cut :]))


@FUZZ
@given(manifests(), st.text(max_size=5), st.text(max_size=5))
def test_it_refuses_a_nul_in_any_string_default(
    data: dict[str, Any], before: str, after: str
) -> None:
    data["inputs"] = {"text": {"type": "string", "description": "Text.", "optional": True}}
    data["inputs"]["text"]["default"] = before + "\x00" + after
    result = parse_toolmd(dump(data), f"{data['name']}/TOOL.md", data["name"])
    assert_coherent(result)
    assert [p.key for p in result.errors] == ["inputs.text.default"]
    assert "NUL" in result.errors[0].message
