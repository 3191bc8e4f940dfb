"""Helpers for the agent API tests: token-carrying clients and the TOOL.md corpora."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from django.core.cache import cache
from django.test import Client

from tests.support import REPO
from tools_app.api import auth, conditional
from tools_app.audit import Actor
from tools_app.catalog import bundle
from tools_app.catalog.versions import save_version
from tools_app.models import AgentToken

# tests/data/toolmd carries a copy of the shared corpus's cases
# (tests/manifest/test_toolmd_corpus.py).
CORPORA = [REPO / "tests" / "data" / "toolmd"]
ALL_SCOPES = ("registry:read", "sync:read", "tools:invoke")


def reset_api_caches() -> None:
    """Tests share one process: forget bodies, the revision and remembered tokens."""
    cache.clear()
    conditional.reset_local_caches()
    auth.forget_all()


def agent_client(*scopes: str, name: str = "agent") -> Client:
    """A client that sends a fresh token holding `scopes` (default: all of them)."""
    _, raw = AgentToken.issue(name, list(scopes or ALL_SCOPES))
    client = Client(headers={"Authorization": f"Bearer {raw}"})
    client.raw_token = raw  # type: ignore[attr-defined]
    return client


def valid_corpus_tools() -> Iterator[Path]:
    """Every tool folder a corpus's EXPECTED file marks valid."""
    for corpus in CORPORA:
        expected = corpus / "EXPECTED"
        if not expected.is_file():
            continue
        for line in expected.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2 and not line.startswith("#") and parts[1] == "valid":
                yield corpus / parts[0]


def import_published(folder: Path) -> str:
    """Store a tool folder as a published version; return its name."""
    save_version(folder.name, bundle.read_tool_dir(folder), actor=Actor.system(), publish=True)
    return folder.name
