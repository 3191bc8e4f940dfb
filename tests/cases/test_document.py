"""cases.yaml parsed and checked: every problem with its line, never an exception."""

from __future__ import annotations

import json
import textwrap

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools_app.cases.document import (
    MAX_BYTES,
    MAX_CASES,
    CasesResult,
    cases_of,
    parse_cases,
    parse_path,
    sample_names,
)
from tools_app.manifest.inputs import InputSpec
from tools_app.manifest.toolmd import Manifest

INPUTS = {
    "url": InputSpec("url", "string", "The URL."),
    "limit": InputSpec("limit", "integer", "At most.", optional=True, has_default=True, default=5),
    "api_key": InputSpec("api_key", "string", "Key.", optional=True, sensitive=True),
}
FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def parse(text: str, **kw) -> CasesResult:
    kw.setdefault("inputs", INPUTS)
    return parse_cases(textwrap.dedent(text), "demo/cases.yaml", **kw)


def problems(text: str, **kw) -> list[str]:
    return [str(p) for p in parse(text, **kw).problems]


def only(text: str, **kw) -> str:
    found = problems(text, **kw)
    assert len(found) == 1, found
    return found[0]


def case_with(*expect: str) -> str:
    items = "".join(f"      - {line}\n" for line in expect)
    return f"cases:\n  - name: one\n    inputs: {{url: x}}\n    expect:\n{items}"


def test_it_reads_every_key_of_a_case():
    result = parse(
        """\
        # a comment
        cases:
          - name: fetches_example
            description: Example.com has a title
            inputs: {url: "https://example.com", limit: 3}
            sealed: {api_key: "gAAAAtoken"}
            expect:
              - is_error: false
              - text: "exact whole text"
              - contains: "Example Domain"
              - not_contains: "Traceback"
              - regex: "Example\\\\s+Domain"
              - json_equals: {title: "Example Domain", fetched_at: null}
                ignore: ["fetched_at", "items[*].id"]
              - json_subset: {title: "Example Domain"}
              - jmespath: "length(links)"
                op: ">="
                value: 1
              - schema: {type: object, required: [title]}
              - duration_under: 5
              - artifact: shot.png
                media_type: image/png
        """
    )
    assert result.problems == []
    assert result.ok
    [case] = result.cases
    assert case.name == "fetches_example" and case.line == 3
    assert case.description == "Example.com has a title"
    assert case.inputs == {"url": "https://example.com", "limit": 3}
    assert case.sealed == {"api_key": "gAAAAtoken"}
    kinds = [e.kind for e in case.expect]
    assert kinds == ["is_error", "text", "contains", "not_contains", "regex", "json_equals",
                     "json_subset", "jmespath", "schema", "duration_under", "artifact"]  # fmt: skip
    by_kind = {e.kind: e for e in case.expect}
    assert by_kind["regex"].value == "Example\\s+Domain"
    assert by_kind["json_equals"].options == {"ignore": ["fetched_at", "items[*].id"]}
    assert by_kind["jmespath"].options == {"op": ">=", "value": 1}
    assert by_kind["artifact"].options == {"media_type": "image/png"}
    assert by_kind["is_error"].line == 8 and by_kind["artifact"].line == 21
    # Plain values, ready for JSON (the reader's line-keeping types are gone).
    assert type(case.inputs) is dict and type(by_kind["schema"].value["required"]) is list
    json.dumps(case.to_yaml())
    assert case.to_yaml()["expect"][7] == {"jmespath": "length(links)", "op": ">=", "value": 1}


def test_it_defaults_the_jmespath_operator_to_equality():
    [case] = parse(case_with('jmespath: "a.b"\n        value: [1, 2]')).cases
    assert case.expect[0].options == {"op": "==", "value": [1, 2]}


def test_it_reads_an_empty_file_as_no_cases():
    assert parse("").cases == () and parse("").problems == []
    assert parse("# nothing yet\n").ok
    assert parse("cases:\n").cases == ()
    assert parse("cases: []\n").ok


