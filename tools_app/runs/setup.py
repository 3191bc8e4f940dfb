"""What both kinds of run are given before their tool starts: the manifest, the sealed
sensitive inputs, the limits, the work folder, and the error (and error result) that fails
a run before then. Shared by tools_app/runs/execute.py (code tools)
and tools_app/http_tools/execute.py (http tools), which hands its runs back to runs: kept
apart from both so neither has to import the other for them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.cache import caches

from tools_app import runner
from tools_app.integrations import vault
from tools_app.manifest import toolmd
from tools_app.manifest.toolmd import Manifest
from tools_app.models import Run, ToolVersion


class RunSetupError(Exception):
    """The console cannot start the tool (integration missing, secret unreadable...).
    The message is safe to show and store: it never holds a secret value."""


def limits_for(manifest: Manifest, timeout: float | None) -> runner.Limits:
    return runner.Limits(
        timeout=float(timeout if timeout is not None else manifest.timeout),
        memory_mb=settings.RUNNER_MEMORY_MB,
        max_processes=settings.RUNNER_MAX_PROCESSES,
        grace_seconds=settings.RUNNER_GRACE_SECONDS,
        disk_mb=settings.RUNNER_DISK_MB,
        cpus=settings.RUNNER_CPUS,
    )


def work_dir(run: Run) -> Path:
    return Path(settings.RUNS_WORK_PATH) / str(run.pk)


def error_result(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


def manifest_of(version: ToolVersion) -> Manifest:
    """The version's manifest with its inputs in TOOL.md order (the form's order, and the
    order of "allowed: ..." in messages). The stored JSON loses that order on PostgreSQL
    (jsonb sorts keys), so the manifest comes from the TOOL.md text.

    Versions never change: each process keeps the parsed manifest (the "local" cache),
    keyed by id and content hash. An unsaved stand-in (the editor's next draft) has
    neither, so it is parsed each time."""
    local = caches["local"]
    key = f"manifest:{version.pk}:{version.sha256}" if version.pk else None
    manifest = local.get(key) if key else None
    if manifest is None:
        parsed = toolmd.parse_toolmd(version.toolmd)
        # A version stored under older, looser rules: trust the stored manifest.
        manifest = parsed.manifest or Manifest.from_dict(version.manifest)
        if key:
            local.set(key, manifest, None)
    return manifest


def seal(values: dict[str, Any]) -> str:
    if not values:
        return ""
    token, _key_id = vault.encrypt(json.dumps(values))
    return token


def unseal(token: str) -> dict[str, Any]:
    if not token:
        return {}
    try:
        return json.loads(vault.decrypt(token, what="the run's sensitive inputs"))
    except vault.VaultError as exc:
        raise RunSetupError(str(exc)) from None
