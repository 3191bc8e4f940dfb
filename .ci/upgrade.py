#!/usr/bin/env python3
"""CI: an upgrade keeps the data (docs/operations.md "Upgrading").

Checks out the previous release (the newest release in docs/releases.md that is an ancestor
of this commit, not this commit itself), installs its own pinned dependencies and, with
its own commands, makes a console holding data of every kind: users and roles, an
integration with a secret, tools with cases (published and a draft), the seed tools, an
agent token, runs and the audit they leave. Then the commit under test takes over the
same database, state dir and DATA_PATH with `migrate` and `signing_keys create
--if-missing` (the deploy steps) and checks that everything is still there and works:
the rows are all there, a run of the old published tool succeeds and sees the secret
(it returns the secret's sha256, which the run's redaction does not touch), a publish,
the old token, and a backup that restores into an empty database.

Standard library only. Prints what it does; exit 0 when every check passed."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RELEASES = ROOT / "docs" / "releases.md"
# | v0.1 | 0123abc... | ... : a release and its full commit
RELEASE_ROW = re.compile(r"^\|\s*(v\d+\.\d+(?:\.\d+)?)\s*\|\s*([0-9a-f]{40})\s*\|", re.M)
SECRET = "upgrade-canary-" + hashlib.sha256(os.urandom(16)).hexdigest()[:24]
# The tables whose rows an upgrade must keep, by model (counted the same way on both sides).
MODELS = (
    "auth.User",
    "auth.Group",
    "tools_app.Tool",
    "tools_app.ToolVersion",
    "tools_app.Integration",
    "tools_app.AgentToken",
    "tools_app.Run",
    "tools_app.RunUpdate",
    "tools_app.AuditEvent",
)
COUNT = (
    "import json; from django.apps import apps; "
    f"print(json.dumps({{m: apps.get_model(m).objects.count() for m in {MODELS!r}}}))"
)
TOOL_MD = """---
name: upgrade_probe
description: Returns the sha256 of its integration's token, to prove the secret decrypts.
version: {version}
language: python
integrations: [apify]
inputs:
  word: {{type: string, description: Any word., optional: true, default: hi}}
---
# Upgrade probe

Release {version} of the probe (the importer compares content, not the version line).
"""
TOOL_PY = """import hashlib, os
def execute(tool_call_id, params, signal, on_update):
    on_update({"content": [{"type": "text", "text": "hashing"}]})
    digest = hashlib.sha256(os.environ.get("APIFY_TOKEN", "").encode()).hexdigest()
    return {"content": [{"type": "text", "text": params["word"] + " " + digest}]}
"""
CASES = """cases:
  - name: says_the_word
    inputs: {word: case}
    expect:
      - is_error: false
"""


def say(text: str) -> None:
    print(f"upgrade: {text}", flush=True)


def previous_release() -> tuple[str, str] | None:
    head = git("rev-parse", "HEAD")
    found = None
    for name, commit in RELEASE_ROW.findall(RELEASES.read_text(encoding="utf-8")):
        if commit == head:
            continue
        ancestor = subprocess.run(
            ["git", "-C", str(ROOT), "merge-base", "--is-ancestor", commit, "HEAD"],
            capture_output=True,
        )
        if ancestor.returncode == 0:
            found = (name, commit)  # the table is oldest first: the last one wins
    return found


def git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"upgrade: git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


class Console:
    """One checkout's manage.py against the shared database and folders."""

    def __init__(self, checkout: Path, python: Path, env: dict[str, str]) -> None:
        self.checkout, self.python, self.env = checkout, python, env

    def manage(self, *args: str, stdin: str | None = None, ok: bool = True) -> str:
        done = subprocess.run(
            [str(self.python), "manage.py", *args],
            cwd=self.checkout,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if ok and done.returncode:
            raise SystemExit(
                f"upgrade: {self.checkout.name}: manage.py {' '.join(args)} exited "
                f"{done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        return done.stdout

    def counts(self) -> dict[str, int]:
        return json.loads(self.manage("shell", "-c", COUNT).strip().splitlines()[-1])


def old_checkout(commit: str, work: Path) -> tuple[Path, Path]:
    """(the release's files, its virtualenv's python), from its own requirements.lock."""
    checkout = work / "previous"
    checkout.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(checkout)], input=archive.stdout, check=True)
    venv.create(checkout / ".venv", with_pip=True)
    python = checkout / ".venv" / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        + ["-r", str(checkout / "requirements.lock")],
        check=True,
    )
    return checkout, python


def write_tool(folder: Path, version: int) -> Path:
    tool = folder / "upgrade_probe"
    tool.mkdir(parents=True, exist_ok=True)
    (tool / "TOOL.md").write_text(TOOL_MD.format(version=version))
    (tool / "index.py").write_text(TOOL_PY)
    (tool / "cases.yaml").write_text(CASES)
    return tool


