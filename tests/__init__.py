"""The test suite: tests/conftest.py holds fixtures, tests/support/ the shared helpers."""
