"""The test suite: tests/conftest.py holds fixtures, tests/support/ the shared helpers."""

import pytest

# tests/conftest.py imports tests/support/ before pytest loads tests.support.worker as a
# plugin; marking the package first keeps its asserts rewritten and pytest quiet.
pytest.register_assert_rewrite("tests.support")
