"""The suite's own layout: shared helpers come from tests/support/, never from conftest.py
(pytest loads conftest.py itself; importing it as a module as well gives a second copy)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# Checks of the whole code base and suite; every other test module lives in the folder of
# what it tests (docs/development.md, "The tests' layout").
TOP_LEVEL = {
    "test_import_graph.py",
    "test_one_home.py",
    "test_prerequisites.py",
    "test_suite_layout.py",
}


def suite_modules() -> list[Path]:
    return [
        path for path in sorted(TESTS.rglob("*.py")) if "data" not in path.relative_to(TESTS).parts
    ]


def conftest_imports(source: str) -> list[int]:
    """Lines that import conftest as a module: `from tests.conftest import x`,
    `from conftest import x`, `from tests import conftest`, `import tests.conftest`."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names = {alias.name for alias in node.names}
            if module.split(".")[-1] == "conftest" or "conftest" in names:
                lines.append(node.lineno)
        elif isinstance(node, ast.Import) and any(
            alias.name.split(".")[-1] == "conftest" for alias in node.names
        ):
            lines.append(node.lineno)
    return lines


def test_it_imports_no_helper_from_conftest():
    found = {}
    for path in suite_modules():
        if path == Path(__file__):
            continue  # this file's own cases are examples of what it refuses
        lines = conftest_imports(path.read_text())
        if lines:
            found[str(path.relative_to(TESTS))] = lines
    assert found == {}, "import shared helpers from tests.support, not from conftest"


@pytest.mark.parametrize(
    "source",
    [
        "from tests.conftest import tool_files\n",
        "from conftest import require\n",
        "from tests import conftest\n",
        "import tests.conftest\n",
        "def f():\n    from tests.conftest import REPO\n",
    ],
)
def test_it_sees_each_way_of_importing_conftest(source):
    assert conftest_imports(source) != []


def test_it_lets_support_imports_through():
    assert conftest_imports("from tests.support import require\nimport tests.support\n") == []


def test_it_keeps_each_test_module_in_the_folder_of_what_it_tests():
    loose = sorted(path.name for path in TESTS.glob("test_*.py"))
    assert set(loose) <= TOP_LEVEL, sorted(set(loose) - TOP_LEVEL)


def test_it_makes_every_folder_of_tests_a_package():
    """Two folders may then hold modules of the same name: each is imported once, under
    its own dotted name."""
    folders = sorted({path.parent for path in suite_modules()})
    assert [str(f.relative_to(TESTS)) for f in folders if not (f / "__init__.py").is_file()] == []


def collected(*args: str) -> set[str]:
    """The test ids pytest collects with these arguments, in a process of its own."""
    found = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert found.returncode == 0, found.stdout + found.stderr
    return {line for line in found.stdout.splitlines() if "::" in line}


def test_the_postgresql_run_keeps_every_test_that_reaches_the_database():
    """dev.py's PostgreSQL run (--database-tests-only) drops the tests with no database
    fixture and the browser tests, and keeps those marked `database` (a process they start
    uses it)."""
    files = [
        "tests/views/test_time_zone.py",
        "tests/catalog/test_sync.py",
        "tests/browser/test_browser_ui.py",
    ]
    every = collected(*files)
    kept = collected("--database-tests-only", *files)
    dropped = every - kept
    assert kept < every
    assert "tests/views/test_time_zone.py::test_it_refuses_a_zone_that_does_not_exist" in dropped
    race = "tests/catalog/test_sync.py::test_several_processes_starting_at_once_sync_safely"
    assert race in kept
    # Kept: the tests that ask for the database. Dropped: the others, and browser tests.
    assert any("test_sync.py::" in test for test in kept - {race})
    assert not any("test_browser_ui.py::" in test for test in kept)
    assert any("test_browser_ui.py::" in test for test in every)
    assert all("test_sync.py::" not in test for test in dropped)