@pytest.mark.parametrize(
    ("expectation", "line", "message"),
    [
        ('regex: "Example(\\\\s"', 5, "regex: is not a valid regular expression: missing ), "),
        ('jmespath: "length(links"\n        value: 1', 5, "jmespath: is not a valid JMESPath"),
        ('jmespath: "nope(a)"\n        value: 1', 5, "calls an unknown JMESPath function: nope()"),
        ("schema: {type: objec}", 5, "schema: is not a valid JSON Schema"),
        ("schema: {properties: {a: {pattern: '('}}}", 5, "schema: is not a valid JSON Schema"),
        ("schema: {$ref: 'https://example.com/s.json'}", 5, "only local refs"),
        ('jmespath: "a"\n        op: "=~"\n        value: 1', 6, "op: '=~' is not one of =="),
        ('jmespath: "a"', 5, "value: is required"),
        (
            'jmespath: "a"\n        op: matches\n        value: "("',
            7,
            "value: is not a valid regular",
        ),
        ('jmespath: "a"\n        op: ">"\n        value: [1]', 7, "compares numbers or strings"),
        ("is_error: maybe", 5, "is_error: must be true or false"),
        ("contains: 42", 5, "contains: must be a string (quote it), got an integer"),
        ('contains: ""', 5, "contains: must not be empty"),
        ("duration_under: 0", 5, "duration_under: must be a number of seconds above 0"),
        ("duration_under: fast", 5, "duration_under: must be a number of seconds above 0"),
        ("json_subset: 3", 5, "json_subset: must be a mapping or a list"),
        ("json_equals: {}\n        ignore: ['a..b']", 6, "'a..b' is not a path"),
        ("json_equals: {}\n        ignore: 3", 6, "ignore: must be a list of paths"),
        ("artifact: ''", 5, "artifact: must not be empty"),
        (
            "artifact: a.png\n        media: image/png",
            6,
            "expect[0].media: unknown key for artifact",
        ),
        ("contains: a\n        ignore: [x]", 6, "unknown key for contains"),
        ("text: a\n        contains: b", 5, "holds text and contains"),
        ("{checks: a}", 5, "names no expectation"),
        ("just text", 5, "must be a mapping like {contains: some text}"),
        ("json_equals: 2024-01-01", 5, "is a date, which JSON has not"),
        ("json_equals: .inf", 5, "is not a JSON number"),
    ],
)
def test_it_reports_a_bad_expectation_at_its_line(expectation: str, line: int, message: str):
    text = case_with(expectation)
    problem = only(text)
    assert problem.startswith(f"demo/cases.yaml:{line}: cases[0].expect[0]"), problem
    assert message in problem, problem
    assert parse(text).cases == ()  # a case with an error is not run


def test_it_reports_an_unknown_input_with_the_declared_ones():
    problem = only(
        "cases:\n  - name: a\n    inputs:\n      url: x\n      urll: y\n    expect: "
        "[{is_error: false}]\n"
    )
    assert problem == (
        "demo/cases.yaml:5: cases[0].inputs.urll: unknown input 'urll' "
        "(TOOL.md's inputs: url, limit, api_key)"
    )


def test_it_refuses_a_sensitive_input_in_plain_inputs():
    problem = only(
        "cases:\n  - name: a\n    inputs: {url: x, api_key: hunter2}\n    expect: "
        "[{is_error: false}]\n"
    )
    assert problem.startswith(
        "demo/cases.yaml:3: cases[0].inputs.api_key: 'api_key' is a sensitive"
    )
    assert "must be sealed" in problem
    assert "hunter2" not in problem


def test_it_checks_sealed_inputs():
    assert "must be the vault token" in only(
        "cases:\n  - name: a\n    inputs: {url: x}\n    sealed: {api_key: 3}\n    expect: "
        "[{is_error: true}]\n"
    )
    assert "not sensitive: give it under inputs" in only(
        "cases:\n  - name: a\n    sealed: {url: tok}\n    expect: [{is_error: true}]\n"
    )
    assert "unknown input 'nope'" in only(
        "cases:\n  - name: a\n    inputs: {url: x}\n    sealed: {nope: tok}\n    expect: "
        "[{is_error: true}]\n"
    )
    both = problems(
        "cases:\n  - name: a\n    inputs: {url: x}\n    sealed: {url: tok}\n    expect: "
        "[{is_error: true}]\n"
    )
    assert any("'url' is given under inputs too" in p for p in both)


