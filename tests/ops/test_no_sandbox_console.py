"""A console on a host without a usable sandbox still starts (issue: a fresh machine).

Nothing but running a tool needs bubblewrap, so migrate, validate_tools and
`makemigrations --check` work there, with the reason as a warning; the root worker refuses
each run, and the run page, the System page and the banner say why. `check --deploy`
still fails: a production host must be able to run tools."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support import console_env, manage, prerequisite
from tools_app.audit import Actor
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import execute, start

REPO = Path(__file__).resolve().parents[2]
ROOT = os.geteuid() == 0
REFUSED = "The worker refuses to run tools: Refused: the worker runs as root and bubblewrap"
MISSING_BWRAP = "/nonexistent/bwrap"  # TOOL_CONSOLE_BWRAP naming no binary: bwrap is missing


def without_bwrap(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """`manage.py ARGS` in a fresh install where bwrap is missing."""
    return manage(*args, env=console_env(tmp_path, fresh=True, TOOL_CONSOLE_BWRAP=MISSING_BWRAP))


@prerequisite(not ROOT, "a root worker is what refuses to run tools")
def test_it_migrates_and_validates_tools_without_a_usable_sandbox(tmp_path: Path) -> None:
    for args in (
        ("migrate", "--noinput"),
        ("validate_tools", str(REPO / "seed" / "tools" / "web_fetch")),
        ("makemigrations", "--check", "--dry-run"),
        ("signing_keys", "create", "--if-missing"),  # as every start does (docs/signing.md)
        ("sync_tools",),
    ):
        done = without_bwrap(tmp_path, *args)
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    assert REFUSED in done.stderr  # said, as a warning, not an error

    deploy = without_bwrap(tmp_path, "check", "--deploy")
    assert deploy.returncode != 0
    assert "tools_app.E001" in deploy.stderr and REFUSED in deploy.stderr


@prerequisite(not ROOT, "a root worker is what refuses to run tools")
def test_it_refuses_the_run_and_says_why_on_the_run_and_system_pages_and_the_banner(
    developer_client, console_admin_client, make_tool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOL_CONSOLE_BWRAP", MISSING_BWRAP)
    tool = make_tool("echo_tool", language="bash")
    started = start.start_run(
        tool.published_version, {}, actor=Actor.system(), via=RunVia.COMMAND, enqueue=False
    )
    done = execute.execute_run(started.pk)
    assert done.status == RunStatus.FAILED

    run_page = console_admin_client.get(f"/runs/{done.pk}/").content.decode()
    banner, main = run_page.split("<main", 1)
    assert "Refused: the worker runs as root and bubblewrap is not available" in main
    assert "Tools cannot run on this host" in banner
    # The banner is for admins, who can fix the host.
    developer_page = developer_client.get(f"/runs/{done.pk}/").content.decode()
    assert "Tools cannot run on this host" not in developer_page
    system_page = console_admin_client.get("/system/").content.decode()
    assert REFUSED in system_page
    # No banner line claims tools run in the fallback sandbox: they do not run at all.
    assert "Tools run in the fallback sandbox (a plain subprocess" not in system_page
