"""TOOL.md parsing and validation (docs/tool-format.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tools_app.catalog.bundle import MAX_FILE_BYTES
from tools_app.http_tools.checks import ValidationContext
from tools_app.lib.strictyaml import Problem
from tools_app.manifest.folder import scan, validate_files, validate_tool_dir
from tools_app.manifest.inputs import InputSpec
from tools_app.manifest.languages import ENTRY_FILES
from tools_app.manifest.limits import MAX_FRONTMATTER, MAX_TOOLMD
from tools_app.manifest.toolmd import (
    Manifest,
    ParseResult,
    parse_toolmd,
    set_frontmatter_version,
)

# Code tools: their checks read nothing of a console.
NO_CONSOLE = ValidationContext()

TS = b"export async function execute() { return { content: [] }; }\n"


def toolmd(*lines: str, body: str = "# Tool\n") -> str:
    return "---\n" + "".join(line + "\n" for line in lines) + "---\n" + body


def parse(*lines: str, folder: str | None = None) -> ParseResult:
    return parse_toolmd(toolmd(*lines), "t/TOOL.md", folder)


def only_error(result: ParseResult) -> Problem:
    assert result.manifest is None
    assert len(result.errors) == 1, result.errors
    return result.errors[0]


BASE = ("name: t", "description: A tool.")


# --- A valid manifest ---------------------------------------------------------------------


def test_it_parses_a_minimal_tool_with_defaults() -> None:
    result = parse(*BASE, folder="t")
    assert result.ok and result.problems == []
    m = result.manifest
    assert m is not None
    assert (m.name, m.label, m.description) == ("t", "t", "A tool.")
    assert (m.version, m.language, m.timeout, m.network) == (1, "typescript", 60, True)
    assert m.inputs == {} and m.integrations == () and m.extra == {}
    assert m.body == "# Tool\n"
    assert m.entry_candidates == ("index.ts",)


def test_it_parses_every_field() -> None:
    result = parse(
        "name: lookup",
        "label: Lookup",
        "description: Looks things up.",
        "version: 3",
        "language: python",
        "integrations: [email_db, git-hub]",
        "timeout: 120",
        "network: false",
        "inputs:",
        "  query:",
        "    type: string",
        "    description: What to look for.",
        "  limit:",
        "    type: integer",
        "    description: Rows.",
        "    optional: true",
        "    default: 10",
        "  mode:",
        "    type: enum",
        "    values: fast, thorough",
        "    description: Mode.",
        "    optional: true",
        "    default: fast",
        "  token:",
        "    type: string",
        "    description: Token.",
        "    optional: true",
        "    sensitive: true",
    )
    assert result.problems == []
    m = result.manifest
    assert m is not None
    assert (m.label, m.version, m.language, m.timeout, m.network) == (
        "Lookup",
        3,
        "python",
        120,
        False,
    )
    assert m.integrations == ("email_db", "git-hub")
    assert list(m.inputs) == ["query", "limit", "mode", "token"]
    assert m.inputs["query"] == InputSpec("query", "string", "What to look for.")
    assert m.inputs["limit"].default == 10 and m.inputs["limit"].has_default
    assert m.inputs["mode"].values == ("fast", "thorough")
    assert m.inputs["token"].sensitive and not m.inputs["token"].has_default
    assert m.entry_candidates == ("index.py",)


def test_it_keeps_inputs_in_file_order() -> None:
    lines = [*BASE, "inputs:"]
    for name in ("zeta", "alpha", "mid"):
        lines += [f"  {name}:", "    type: string", "    description: D."]
    assert list(parse(*lines).manifest.inputs) == ["zeta", "alpha", "mid"]


def test_it_round_trips_to_dict_as_json() -> None:
    m = parse(
        *BASE,
        "extra_date: 2024-01-02",
        "inputs:",
        "  n:",
        "    type: number",
        "    description: N.",
        "    optional: true",
        "    default: 0.5",
    ).manifest
    data = m.to_dict()
    assert list(data) == [
        "name",
        "label",
        "description",
        "version",
        "language",
        "inputs",
        "integrations",
        "timeout",
        "network",
        "extra",
    ]
    assert json.loads(json.dumps(data)) == data
    assert data["extra"] == {"extra_date": "2024-01-02"}
    assert Manifest.from_dict(data, body=m.body) == m


# --- name -------------------------------------------------------------------------------


def test_it_requires_a_name() -> None:
    problem = only_error(parse("description: A tool."))
    assert (problem.key, problem.line, problem.message) == ("name", 1, "is required")


@pytest.mark.parametrize(
    "name", ["WebFetch", "1tool", "web-fetch", "_tool", "a" * 65, "'web fetch'", "''"]
)
def test_it_rejects_invalid_names(name: str) -> None:
    problem = only_error(parse(f"name: {name}", "description: D."))
    assert problem.key == "name" and problem.line == 2


@pytest.mark.parametrize("name", ["a", "web_fetch", "a1_b2", "a" * 64])
def test_it_accepts_valid_names(name: str) -> None:
    assert parse(f"name: {name}", "description: D.", folder=name).ok


def test_it_rejects_a_name_that_is_not_a_string() -> None:
    problem = only_error(parse("name: 12", "description: D."))
    assert problem.key == "name" and "string" in problem.message


def test_it_requires_the_name_to_equal_the_folder_name() -> None:
    problem = only_error(parse(*BASE, folder="other"))
    assert problem.key == "name" and "'other'" in problem.message


# --- label and description --------------------------------------------------------------


def test_it_rejects_a_label_that_is_not_a_string() -> None:
    assert only_error(parse(*BASE, "label: [a]")).key == "label"


def test_it_treats_an_empty_optional_key_as_not_set() -> None:
    m = parse(*BASE, "label:", "integrations:", "inputs:", "timeout: ~").manifest
    assert m is not None and m.label == "t" and m.timeout == 60


@pytest.mark.parametrize(
    "line", ["description:", "description: ''", "description: '   '", "description: 5"]
)
def test_it_rejects_a_missing_empty_or_non_string_description(line: str) -> None:
    problem = only_error(parse("name: t", line))
    assert problem.key == "description" and problem.line == 3


def test_it_requires_a_description() -> None:
    assert only_error(parse("name: t")).key == "description"


def test_it_limits_the_description_to_2000_characters() -> None:
    assert parse("name: t", "description: " + "x" * 2000).ok
    problem = only_error(parse("name: t", "description: " + "x" * 2001))
    assert problem.key == "description" and "2001" in problem.message


def test_it_strips_a_folded_description() -> None:
    m = parse("name: t", "description: >", "  Two", "  lines.").manifest
    assert m.description == "Two lines."


# --- version, language, timeout, network ------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-1", "true", "'3'", "3.0", "2147483648", "[1]"])
def test_it_rejects_bad_versions(value: str) -> None:
    problem = only_error(parse(*BASE, f"version: {value}"))
    assert (problem.key, problem.line) == ("version", 4)


def test_it_accepts_a_version() -> None:
    assert parse(*BASE, "version: 12").manifest.version == 12


@pytest.mark.parametrize("language", ["typescript", "javascript", "bash", "python"])
def test_it_accepts_every_language(language: str) -> None:
    m = parse(*BASE, f"language: {language}").manifest
    assert m.language == language and m.entry_candidates == ENTRY_FILES[language]


@pytest.mark.parametrize("value", ["ruby", "TypeScript", "[python]", "1"])
def test_it_rejects_other_languages(value: str) -> None:
    problem = only_error(parse(*BASE, f"language: {value}"))
    assert problem.key == "language" and "typescript, javascript, bash, python" in problem.message


@pytest.mark.parametrize("value", ["1", "900"])
def test_it_accepts_timeouts_in_range(value: str) -> None:
    assert parse(*BASE, f"timeout: {value}").manifest.timeout == int(value)


@pytest.mark.parametrize("value", ["0", "901", "'60'", "60s", "true", "1.5"])
def test_it_rejects_bad_timeouts(value: str) -> None:
    assert only_error(parse(*BASE, f"timeout: {value}")).key == "timeout"


def test_it_reads_network_as_a_boolean() -> None:
    assert parse(*BASE, "network: false").manifest.network is False
    assert parse(*BASE, "network: yes").manifest.network is True  # YAML 1.1 boolean


@pytest.mark.parametrize("value", ["'no'", "0", "off-line", "[]"])
def test_it_rejects_a_network_that_is_not_a_boolean(value: str) -> None:
    assert only_error(parse(*BASE, f"network: {value}")).key == "network"


# --- integrations -----------------------------------------------------------------------


def test_it_accepts_integration_slugs() -> None:
    m = parse(*BASE, "integrations:", "  - github", "  - email-db_2").manifest
    assert m.integrations == ("github", "email-db_2")


def test_it_requires_integrations_to_be_a_list() -> None:
    problem = only_error(parse(*BASE, "integrations: github"))
    assert problem.key == "integrations" and "list" in problem.message


@pytest.mark.parametrize("value", ["'Git Hub'", "GitHub", "-x", "1.5", "{a: b}"])
def test_it_rejects_bad_integration_slugs(value: str) -> None:
    problem = only_error(parse(*BASE, f"integrations: [ok, {value}]"))
    assert (problem.key, problem.line) == ("integrations[1]", 4)


def test_it_rejects_a_duplicate_integration() -> None:
    problem = only_error(parse(*BASE, "integrations: [a, a]"))
    assert problem.key == "integrations[1]" and "twice" in problem.message


# --- inputs -----------------------------------------------------------------------------


def inputs(*spec: str, name: str = "q") -> ParseResult:
    return parse(*BASE, "inputs:", f"  {name}:", *(f"    {line}" for line in spec))


def test_it_requires_inputs_to_be_a_mapping() -> None:
    assert only_error(parse(*BASE, "inputs: [a, b]")).key == "inputs"


@pytest.mark.parametrize("name", ["Url", "1st", "a-b", "x" * 65])
def test_it_rejects_bad_input_names(name: str) -> None:
    problem = only_error(inputs("type: string", "description: D.", name=name))
    assert (problem.key, problem.line) == (f"inputs.{name}", 5)


@pytest.mark.parametrize("name", ["_private", "a", "url2", "x" * 64])
def test_it_accepts_input_names(name: str) -> None:
    assert name in inputs("type: string", "description: D.", name=name).manifest.inputs


def test_it_requires_an_input_spec_to_be_a_mapping() -> None:
    result = parse(*BASE, "inputs:", "  url: string")
    assert only_error(result).key == "inputs.url"


def test_it_rejects_unknown_input_keys() -> None:
    problem = only_error(inputs("type: string", "description: D.", "requried: true"))
    assert (problem.key, problem.line) == ("inputs.q.requried", 8)
    assert "unknown input key" in problem.message


def test_it_requires_an_input_type() -> None:
    problem = only_error(inputs("description: D."))
    assert (problem.key, problem.line) == ("inputs.q.type", 5)


def test_it_requires_an_input_description() -> None:
    problem = only_error(inputs("type: string"))
    assert (problem.key, problem.line) == ("inputs.q.description", 5)
    assert "description: '' leaves it empty" in problem.message


@pytest.mark.parametrize("line", ["description: ''", "description: '   '", "description:"])
def test_an_empty_input_description_is_a_warning_not_an_error(line: str) -> None:
    result = inputs("type: string", line)

    assert result.manifest is not None and result.manifest.inputs["q"].description == ""
    [problem] = result.problems
    assert (problem.key, problem.line, problem.severity) == ("inputs.q.description", 7, "warning")
    assert str(problem).startswith("t/TOOL.md:7: inputs.q.description: warning: is empty")


def test_an_input_description_must_still_be_text() -> None:
    problem = only_error(inputs("type: string", "description: [a, b]"))
    assert problem.key == "inputs.q.description" and "must be a string" in problem.message


def test_it_names_file_line_and_key_like_the_design_example() -> None:
    text = toolmd(
        "name: web_fetch",
        "description: Fetches a web page.",
        "language: typescript",
        "inputs:",
        "  url:",
        "    type: strng",
        "    description: The URL.",
    )
    result = parse_toolmd(text, "seed/tools/web_fetch/TOOL.md", "web_fetch")
    assert [str(p) for p in result.problems] == [
        "seed/tools/web_fetch/TOOL.md:7: inputs.url.type: "
        "'strng' is not one of string, number, integer, boolean, enum, "
        "json, file, file[], string[], number[], integer[], boolean[]"  # section 8's additions
    ]


@pytest.mark.parametrize("key", ["optional", "sensitive"])
def test_it_requires_boolean_flags(key: str) -> None:
    problem = only_error(inputs("type: string", "description: D.", f"{key}: maybe"))
    assert problem.key == f"inputs.q.{key}"


def test_it_requires_values_for_an_enum() -> None:
    problem = only_error(inputs("type: enum", "description: D."))
    assert (problem.key, problem.line) == ("inputs.q.values", 5)


@pytest.mark.parametrize("type_", ["string", "number", "integer", "boolean"])
def test_it_allows_values_only_for_an_enum(type_: str) -> None:
    problem = only_error(inputs(f"type: {type_}", "values: a,b", "description: D."))
    assert (problem.key, problem.line) == ("inputs.q.values", 7)


def test_it_splits_and_strips_comma_separated_values() -> None:
    spec = inputs("type: enum", "values: ' a ,b,  c '", "description: D.").manifest.inputs["q"]
    assert spec.values == ("a", "b", "c")


@pytest.mark.parametrize("values", ["'a,,b'", "'a,'", "a, b, a", "5", "{a: b}"])
def test_it_rejects_bad_values(values: str) -> None:
    assert only_error(inputs("type: enum", f"values: {values}", "description: D.")).key == (
        "inputs.q.values"
    )


def test_it_accepts_a_yaml_list_of_values_with_a_warning() -> None:
    result = inputs("type: enum", "values: [a, b]", "description: D.")
    assert result.manifest.inputs["q"].values == ("a", "b")
    assert [w.key for w in result.warnings] == ["inputs.q.values"]


@pytest.mark.parametrize(
    ("type_", "default", "expected"),
    [
        ("string", "hello", "hello"),
        ("string", "''", ""),
        ("integer", "10", 10),
        ("integer", "-3", -3),
        ("number", "0.5", 0.5),
        ("number", "3", 3),
        ("boolean", "false", False),
        ("enum", "b", "b"),
    ],
)
def test_it_accepts_defaults_of_the_right_type(type_: str, default: str, expected: object) -> None:
    values = ["values: a, b"] if type_ == "enum" else []
    result = inputs(
        f"type: {type_}", *values, f"default: {default}", "optional: true", "description: D."
    )
    assert result.problems == []
    spec = result.manifest.inputs["q"]
    assert spec.has_default and spec.default == expected
    assert type(spec.default) is type(expected)


@pytest.mark.parametrize(
    ("type_", "default"),
    [
        ("string", "3"),
        ("string", "true"),
        ("integer", "1.5"),
        ("integer", "true"),
        ("integer", "'3'"),
        ("number", "abc"),
        ("number", "true"),
        ("number", ".nan"),
        ("number", ".inf"),
        ("boolean", "'true'"),
        ("boolean", "0"),
        ("enum", "c"),
        ("enum", "1"),
        ("string", "[a]"),
    ],
)
def test_it_rejects_defaults_of_the_wrong_type(type_: str, default: str) -> None:
    values = ["values: a, b"] if type_ == "enum" else []
    result = inputs(
        f"type: {type_}", *values, f"default: {default}", "optional: true", "description: D."
    )
    problem = only_error(result)
    assert problem.key == "inputs.q.default"


@pytest.mark.parametrize(
    ("type_", "default", "message"),
    [
        ("string", '"a\\0b"', "may not contain NUL characters"),
        ("json", '{k: "\\0"}', "may not contain NUL characters"),
    ],
)
def test_it_rejects_defaults_a_run_would_refuse(type_: str, default: str, message: str) -> None:
    # Params with NUL or a lone surrogate are refused at run time (PostgreSQL stores
    # neither in JSON), so a default holding one would make every run fail.
    result = inputs(f"type: {type_}", f"default: {default}", "optional: true", "description: D.")
    problem = only_error(result)
    assert problem.key == "inputs.q.default" and message in problem.message


def test_it_warns_about_a_default_on_a_required_input() -> None:
    result = inputs("type: string", "description: D.", "default: x")
    assert result.ok and [w.key for w in result.warnings] == ["inputs.q.default"]


def test_it_warns_about_a_default_on_a_sensitive_input() -> None:
    result = inputs(
        "type: string", "description: D.", "optional: true", "sensitive: true", "default: x"
    )
    assert result.ok and "sensitive" in result.warnings[0].message


# --- unknown keys -----------------------------------------------------------------------


def test_it_warns_about_unknown_top_level_keys_and_keeps_them() -> None:
    result = parse(*BASE, "category: web", "tags: [a, b]")
    assert result.ok and result.errors == []
    assert [(w.key, w.line) for w in result.warnings] == [("category", 4), ("tags", 5)]
    assert (
        str(result.warnings[0])
        == "t/TOOL.md:4: category: warning: unknown key 'category' is ignored"
    )
    assert result.manifest.extra == {"category": "web", "tags": ["a", "b"]}


def test_it_names_unknown_input_request_and_output_keys_with_the_allowed_ones() -> None:
    result = parse(
        *BASE,
        "kind: http",
        "inputs:",
        '  q: {type: string, description: D., "two words": 1}',
        "request:",
        "  method: GET",
        "  url: https://api.example.org/items",
        "  verb: GET",
        "outputs:",
        "  id: {type: string, path: data.id, sort: up}",
    )
    assert [str(p) for p in result.problems] == [
        "t/TOOL.md:6: inputs.q.'two words': unknown input key 'two words' (allowed: type, "
        "description, optional, sensitive, values, default, visibility)",
        "t/TOOL.md:10: request.verb: unknown request key 'verb' (allowed: method, url, query, "
        "headers, body, response, timeout)",
        "t/TOOL.md:12: outputs.id.sort: unknown output key 'sort' (allowed: type, path, "
        "description, nullable)",
    ]


# --- frontmatter and YAML ---------------------------------------------------------------


def test_it_requires_frontmatter() -> None:
    problem = only_error(parse_toolmd("# Just markdown\n"))
    assert (problem.key, problem.line) == ("frontmatter", 1)


@pytest.mark.parametrize("text", ["", "\n---\nname: t\n---\n", " ---\nname: t\n---\n", "--- x\n"])
def test_it_requires_frontmatter_on_line_1(text: str) -> None:
    assert only_error(parse_toolmd(text)).key == "frontmatter"


def test_it_requires_the_frontmatter_to_be_closed() -> None:
    problem = only_error(parse_toolmd("---\nname: t\ndescription: D.\n"))
    assert problem.key == "frontmatter" and "closed" in problem.message


def test_it_accepts_delimiters_with_trailing_spaces_and_no_body() -> None:
    m = parse_toolmd("---  \nname: t\ndescription: D.\n---\t").manifest
    assert m is not None and m.body == ""


def test_it_reports_an_empty_frontmatter_as_missing_keys() -> None:
    result = parse_toolmd("---\n---\n")
    assert [p.key for p in result.errors] == ["name", "description"]


@pytest.mark.parametrize("yaml_text", ["- a\n- b\n", "just text\n", "42\n"])
def test_it_requires_the_frontmatter_to_be_a_mapping(yaml_text: str) -> None:
    assert only_error(parse_toolmd(f"---\n{yaml_text}---\n")).key == "frontmatter"


def test_it_reports_yaml_syntax_errors_with_a_line() -> None:
    result = parse("name: t", "description: [unclosed", "inputs:", "  a: b")
    problem = only_error(result)
    assert problem.key == "frontmatter" and "YAML" in problem.message
    assert problem.line == 4


def test_it_reports_bad_indentation_as_a_yaml_error() -> None:
    problem = only_error(parse("name: t", "  description: D.", " x: 1"))
    assert problem.key == "frontmatter" and "YAML" in problem.message


def test_it_refuses_anchors() -> None:
    problem = only_error(parse("name: t", "description: &d D.", "label: x"))
    assert (problem.key, problem.line) == ("frontmatter", 3)
    assert "anchor" in problem.message


def test_it_refuses_aliases_without_expanding_them() -> None:
    lines = ["name: t", "description: D.", "a: &a [x, x, x, x, x, x, x, x, x]"]
    lines += [
        f"{k}: &{k} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]"
        for p, k in zip("abcdefgh", "bcdefghi", strict=True)
    ]
    problem = only_error(parse(*lines))
    assert problem.key == "frontmatter" and "alias" in problem.message


def test_it_refuses_merge_keys() -> None:
    assert only_error(parse(*BASE, "<<: {label: x}")).key == "<<"


def test_it_refuses_duplicate_keys_naming_them() -> None:
    problem = only_error(parse("name: t", "description: D.", "name: u"))
    assert (problem.key, problem.line) == ("name", 4)
    assert "duplicate" in problem.message and "line 2" in problem.message


def test_it_refuses_duplicate_input_keys() -> None:
    problem = only_error(inputs("type: string", "description: D.", "type: number"))
    assert problem.key == "inputs.q.type" and "duplicate" in problem.message


@pytest.mark.parametrize(
    ("key", "shown"), [("1", "1"), ("on", "on"), ("null", "null"), ("2024-01-01", "2024-01-01")]
)
def test_it_refuses_keys_that_are_not_strings(key: str, shown: str) -> None:
    problem = only_error(
        parse(*BASE, "inputs:", f"  {key}:", "    type: string", "    description: D.")
    )
    assert problem.key == f"inputs.{shown}" and "string" in problem.message


def test_it_accepts_a_quoted_key_that_would_not_be_a_string() -> None:
    result = parse(*BASE, "inputs:", "  'on':", "    type: string", "    description: D.")
    assert list(result.manifest.inputs) == ["on"]


@pytest.mark.parametrize(
    "value",
    [
        "!!python/object:os.system echo",
        "!!binary aGVsbG8=",
        "!custom x",
        "!!set {a}",
        "!!omap [a: 1]",
    ],
)
def test_it_refuses_yaml_tags(value: str) -> None:
    problem = only_error(parse("name: t", "description: D.", f"label: {value}"))
    assert problem.key == "label" and "tag" in problem.message


def test_it_refuses_deep_nesting() -> None:
    problem = only_error(parse(*BASE, "deep: " + "[" * 200 + "]" * 200))
    assert problem.key == "frontmatter" and "nested" in problem.message


def test_it_reports_an_unreadable_huge_integer() -> None:
    problem = only_error(parse(*BASE, "version: 1" + "0" * 5000))
    assert problem.key == "version" and len(problem.message) < 300


def test_it_reports_unprintable_characters_in_the_frontmatter() -> None:
    problem = only_error(parse_toolmd("---\nname: t\ndescription: a\x00b\n---\n"))
    assert problem.key == "frontmatter" and "YAML" in problem.message and problem.line == 3


# --- encodings, line endings, sizes -------------------------------------------------------


def test_it_reads_crlf_files_with_the_same_lines() -> None:
    text = toolmd(*BASE, "timeout: 0", body="# T\n\nx\n").replace("\n", "\r\n")
    problem = only_error(parse_toolmd(text))
    assert (problem.key, problem.line) == ("timeout", 4)
    m = parse_toolmd(text.replace("timeout: 0", "timeout: 5")).manifest
    assert m.description == "A tool." and m.body == "# T\n\nx\n"


def test_it_reads_old_mac_line_endings() -> None:
    m = parse_toolmd(toolmd(*BASE).replace("\n", "\r")).manifest
    assert m is not None and m.name == "t"


@pytest.mark.parametrize("as_bytes", [True, False])
def test_it_skips_a_byte_order_mark(as_bytes: bool) -> None:
    text = "\ufeff" + toolmd(*BASE)
    m = parse_toolmd(text.encode() if as_bytes else text).manifest
    assert m is not None and m.name == "t"


def test_it_reports_invalid_utf8_with_its_line() -> None:
    data = toolmd(*BASE).encode().replace(b"A tool.", b"A \xff tool.")
    problem = only_error(parse_toolmd(data))
    assert (problem.key, problem.line) == ("file", 3) and "UTF-8" in problem.message


def test_it_caps_the_whole_file_before_parsing() -> None:
    text = toolmd(*BASE, body="x" * MAX_TOOLMD)
    problem = only_error(parse_toolmd(text))
    assert problem.key == "file" and str(MAX_TOOLMD) in problem.message
    # The cap holds before YAML is read: broken YAML is not even looked at.
    assert only_error(parse_toolmd(b"---\n[[[\n---\n" + b"x" * MAX_TOOLMD)).key == "file"


def test_it_caps_the_frontmatter_before_parsing() -> None:
    big = "note: '" + "x" * MAX_FRONTMATTER + "'"
    problem = only_error(parse(*BASE, big))
    assert problem.key == "frontmatter" and str(MAX_FRONTMATTER) in problem.message
    fits = "note: '" + "x" * (MAX_FRONTMATTER - 200) + "'"
    assert parse(*BASE, fits).ok


@pytest.mark.parametrize(
    "text",
    [b"\xff\xfe\x00", b"---", b"---\n", "---\n\ud800\n---\n", b"---\n\t\n---\n", "\x00" * 10],
)
def test_it_never_raises_on_junk(text: str | bytes) -> None:
    result = parse_toolmd(text)
    assert (result.manifest is None) == bool(result.errors)


# --- Problem formatting -----------------------------------------------------------------


def test_it_formats_problems_as_path_line_key_message() -> None:
    assert str(Problem("a/TOOL.md", 3, "name", "is required")) == "a/TOOL.md:3: name: is required"
    warning = Problem("a/TOOL.md", 4, "x", "unknown", "warning")
    assert str(warning) == "a/TOOL.md:4: x: warning: unknown"


# --- validate_files / validate_tool_dir ---------------------------------------------------


def files_for(*lines: str, entry: str | None = "index.ts") -> dict[str, bytes]:
    files = {"TOOL.md": toolmd(*lines).encode()}
    if entry:
        files[entry] = TS
    return files


def test_it_validates_an_in_memory_folder() -> None:
    result = validate_files(files_for(*BASE), "tools/t", context=NO_CONSOLE)
    assert result.ok and result.manifest.name == "t"


def test_it_accepts_the_toolmd_path_as_well_as_the_folder() -> None:
    result = validate_files(
        files_for("name: u", "description: D."), "tools/t/TOOL.md", context=NO_CONSOLE
    )
    problem = only_error(result)
    assert problem.path == "tools/t/TOOL.md" and problem.key == "name"


def test_it_reports_a_missing_toolmd() -> None:
    problem = only_error(validate_files({"index.ts": TS}, "tools/t", context=NO_CONSOLE))
    assert (problem.path, problem.key) == ("tools/t/TOOL.md", "TOOL.md")


def test_it_reports_a_missing_entry_file() -> None:
    problem = only_error(
        validate_files(files_for(*BASE, entry=None), "tools/t", context=NO_CONSOLE)
    )
    assert problem.key == "entry" and "index.ts is missing" in problem.message


def test_it_names_an_entry_file_for_another_language() -> None:
    problem = only_error(
        validate_files(files_for(*BASE, "language: python"), "tools/t", context=NO_CONSOLE)
    )
    assert "index.py is missing" in problem.message and "index.ts" in problem.message


@pytest.mark.parametrize("entry", ["index.js", "index.mjs"])
def test_it_accepts_either_javascript_entry(entry: str) -> None:
    assert validate_files(
        files_for(*BASE, "language: javascript", entry=entry), "t", context=NO_CONSOLE
    ).ok


def test_it_warns_when_both_javascript_entries_exist() -> None:
    files = {**files_for(*BASE, "language: javascript", entry="index.js"), "index.mjs": TS}
    result = validate_files(files, "t", context=NO_CONSOLE)
    assert result.ok and [w.key for w in result.warnings] == ["entry"]


def test_it_applies_the_bundle_limits_to_in_memory_folders() -> None:
    files = {**files_for(*BASE), "big.bin": b"x" * (MAX_FILE_BYTES + 1)}
    problem = only_error(validate_files(files, "t", context=NO_CONSOLE))
    assert problem.key == "files" and "big.bin" in problem.message
    assert (
        only_error(validate_files({**files_for(*BASE), "../x": b""}, "t", context=NO_CONSOLE)).key
        == "files"
    )


def test_it_reports_no_entry_even_when_toolmd_is_invalid() -> None:
    result = validate_files(files_for("name: t", entry=None), "t", context=NO_CONSOLE)
    assert {p.key for p in result.errors} == {"description", "entry"}


def write_tool(folder: Path, files: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True)
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    return folder


def test_it_validates_a_folder_on_disk(tmp_path: Path) -> None:
    folder = write_tool(tmp_path / "t", files_for(*BASE))
    assert validate_tool_dir(folder, context=NO_CONSOLE).ok
    assert validate_tool_dir(folder, context=NO_CONSOLE).manifest.name == "t"


def test_it_reports_a_symlink_in_a_tool_folder(tmp_path: Path) -> None:
    folder = write_tool(tmp_path / "t", files_for(*BASE))
    os.symlink("/etc/passwd", folder / "passwd")
    problem = only_error(validate_tool_dir(folder, context=NO_CONSOLE))
    assert problem.key == "files" and "symbolic link" in problem.message


def test_it_uses_the_real_folder_name_for_dot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_tool(tmp_path / "t", files_for(*BASE))
    monkeypatch.chdir(folder)
    assert validate_tool_dir(Path("."), context=NO_CONSOLE).ok


# --- scan -------------------------------------------------------------------------------


def test_it_scans_a_folder_of_tools_and_reports_non_tools(tmp_path: Path) -> None:
    root = tmp_path / "tools"
    write_tool(root / "good", files_for("name: good", "description: D."))
    write_tool(root / "no_entry", files_for("name: no_entry", "description: D.", entry=None))
    write_tool(root / "no_toolmd", {"index.ts": TS})
    (root / "empty").mkdir()
    (root / "__pycache__").mkdir()
    (root / ".hidden").mkdir()
    (root / "README.md").write_text("not a tool")
    results = dict(scan([root], context=NO_CONSOLE))
    assert sorted(Path(p).name for p in results) == ["empty", "good", "no_entry", "no_toolmd"]
    verdicts = {Path(p).name: r.ok for p, r in results.items()}
    assert verdicts == {"empty": False, "good": True, "no_entry": False, "no_toolmd": False}
    assert results[str(root / "no_toolmd")].errors[0].key == "TOOL.md"


def test_it_scans_a_tool_folder_and_a_toolmd(tmp_path: Path) -> None:
    folder = write_tool(tmp_path / "t", files_for(*BASE))
    assert [r.ok for _, r in scan([folder, folder / "TOOL.md"], context=NO_CONSOLE)] == [True, True]


def test_it_scans_a_toolmd_without_a_tool_folder(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text(toolmd("name: x", "description: D."))
    [(label, result)] = scan([path], context=NO_CONSOLE)
    assert label == str(path) and result.ok


def test_it_reports_missing_and_empty_paths(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    results = list(scan([tmp_path / "missing", tmp_path / "empty"], context=NO_CONSOLE))
    assert [r.errors[0].key for _, r in results] == ["path", "path"]


# --- set_frontmatter_version --------------------------------------------------------------


def test_it_replaces_the_version_in_place() -> None:
    text = "---\nname: t\ndescription: D.\nversion: 3   # keep me\n---\n\n# Body\n"
    assert set_frontmatter_version(text, 4) == text.replace("3   #", "4   #")


@pytest.mark.parametrize("value", ["'3'", '"3"', "3.0", "", "true"])
def test_it_replaces_any_version_value(value: str) -> None:
    text = f"---\nname: t\nversion: {value}\ndescription: D.\n---\nbody\n"
    new = set_frontmatter_version(text, 7)
    assert parse_toolmd(new).manifest.version == 7
    assert new.splitlines()[2].rstrip() == "version: 7"


def test_it_inserts_a_version_after_the_name() -> None:
    text = "---\nname: t\ndescription: D.\n---\nbody\n"
    assert (
        set_frontmatter_version(text, 2) == "---\nname: t\nversion: 2\ndescription: D.\n---\nbody\n"
    )


def test_it_inserts_after_a_multiline_name() -> None:
    text = "---\nname: >-\n  t\ndescription: D.\n---\n"
    new = set_frontmatter_version(text, 2)
    assert new == "---\nname: >-\n  t\nversion: 2\ndescription: D.\n---\n"
    assert parse_toolmd(new).manifest.version == 2


def test_it_inserts_first_without_a_name() -> None:
    assert set_frontmatter_version("---\ndescription: D.\n---\n", 2) == (
        "---\nversion: 2\ndescription: D.\n---\n"
    )
    assert set_frontmatter_version("---\n---\n", 2) == "---\nversion: 2\n---\n"


def test_it_keeps_crlf_and_bom_when_setting_the_version() -> None:
    text = "\ufeff---\r\nname: t\r\ndescription: D.\r\n---\r\nbody\r\n"
    assert set_frontmatter_version(text, 5) == (
        "\ufeff---\r\nname: t\r\nversion: 5\r\ndescription: D.\r\n---\r\nbody\r\n"
    )
    text = "---\r\nname: t\r\nversion: 1\r\ndescription: D.\r\n---\r\n"
    assert set_frontmatter_version(text, 5) == text.replace("version: 1", "version: 5")


def test_it_changes_nothing_else_byte_for_byte() -> None:
    text = toolmd(*BASE, "inputs:", "  v:", "    type: string", "    description: 'version: 2'")
    new = set_frontmatter_version(text, 9)
    assert new.replace("version: 9\n", "", 1) == text
    assert parse_toolmd(new).manifest.inputs["v"].description == "version: 2"


@pytest.mark.parametrize(
    "text", ["no frontmatter\n", "---\nname: [\n---\n", "---\n- a\n---\n", "---\n{name: t}\n---\n"]
)
def test_it_refuses_to_set_a_version_it_cannot_place(text: str) -> None:
    with pytest.raises(ValueError):
        set_frontmatter_version(text, 2)


@pytest.mark.parametrize("version", [0, -1, True, 2**31])
def test_it_refuses_bad_version_numbers(version: int) -> None:
    with pytest.raises(ValueError):
        set_frontmatter_version("---\nname: t\n---\n", version)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def execute(a, b, c, d):\n  x = 1\n    y = 2\n", "index.py:3: python: Indentation error"),
        ("def execute(a, b, c, d):\n  return (\n", "index.py:2: python: Syntax error"),
        ("if 1:\n\tx = 1\n        y = 2\n", "index.py:3: python: Indentation error"),
        # SyntaxError on 3.11.4 and later, ValueError before (Debian 12's 3.11.2): both read so.
        ("x = 1\0\n", "index.py:1: python: "),
    ],
)
def test_it_reports_a_python_syntax_error_at_its_line(source, expected):
    from tests.support import tool_files

    files = tool_files("p", "python", source=source)

    result = validate_files(files, "p/TOOL.md", context=NO_CONSOLE)

    assert result.manifest is None
    shown = [str(p) for p in result.problems]
    assert any(problem.startswith(f"p/{expected}") for problem in shown), shown
    if "\0" in source:
        assert any("null bytes" in problem for problem in shown), shown


def test_it_parses_python_it_never_runs(tmp_path):
    """The check reads the code: a tool that would write a file on import writes nothing."""
    from tests.support import tool_files

    marker = tmp_path / "ran"
    source = f"open({str(marker)!r}, 'w').write('x')\ndef execute(a, b, c, d):\n    pass\n"

    result = validate_files(
        tool_files("p", "python", source=source), "p/TOOL.md", context=NO_CONSOLE
    )

    assert result.manifest is not None and not marker.exists()


def test_it_knows_mcp_annotations_and_checks_them():
    from tests.support import tool_files

    good = tool_files("a", extra={"annotations": {"readOnlyHint": True, "idempotentHint": False}})
    result = validate_files(good, "a/TOOL.md", context=NO_CONSOLE)
    assert result.manifest is not None and result.problems == []
    assert result.manifest.extra["annotations"] == {"readOnlyHint": True, "idempotentHint": False}

    odd = tool_files("a", extra={"annotations": {"readOnlyHint": "yes", "fastHint": True}})
    problems = [str(p) for p in validate_files(odd, "a/TOOL.md", context=NO_CONSOLE).problems]
    assert any(
        "annotations.readOnlyHint: must be true or false, got a string" in p for p in problems
    )
    assert any("annotations.fastHint: warning: unknown hint is ignored" in p for p in problems)

    flat = tool_files("a", extra={"annotations": ["readOnlyHint"]})
    assert validate_files(flat, "a/TOOL.md", context=NO_CONSOLE).manifest is None