def test_it_warns_of_a_required_input_left_out():
    problem = only("cases:\n  - name: a\n    expect: [{is_error: true}]\n")
    assert problem == (
        "demo/cases.yaml:2: cases[0].inputs: warning: input 'url' is required by TOOL.md: "
        "the case's run will be refused"
    )
    assert parse("cases:\n  - name: a\n    expect: [{is_error: true}]\n").ok


def test_it_checks_nothing_of_tool_md_without_its_inputs():
    text = (
        "cases:\n  - name: a\n    inputs: {whatever: 1}\n    sample: s\n"
        "    expect: [{is_error: true}]\n"
    )
    assert parse(text, inputs=None).problems == []


def test_it_checks_samples_against_the_tools_kind_and_files():
    text = (
        "cases:\n  - name: a\n    inputs: {url: x}\n    sample: ok\n"
        "    expect: [{is_error: false}]\n"
    )
    assert "is only for kind: http tools" in only(text)
    assert "no samples/ok.json in the tool (samples: run)" in only(
        text, kind="http", samples=["run"]
    )
    [case] = parse(text, kind="http", samples=["ok"]).cases
    assert case.sample == "ok"
    assert sample_names(["samples/ok.json", "samples/a/b.json", "x.json", "TOOL.md"]) == ["ok"]


def test_it_reports_names_and_case_shapes():
    assert "is not a case name" in only(
        "cases:\n  - name: Bad Name\n    inputs: {url: x}\n    expect: [{is_error: true}]\n"
    )
    assert "cases[0].name: is required" in only(
        "cases:\n  - inputs: {url: x}\n    expect: [{is_error: true}]\n"
    )
    duplicate = problems(
        "cases:\n  - name: a\n    inputs: {url: x}\n    expect: [{is_error: true}]\n"
        "  - name: a\n    inputs: {url: x}\n    expect: [{is_error: false}]\n"
    )
    assert duplicate == [
        "demo/cases.yaml:5: cases[1].name: duplicate case name 'a' (first on line 2)"
    ]
    assert (
        "unknown key 'expects'"
        in problems("cases:\n  - name: a\n    inputs: {url: x}\n    expects: []\n")[0]
    )
    assert "must be a list of cases" in only("cases: {a: 1}\n")
    assert "must be a mapping with the key cases" in only("- a\n- b\n")
    assert "must be a mapping with name, inputs and expect" in only("cases: [3]\n")
    assert "must be a list of expectations" in only(
        "cases:\n  - name: a\n    inputs: {url: x}\n    expect: {is_error: true}\n"
    )
    assert "warning: unknown key 'version' is ignored" in only("version: 1\ncases: []\n")


def test_it_warns_of_a_case_that_expects_nothing():
    result = parse("cases:\n  - name: a\n    inputs: {url: x}\n")
    assert result.ok and [str(p) for p in result.warnings] == [
        "demo/cases.yaml:2: cases[0].expect: warning: the case expects nothing: "
        "it errors when it runs"
    ]
    assert result.cases[0].expect == ()


def test_it_caps_the_file_and_the_number_of_cases():
    big = "cases: []\n" + "#" * MAX_BYTES
    assert f"a cases.yaml may have at most {MAX_BYTES}" in only(big)
    many = "cases:\n" + "".join(
        f"  - name: c{i}\n    inputs: {{url: x}}\n    expect: [{{is_error: true}}]\n"
        for i in range(MAX_CASES + 1)
    )
    assert f"{MAX_CASES + 1} cases; a tool may have at most {MAX_CASES}" in only(many)
    exactly = "cases:\n" + "".join(
        f"  - name: c{i}\n    inputs: {{url: x}}\n    expect: [{{is_error: true}}]\n"
        for i in range(MAX_CASES)
    )
    assert len(parse(exactly).cases) == MAX_CASES


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &x [1]\nb: *x\n", "YAML anchors and aliases (& and *) are not allowed"),
        ("cases: !!python/object:os.system {}\n", "YAML tag"),
        ("cases: [\n", "YAML syntax error"),
        ("cases: []\ncases: []\n", "duplicate key 'cases'"),
        ("<<: {cases: []}\n", "merge keys"),
        ("cases:" + " [" * 40 + " ]" * 40 + "\n", "nested deeper than 32 levels"),
    ],
)
def test_it_refuses_hostile_yaml_with_a_line(text: str, message: str):
    found = problems(text)
    assert any(message in p for p in found), found
    assert all(p.startswith("demo/cases.yaml:") for p in found)


