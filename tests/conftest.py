"""Shared fixtures and hooks: isolated state directories, users per role, a tool factory.

Helpers that are not fixtures live in tests/support/ (import them from there, never from
this module: tests/test_one_home.py checks)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import hypothesis
import pytest
from django.contrib.auth.models import User
from django.template.base import FilterExpression
from django.test import Client

from tests.support import TEMPLATES, FakeClock, in_ci, make_user, require, tool_files
from tests.support.stand_in import Answer, StandIn
from tests.support.worker import CeleryWorker, pin_root
from tools_app.audit import Actor
from tools_app.models import Tool
from tools_app.roles import ADMIN, DEVELOPER, VIEWER

# Runs in this process start cold: no spare sandbox churning in the background between
# tests (tests/runner/test_runner_standby.py turns spares on; real workers have them on).
os.environ.setdefault("TOOL_CONSOLE_SPARE_SANDBOXES", "off")


# What makes a test reach the database in this process (pytest-django's fixtures).
DATABASE_FIXTURES = (
    "db",
    "transactional_db",
    "live_server",
    "django_db_reset_sequences",
    "django_db_serialized_rollback",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--database-tests-only",
        action="store_true",
        help="run only the tests that reach the database, browser tests aside (dev.py's "
        "PostgreSQL run: the others cannot tell the databases apart, and ran on SQLite)",
    )


def reaches_database(item: pytest.Item) -> bool:
    return bool(
        set(DATABASE_FIXTURES) & set(getattr(item, "fixturenames", ()))
        or item.get_closest_marker("django_db")
        or item.get_closest_marker("database")
    )


def repeated_on_postgresql(item: pytest.Item) -> bool:
    """Browser tests check what Chromium shows (layout, scripts, axe, the keyboard): the
    database work of every page they visit is the view tests', which run on both."""
    return reaches_database(item) and item.get_closest_marker("browser") is None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("database_tests_only"):
        return
    # Deselected, not skipped: each of these ran in the SQLite run of the same command.
    others = [item for item in items if not repeated_on_postgresql(item)]
    if others:
        config.hook.pytest_deselected(items=others)
        items[:] = [item for item in items if repeated_on_postgresql(item)]


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("prerequisite"):
        require(*mark.args)


