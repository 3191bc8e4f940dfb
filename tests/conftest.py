"""Shared fixtures: isolated state directories, users per role, and a tool factory."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import hypothesis
import pytest
import yaml
from django.contrib.auth.models import Group, User
from django.template.base import FilterExpression
from django.test import Client

from tools_app.audit import Actor
from tools_app.models import Tool
from tools_app.roles import ADMIN, DEVELOPER, VIEWER, ensure_groups

# Runs in this process start cold: no spare sandbox churning in the background between
# tests (tests/test_runner_standby.py turns spares on; real workers have them on).
os.environ.setdefault("TOOL_CONSOLE_SPARE_SANDBOXES", "off")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
TEMPLATES = REPO / "templates"

ENTRY_SOURCE = {
    "typescript": (
        "index.ts",
        "export async function execute(toolCallId: string, params: any, signal: AbortSignal,"
        " onUpdate: (u: any) => void) {\n"
        "  return { content: [{ type: 'text', text: 'ok' }] };\n}\n",
    ),
    "javascript": (
        "index.js",
        "export async function execute(toolCallId, params, signal, onUpdate) {\n"
        "  return { content: [{ type: 'text', text: 'ok' }] };\n}\n",
    ),
    "python": (
        "index.py",
        "def execute(tool_call_id, params, signal, on_update):\n"
        "    return {'content': [{'type': 'text', 'text': 'ok'}]}\n",
    ),
    "bash": ("index.sh", "#!/bin/bash\necho ok\n"),
}


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(missing: bool, why: str) -> None:
    """Skip a test whose prerequisite is missing; in CI that is a failure."""
    if missing:
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)


def prerequisite(missing: bool, why: str) -> pytest.MarkDecorator:
    """A test decorator for a prerequisite known at import time (a root worker, x86-64):
    it goes through require() like every other, so CI fails instead of skipping."""
    return pytest.mark.prerequisite(missing, why)


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


def toolmd_text(
    name: str,
    *,
    description: str | None = None,
    language: str = "typescript",
    inputs: dict | None = None,
    integrations: list[str] | None = None,
    version: int | None = None,
    extra: dict | None = None,
    body: str = "# Tool\n\n## Usage\n\nCall it.\n",
) -> str:
    front: dict = {"name": name, "description": description or f"The {name} tool."}
    if version is not None:
        front["version"] = version
    front["language"] = language
    if integrations:
        front["integrations"] = integrations
    if inputs:
        front["inputs"] = inputs
    front.update(extra or {})
    return "---\n" + yaml.safe_dump(front, sort_keys=False) + "---\n\n" + body


def tool_files(name: str, language: str = "typescript", source: str | None = None, **kw) -> dict:
    entry, default_source = ENTRY_SOURCE[language]
    return {
        "TOOL.md": toolmd_text(name, language=language, **kw).encode(),
        entry: (source or default_source).encode(),
    }


@pytest.fixture
def make_tool(db) -> Callable[..., Tool]:
    """make_tool("name", language=..., inputs=..., publish=True, source=...) -> Tool."""
    from tools_app.catalog.versions import save_version

    def make(name: str, *, publish: bool = True, language: str = "typescript", **kw) -> Tool:
        files = tool_files(name, language, **kw)
        save_version(name, files, actor=Actor.system(), publish=publish)
        return Tool.objects.get(name=name)

    return make


def _user(username: str, role: str | None) -> User:
    ensure_groups()
    user = User.objects.create_user(username, f"{username}@example.com", "pw-for-tests-only")
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def viewer(db) -> User:
    return _user("vera", VIEWER)


@pytest.fixture
def developer(db) -> User:
    return _user("dave", DEVELOPER)


@pytest.fixture
def console_admin(db) -> User:
    return _user("ada", ADMIN)


@pytest.fixture
def nobody(db) -> User:
    """Logged in, but in no role group."""
    return _user("nora", None)


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


# A real Celery worker for @pytest.mark.worker and browser tests (tests/worker_fixtures.py).
pytest_plugins = ["worker_fixtures"]


class FakeClock:
    """time.monotonic and time.sleep on a clock only the test moves: sleeping advances it
    at once. Everything else is the real time module."""

    def __init__(self) -> None:
        self.now = 1_000_000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += max(0.0, seconds)

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def __getattr__(self, name: str):
        import time

        return getattr(time, name)


@pytest.fixture
def fake_clock(monkeypatch) -> Callable[[object], FakeClock]:
    """fake_clock(module): that module's `time` becomes a FakeClock (one per test)."""
    clock = FakeClock()

    def install(module: object) -> FakeClock:
        monkeypatch.setattr(module, "time", clock)
        return clock

    return install