def test_it_refuses_a_billion_laughs_before_expanding_it():
    laughs = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for i in range(1, 9):
        prev = chr(ord("a") + i - 1)
        laughs += f"{chr(ord('a') + i)}: &{chr(ord('a') + i)} [{', '.join(['*' + prev] * 9)}]\n"
    assert "anchors and aliases" in problems(laughs)[0]


def test_it_reports_bytes_that_are_not_utf8():
    result = parse_cases(b"cases: []\n\xff\n", "demo/cases.yaml")
    assert [str(p) for p in result.problems] == [
        "demo/cases.yaml:2: file: is not valid UTF-8 (byte 0xff at 10)"
    ]


def test_it_finds_a_tools_cases_in_its_files():
    manifest = Manifest(name="demo", label="Demo", description="D.", inputs=INPUTS)
    assert cases_of({"TOOL.md": b""}, manifest) == CasesResult()
    files = {
        "cases.yaml": b"cases:\n  - name: a\n    inputs: {nope: 1}\n    expect: "
        b"[{is_error: true}]\n"
    }
    result = cases_of(files, manifest)
    assert [p.path for p in result.problems] == ["demo/cases.yaml", "demo/cases.yaml"]
    assert cases_of(files, manifest, "tools/demo").problems[0].path == "tools/demo/cases.yaml"


def test_it_reads_ignored_paths():
    assert parse_path("fetched_at") == ["fetched_at"]
    assert parse_path("items[*].id") == ["items", "*", "id"]
    assert parse_path("a.b[0][2].c") == ["a", "b", 0, 2, "c"]
    assert parse_path("[*].id") == ["*", "id"]
    for bad in ("", ".a", "a..b", "a[0]b", "a[x]", "a[", "a.", 3):
        assert parse_path(bad) is None, bad


# --- Never raises -------------------------------------------------------------------------


def assert_coherent(result: CasesResult) -> None:
    for problem in result.problems:
        assert problem.line >= 1 and problem.key and problem.message
        assert "\n" not in str(problem)
        assert not problem.message.startswith("cannot be read: ")  # no internal error
    for case in result.cases:
        json.dumps([case.to_yaml()], allow_nan=False)


@FUZZ
@given(st.text())
def test_it_never_raises_on_any_text(text: str) -> None:
    assert_coherent(parse_cases(text, inputs=INPUTS))
    assert_coherent(parse_cases("cases:\n" + text, inputs=INPUTS))
    assert_coherent(parse_cases("cases:\n  - name: a\n    expect:\n      - " + text))


@FUZZ
@given(st.binary())
def test_it_never_raises_on_any_bytes(data: bytes) -> None:
    assert_coherent(parse_cases(data, inputs=INPUTS))


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
KEYS = st.sampled_from(
    ["name", "inputs", "sealed", "sample", "expect", "description", "is_error", "text",
     "contains", "not_contains", "regex", "json_equals", "ignore", "json_subset", "jmespath",
     "op", "value", "schema", "duration_under", "artifact", "media_type", "url", "api_key"]
)  # fmt: skip
SHAPED = st.recursive(
    JSONISH,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=5),
    max_leaves=30,
)


@FUZZ
@given(st.lists(SHAPED, max_size=4))
def test_it_never_raises_on_wrong_types_in_the_right_places(cases) -> None:
    text = yaml.safe_dump({"cases": cases}, allow_unicode=True)
    assert_coherent(parse_cases(text, inputs=INPUTS, kind="http", samples=["ok"]))
