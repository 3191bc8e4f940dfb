"""Canonical JSON (RFC 8785) as tools_app/signing/canonical.py writes it: the bytes every
signature covers, the same as Node's (tests/data/signing_vectors.json)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.signing import VECTORS, vectors_text
from tools_app.signing import canonical


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.5, "0.5"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (100.0, "100"),
        (-0.0, "0"),
        (1.0, "1"),
        (-1.5e-7, "-1.5e-7"),
        (333333333.33333329, "333333333.3333333"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (2**53, "9007199254740992"),
        (2**53 + 1, "9007199254740992"),  # beyond 2^53: the double JSON.parse reads
        (10**21, "1e+21"),
        (-7, "-7"),
        (True, "true"),
        (None, "null"),
    ],
)
def test_it_writes_numbers_as_ecmascript_does(value, text):
    assert canonical.dumps(value) == text.encode()


def test_it_sorts_keys_by_utf16_code_units_not_code_points():
    # U+1F600 is U+D83D U+DE00 in UTF-16: before U+E000, though its code point is after.
    value = {"\ue000": 1, "\U0001f600": 2, "b": 3, "a": {"y": [], "x": {}}}
    assert canonical.dumps(value).decode() == '{"a":{"x":{},"y":[]},"b":3,"😀":2,"\ue000":1}'


def test_it_escapes_strings_as_json_stringify_does():
    text = '"\\\u2028\x7f\x1f\b\f\n\r\t/é😀'
    assert canonical.dumps(text).decode() == '"\\"\\\\\u2028\x7f\\u001f\\b\\f\\n\\r\\t/é😀"'


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (math.nan, "not a JSON number"),
        (math.inf, "not a JSON number"),
        ({"a": [-math.inf]}, "not a JSON number"),
        ("\ud800", "lone surrogate"),
        ({"\udc00": 1}, "lone surrogate"),
        ({1: "x"}, "keys must be strings"),
        ({"a": b"bytes"}, "bytes has no JSON form"),
    ],
)
def test_it_refuses_what_has_no_canonical_form(value, message):
    with pytest.raises(ValueError, match=message):
        canonical.dumps(value)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(json_values)
def test_it_reads_back_as_the_same_value_with_no_whitespace(value):
    text = canonical.dumps(value)
    # Numbers read back as the doubles they are (a float like 6e16 is written without a
    # point, as in JavaScript).
    assert json.loads(text, parse_int=float) == value
    assert canonical.dumps(json.loads(text)) == text  # a canonical form is its own


def test_it_writes_times_in_utc_with_whole_seconds():
    moment = datetime(2026, 12, 3, 11, 0, 0, 999999, tzinfo=timezone(timedelta(hours=1)))
    assert canonical.timestamp(moment) == "2026-12-03T10:00:00Z"
    assert canonical.parse_timestamp("2026-12-03T10:00:00Z") == datetime(
        2026, 12, 3, 10, tzinfo=UTC
    )
    with pytest.raises(ValueError):
        canonical.timestamp(datetime(2026, 12, 3))  # naive: which zone?
    with pytest.raises(ValueError):
        canonical.parse_timestamp("2026-12-03T10:00:00+01:00")


def test_it_keeps_the_node_vectors_what_python_makes():
    """clients/sync-tools.mjs is tested against this file: regenerate it with
    `python -m tests.support.signing > tests/data/signing_vectors.json`."""
    assert VECTORS.read_text(encoding="utf-8") == vectors_text()
    for case in json.loads(vectors_text())["jcs"]:
        assert canonical.dumps(json.loads(case["input"])).decode() == case["canonical"]
