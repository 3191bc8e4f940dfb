"""What tests share that is not a fixture: paths, prerequisites, tool files, users.

Fixtures and hooks live in tests/conftest.py; the helpers of one area are the other
modules of this package (forms, browser, worker, egress, integrations, ...)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

if TYPE_CHECKING:
    from django.contrib.auth.models import User

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
TEMPLATES = REPO / "templates"

MANAGE = [sys.executable, str(REPO / "manage.py")]

# Variables of this test process that would point a console process it starts at this
# run's database, broker, settings module, keys or data: a fresh install has none of them.
RUN_SPECIFIC = ("CONSOLE_", "DATABASE_URL", "CELERY_", "DJANGO_", "DATA_PATH")


def console_env(tmp_path: Path, *, fresh: bool = False, **extra: str | None) -> dict[str, str]:
    """The environment of a console process a test starts (`manage.py ...`, a script): its
    own state directory and DATA_PATH under `tmp_path`, then `extra` (None: unset).

    By default the rest is this process's environment with a SQLite database file of its
    own; with `fresh`, a fresh install's: nothing of RUN_SPECIFIC, so every default
    (SQLite in the state directory, the embedded broker, generated keys)."""
    if fresh:
        env = {k: v for k, v in os.environ.items() if not k.startswith(RUN_SPECIFIC)}
    else:
        env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    env["CONSOLE_STATE_DIR"] = str(tmp_path / "state")
    env["DATA_PATH"] = str(tmp_path / "data")
    for name, value in extra.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def manage(
    *args: str, env: dict[str, str], timeout: float = 300, **run: Any
) -> subprocess.CompletedProcess[str]:
    """`manage.py ARGS` in a process of its own, from the repository, its output captured
    as text (`env`: usually console_env(); `run`: more subprocess.run arguments)."""
    return subprocess.run(
        [*MANAGE, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout,
        **run,
    )  # fmt: skip


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


def make_user(username: str, role: str | None) -> User:
    """A user with the test password in `role`'s group (None: in no group)."""
    # Imported here: this package imports before Django is set up (tests/support/egress.py
    # runs as `python -m` in a test network namespace, where no settings are configured).
    from django.contrib.auth.models import Group, User

    from tools_app.roles import ensure_groups

    ensure_groups()
    user = User.objects.create_user(username, f"{username}@example.com", "pw-for-tests-only")
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


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