class _UnresolvedVariables(logging.Handler):
    """Collects Django's "Exception while resolving variable" records from our templates."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not record.getMessage().startswith("Exception while resolving variable"):
            return
        expression = _failing_expression()
        if expression is None:
            return
        template = record.args[1]
        # Admin templates rely on unset variables; only the console's own are held to it.
        name = str(template).partition("#")[0]
        if (TEMPLATES / name).is_file():
            self.seen.append(f"{{{{ {expression} }}}} in {template}")


def _failing_expression() -> str | None:
    """The {{ expression }} whose lookup failed, or None when Django's string_if_invalid
    would not show the failure either: {% if form.publish %} tests for an optional field,
    while {{ missing }} renders "" silently."""
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code is FilterExpression.resolve.__code__:
            if frame.f_locals.get("ignore_failures"):
                return None
            return frame.f_locals["self"].token
        frame = frame.f_back
    return None


@pytest.fixture(autouse=True)
def template_variables_resolve():
    """A template variable that fails to resolve in any page test fails that test: a typo
    or a context key a view forgot (as raw_mode_field once was) renders as "" silently."""
    handler = _UnresolvedVariables()
    logger = logging.getLogger("django.template")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert not handler.seen, "template variables that did not resolve: " + ", ".join(
        sorted(set(handler.seen))
    )


# Hypothesis in CI: the same examples on every run (derandomized), so a failure CI saw is
# the failure `CI=true pytest ...` shows again; locally it explores, keeping its database.
hypothesis.settings.register_profile("ci", derandomize=True, print_blob=True)
if in_ci():
    hypothesis.settings.load_profile("ci")


@pytest.fixture(autouse=True)
def finished_teardowns() -> Iterator[None]:
    """A run's cgroup, quota mount and run dir are freed in the background
    (tools_app/runner/teardown.py): each test waits for its own before the next starts."""
    yield
    from tools_app.runner import teardown

    teardown.drain()


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, settings) -> Path:
    """Every test gets its own DATA_PATH and state folders: nothing touches ./var."""
    state = tmp_path / "state"
    state.mkdir()
    # Test users need no slow password hashing.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.DATA_PATH = tmp_path / "data"
    settings.ARTIFACTS_PATH = state / "artifacts"
    settings.RUNS_WORK_PATH = state / "runs"
    settings.ENCRYPTION_KEY_FILE = state / "encryption.key"
    return state


@pytest.fixture(autouse=True)
def signing_key_ring(request: pytest.FixtureRequest, isolated_state: Path) -> None:
    """Every test that uses the database gets a signing key ring (docs/signing.md), as
    `signing_keys create --if-missing` gives a console at start, so publishing signs. A
    test of "no key" deletes the keys. The ring's own audit event is not written, so
    tests that read the (append-only) audit log see only what they did."""
    used = next((name for name in DATABASE_FIXTURES if name in request.fixturenames), None)
    if used is None and request.node.get_closest_marker("django_db") is None:
        return
    if used is not None:
        request.getfixturevalue("transactional_db" if used == "live_server" else used)
    # A test with the Celery worker (tests/support/worker.py): the keys are sealed under the
    # encryption key this process shares with it, and its DATA_PATH (the live console's
    # too) pins the same root.
    workers = [name for name in request.fixturenames if name.endswith("worker")]
    if "console_url" in request.fixturenames:
        # The live console alone (MCP) verifies what it lists and calls: same DATA_PATH.
        workers.append("celery_worker_process")
    # First: a worker fixture sets the encryption keys the ring is then sealed under.
    workers = [w for w in map(request.getfixturevalue, workers) if isinstance(w, CeleryWorker)]
    from tools_app.signing import keyring

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keyring, "record", lambda *args, **kwargs: None)
        keyring.ensure(actor=Actor.system())
    keyring.signer()  # unsealed now: a test may change the encryption keys later
    pin_root()  # every worker started so far, by any fixture
    for worker in workers:
        pin_root(worker.root / "data")


@pytest.fixture
def make_tool(db) -> Callable[..., Tool]:
    """make_tool("name", language=..., inputs=..., publish=True, source=...) -> Tool."""
    from tools_app.catalog.versions import save_version

    def make(name: str, *, publish: bool = True, language: str = "typescript", **kw) -> Tool:
        files = tool_files(name, language, **kw)
        save_version(name, files, actor=Actor.system(), publish=publish)
        return Tool.objects.get(name=name)

    return make


@pytest.fixture
def viewer(db) -> User:
    return make_user("vera", VIEWER)


@pytest.fixture
def developer(db) -> User:
    return make_user("dave", DEVELOPER)


@pytest.fixture
def console_admin(db) -> User:
    return make_user("ada", ADMIN)


@pytest.fixture
def nobody(db) -> User:
    """Logged in, but in no role group."""
    return make_user("nora", None)


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def viewer_client(viewer) -> Client:
    return _client(viewer)


@pytest.fixture
def developer_client(developer) -> Client:
    return _client(developer)


@pytest.fixture
def console_admin_client(console_admin) -> Client:
    return _client(console_admin)


@pytest.fixture
def stand_in() -> Iterator[Callable[..., StandIn]]:
    """stand_in(answer, host="127.0.0.1", http11=False, netns=None) -> a started local HTTP server
    standing in for an outside API (tests/support/stand_in.py); closed after the test."""
    started: list[StandIn] = []

    def start(answer: Answer, **where) -> StandIn:
        server = StandIn(answer, **where).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


# A real Celery worker for @pytest.mark.worker and browser tests (tests/support/worker.py).
pytest_plugins = ["tests.support.worker"]


@pytest.fixture
def fake_clock(monkeypatch) -> Callable[[object], FakeClock]:
    """fake_clock(module): that module's `time` becomes a FakeClock (one per test)."""
    clock = FakeClock()

    def install(module: object) -> FakeClock:
        monkeypatch.setattr(module, "time", clock)
        return clock

    return install
