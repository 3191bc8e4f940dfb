"""Every prerequisite goes through tests.support.require: it skips on a developer's machine that
lacks it and fails in CI, so no security test can be skipped where it is judged."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tests.support
from tests.support import prerequisite, require

TESTS = Path(__file__).resolve().parent

# Calls that skip or expect failure without going through require().
PLAIN_SKIPS = {"skip", "skipif", "importorskip", "xfail"}


def plain_skips(source: str) -> list[int]:
    """Lines of `pytest.skip(...)`, `pytest.mark.skipif(...)`, `pytest.importorskip(...)`,
    `pytest.mark.xfail` and friends, called or used as a bare decorator."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in PLAIN_SKIPS:
            lines.append(node.lineno)
    return lines


def test_it_finds_no_plain_skip_in_the_suite():
    found = {}
    support = Path(tests.support.__file__)
    for path in sorted(TESTS.rglob("*.py")):
        if path == Path(__file__) or "data" in path.relative_to(TESTS).parts:
            continue  # this file's own cases are examples of what it refuses
        lines = plain_skips(path.read_text())
        if path == support:
            # require() itself is the one place that may skip.
            body = support.read_text().splitlines()
            lines = [n for n in lines if "pytest.skip(why)" not in body[n - 1]]
        if lines:
            found[str(path.relative_to(TESTS))] = lines
    assert found == {}, "skip through tests.support.require or prerequisite instead"


@pytest.mark.parametrize(
    "source",
    [
        "import pytest\npytest.skip('x')\n",
        "import pytest\n@pytest.mark.skipif(True, reason='x')\ndef test(): pass\n",
        "import pytest\n@pytest.mark.skip\ndef test(): pass\n",
        "import pytest\nyaml = pytest.importorskip('yaml')\n",
        "from pytest import mark\n@mark.xfail\ndef test(): pass\n",
    ],
)
def test_it_sees_each_kind_of_plain_skip(source):
    assert plain_skips(source) != []


def test_it_fails_a_missing_prerequisite_in_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no bubblewrap"):
        require(True, "no bubblewrap")


def test_it_skips_a_missing_prerequisite_outside_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no bubblewrap"):
        require(True, "no bubblewrap")


def test_it_lets_a_present_prerequisite_run(monkeypatch):
    monkeypatch.setenv("CI", "true")
    require(False, "never said")


def test_it_routes_the_prerequisite_marker_through_require():
    mark = prerequisite(True, "needs a root worker").mark
    assert (mark.name, mark.args) == ("prerequisite", (True, "needs a root worker"))
