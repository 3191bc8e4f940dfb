"""cases.yaml rewritten one case at a time: the other cases' text kept byte for byte, and
the result always reads back as the cases it should hold."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools_app.cases.document import parse_cases
from tools_app.cases.write import HEADER, add_case, remove_case, replace_case

FILE = """\
# Cases of demo.
cases:
  # The happy path.
  - name: first
    inputs: {url: "https://example.com"}   # the home page
    expect:
      - contains: Example

  # Errors.
  - name: second
    description: |
      A block of text
      # that looks like a comment
    expect: [{is_error: true}]
# trailing
"""
FIRST = FILE[FILE.index("  # The happy path.") : FILE.index("\n  # Errors.") + 1]
SECOND = FILE[FILE.index("  - name: second") : FILE.index("# trailing")]
NEW = {
    "name": "third",
    "description": "Added by the console.",
    "inputs": {"url": "ftp://x", "n": 3, "tags": ["a", "b"]},
    "sealed": {"api_key": "gAAAAtoken"},
    "expect": [
        {"is_error": True},
        {"text": "line one\nline two\n"},
        {"json_equals": {"a": None, "b": [1, 2.5]}, "ignore": ["a"]},
        {"jmespath": "length(b)", "op": ">=", "value": 1},
        {"regex": "^Error: .*\\d+$"},
        {"contains": "needs: quoting # maybe"},
    ],
}


def names(text: str) -> list[str]:
    result = parse_cases(text)
    assert result.problems == [], result.problems
    return [case.name for case in result.cases]


def test_it_appends_a_case_keeping_the_others_verbatim():
    text = add_case(FILE, NEW)
    assert names(text) == ["first", "second", "third"]
    assert text.startswith(FILE[: FILE.index("# trailing")])
    assert text.endswith("# trailing\n")
    third = parse_cases(text).case("third")
    assert third is not None and third.to_yaml() == NEW


def test_it_starts_a_new_file_with_a_header():
    for empty in (None, "", "\n  \n"):
        text = add_case(empty, NEW)
        assert text.startswith(HEADER + "cases:\n  - name: third\n")
        assert names(text) == ["third"]
        assert "docs/cases.md" in HEADER


@pytest.mark.parametrize(
    "start", ["cases: []\n", "cases:\n", "cases: null\n", "# only a comment\n"]
)
def test_it_adds_to_a_file_without_cases(start: str):
    text = add_case(start, NEW)
    assert names(text) == ["third"]
    if start.startswith("#"):
        assert text.startswith(start)


def test_it_refuses_a_duplicate_name():
    with pytest.raises(ValueError, match="'first' exists already"):
        add_case(FILE, {**NEW, "name": "first"})
    with pytest.raises(ValueError, match="'second' exists already"):
        replace_case(FILE, "first", {**NEW, "name": "second"})
    with pytest.raises(ValueError, match="needs a name"):
        add_case(FILE, {"expect": []})


def test_it_replaces_a_case_in_place_keeping_its_comments():
    text = replace_case(FILE, "first", {**NEW, "name": "first"})
    assert names(text) == ["first", "second"]
    assert text.startswith("# Cases of demo.\ncases:\n  # The happy path.\n  - name: first\n")
    assert SECOND in text and "\n  # Errors.\n" in text
    assert parse_cases(text).case("first").to_yaml() == {**NEW, "name": "first"}
    # A block scalar whose lines look like comments is all of the case, and replaced whole.
    text = replace_case(FILE, "second", {"name": "second", "expect": [{"is_error": False}]})
    assert FIRST in text and "that looks like a comment" not in text
    assert text.endswith("  - name: second\n    expect:\n      - is_error: false\n# trailing\n")


def test_it_removes_a_case_and_its_comments():
    text = remove_case(FILE, "first")
    assert names(text) == ["second"]
    assert "happy path" not in text and "example.com" not in text
    assert SECOND in text and "  # Errors.\n" in text
    text = remove_case(text, "second")
    assert names(text) == []
    assert text.startswith("# Cases of demo.\ncases: []\n")


def test_it_says_when_a_case_is_missing():
    with pytest.raises(KeyError):
        replace_case(FILE, "nope", NEW)
    with pytest.raises(KeyError):
        remove_case(FILE, "nope")


def test_it_refuses_text_that_is_not_yaml():
    with pytest.raises(ValueError, match="not readable YAML"):
        add_case("cases: [\n", NEW)
    with pytest.raises(ValueError, match="not a YAML mapping"):
        add_case("- a\n", NEW)


def test_it_keeps_windows_line_endings_and_a_missing_last_newline():
    crlf = FILE.replace("\n", "\r\n")
    text = add_case(crlf, NEW)
    assert text.startswith(crlf[: crlf.index("# trailing")])
    assert "\n" not in text.replace("\r\n", "")
    assert names(text) == ["first", "second", "third"]
    bare = "cases:\n  - name: a\n    expect: [{is_error: true}]"
    assert names(add_case(bare, NEW)) == ["a", "third"]


def test_it_follows_the_files_indentation():
    flush = "cases:\n- name: a\n  expect:\n  - is_error: true\n"
    text = add_case(flush, NEW)
    assert text.startswith(flush) and "\n- name: third\n" in text
    assert names(text) == ["a", "third"]


def test_it_writes_a_flow_style_list_anew():
    flow = "cases: [{name: a, expect: [{is_error: true}]}]\n"
    assert names(add_case(flow, NEW)) == ["a", "third"]
    assert names(replace_case(flow, "a", {**NEW, "name": "b"})) == ["b"]
    assert names(remove_case(flow, "a")) == []


FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30
)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(TEXT, children, max_size=3),
    max_leaves=8,
)
CASES = st.lists(
    st.fixed_dictionaries(
        {
            "description": TEXT,
            "inputs": st.dictionaries(
                st.from_regex(r"[a-z_]{1,8}", fullmatch=True), VALUES, max_size=3
            ),
            "expect": st.lists(
                st.one_of(
                    st.builds(lambda t: {"text": t}, TEXT),
                    st.builds(lambda t: {"json_equals": t}, VALUES),
                    st.builds(lambda b: {"is_error": b}, st.booleans()),
                ),
                min_size=1,
                max_size=3,
            ),
        }
    ),
    min_size=1,
    max_size=4,
)


@FUZZ
@given(CASES)
def test_it_reads_back_whatever_it_writes(cases: list[dict[str, Any]]) -> None:
    text = FILE
    written = [{"name": f"c{i}", **case} for i, case in enumerate(cases)]
    for case in written:
        text = add_case(text, case)
    result = parse_cases(text)
    assert [c.name for c in result.cases] == ["first", "second"] + [c["name"] for c in written]
    for case in written:
        expected = {k: v for k, v in case.items() if v or k == "expect"}
        expected["description"] = expected.get("description", "").strip()
        got = result.case(case["name"]).to_yaml()
        got.setdefault("description", "")
        assert got == expected
    for case in written:
        text = remove_case(text, case["name"])
    assert text == FILE