def make_data(old: Console, work: Path) -> str:
    """Data of every kind, through the release's own commands; returns the agent token."""
    old.manage("migrate", "--no-input")
    old.manage("sync_tools")
    old.manage("createsuperuser", "--no-input", "--username", "admin", "--email", "a@example.com")
    old.manage("grant_role", "admin", "admin")
    old.manage(
        "set_integration", "apify", "--type", "apify", "--secret-stdin", "token", stdin=SECRET
    )
    old.manage("import_tools", str(write_tool(work / "tools-1", 1)), "--publish")
    old.manage("import_tools", str(write_tool(work / "tools-2", 2)))  # a draft beside it
    token = old.manage(
        "create_agent_token", "upgrade-agent", "--scope", "registry:read", "--scope", "tools:invoke"
    ).strip()
    result = json.loads(old.manage("run_tool", "upgrade_probe", "--params", '{"word": "before"}'))
    expect_hash(result, "before")
    return token


def expect_hash(result: dict, word: str) -> None:
    text = " ".join(block.get("text", "") for block in result.get("content", []))
    wanted = f"{word} {hashlib.sha256(SECRET.encode()).hexdigest()}"
    if result.get("isError") or text.strip() != wanted:
        raise SystemExit(f"upgrade: the probe's run did not see the secret: {result}")
    if SECRET in json.dumps(result):
        raise SystemExit("upgrade: the secret itself came out of a run")


def check_upgraded(new: Console, before: dict[str, int], token: str, work: Path) -> None:
    new.manage("migrate", "--no-input")
    new.manage("signing_keys", "create", "--if-missing")
    after = new.counts()
    lost = {m: (before[m], after[m]) for m in MODELS if after[m] < before[m]}
    if lost:
        raise SystemExit(f"upgrade: rows lost by the upgrade (before, after): {lost}")
    say(f"every row is still there: {after}")
    result = json.loads(new.manage("run_tool", "upgrade_probe", "--params", '{"word": "after"}'))
    expect_hash(result, "after")
    say("the old published version ran (signed by the upgrade) and its secret decrypted")
    new.manage("import_tools", str(write_tool(work / "tools-3", 3)), "--publish")
    published = new.manage(
        "shell",
        "-c",
        "from tools_app.models import Tool; t = Tool.objects.get(name='upgrade_probe'); "
        "print(t.published_version.number)",
    ).strip()
    if published.splitlines()[-1] != "3":  # v1 published, v2 a draft, v3 published
        raise SystemExit(f"upgrade: publishing after the upgrade gave version {published}")
    say("a new version published through the gate")
    known = new.manage(
        "shell",
        "-c",
        "import sys; from tools_app.models import AgentToken; "
        "print(AgentToken.authenticate(sys.stdin.read().strip()) is not None)",
        stdin=token,
    ).strip()
    if known.splitlines()[-1] != "True":
        raise SystemExit("upgrade: the agent token made before the upgrade is refused")
    say("the agent token made before the upgrade still authenticates")
    archive = work / "after-upgrade.tar"
    snapshot = new.counts()
    new.manage("backup", "--output", str(archive), "--quiet")
    target = {**new.env, "DATABASE_URL": f"sqlite:///{work / 'restored.sqlite3'}"}
    restored = Console(new.checkout, new.python, target)
    restored.manage("migrate", "--no-input")
    restored.manage("restore", str(archive))
    got = restored.counts()
    # The restore's own audit event may come on top.
    differ = {m: (snapshot[m], got[m]) for m in MODELS if got[m] != snapshot[m]}
    if (
        set(differ) - {"tools_app.AuditEvent"}
        or got["tools_app.AuditEvent"] < snapshot["tools_app.AuditEvent"]
    ):
        raise SystemExit(f"upgrade: the backup did not restore the same rows: {differ}")
    say("its backup restores into an empty database with the same rows")


def main() -> int:
    release = previous_release()
    if release is None:
        say(f"no earlier release in {RELEASES.relative_to(ROOT)}: nothing to upgrade from")
        return 1
    name, commit = release
    say(f"from {name} ({commit[:12]}) to {git('rev-parse', '--short=12', 'HEAD')}")
    work = Path(tempfile.mkdtemp(prefix="upgrade-"))
    try:
        checkout, python = old_checkout(commit, work)
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("DATABASE_URL", "CELERY_BROKER_URL", "VIRTUAL_ENV")
        }
        env |= {
            "CONSOLE_STATE_DIR": str(work / "state"),
            "DATA_PATH": str(work / "data"),
            "DJANGO_SUPERUSER_PASSWORD": "upgrade-check-password",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        old = Console(checkout, python, env)
        token = make_data(old, work)
        before = old.counts()
        say(f"{name} made its data: {before}")
        check_upgraded(Console(ROOT, ROOT / ".venv" / "bin" / "python", env), before, token, work)
    finally:
        if not os.environ.get("UPGRADE_KEEP"):
            shutil.rmtree(work, ignore_errors=True)
    say("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
