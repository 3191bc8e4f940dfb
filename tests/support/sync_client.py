"""Running the sync client (clients/sync-tools.mjs) against a live console, and a proxy
that stands in for a network (or a console) that tampers with what passes through it:
tests/catalog/test_sync_client.py and test_sync_client_signing.py."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests.support import REPO, tool_files
from tests.support.agent_api import reset_api_caches
from tests.support.stand_in import Reply, Request
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.runner.sandbox import node_executable
from tools_app.signing import keyring

CLIENT = REPO / "clients" / "sync-tools.mjs"
STATE = ".sync-tools-state.json"
KEYS_FILE = ".tool-keys.json"
ROOT_FILE = ".tool-root.json"
# What the client writes beside the tool folders.
BESIDE = [STATE, KEYS_FILE, ROOT_FILE]

PY = (
    "def execute(tool_call_id, params, signal, on_update):\n"
    "    return {{'content': [{{'type': 'text', 'text': '{}'}}]}}\n"
)


def publish(name: str, source: str, language: str = "python", **kw) -> None:
    files = tool_files(name, language=language, source=source, **kw)
    save_version(name, files, actor=Actor.system(), publish=True)


def root_key() -> str:
    """The console's root public key (base64), as `signing_keys list` shows it."""
    return keyring.root_document()["publicKey"]


def run_client(
    url: str, folder: Path, token: str, *extra: str, anchor: bool = True
) -> subprocess.CompletedProcess:
    """One pass; with `anchor` the root key is given (the first run's --root-key)."""
    reset_api_caches()  # the revision memo would hide a change made a moment ago
    pinned = ["--root-key", root_key()] if anchor else []
    return subprocess.run(
        [node_executable(), str(CLIENT), "--url", url, "--dir", str(folder), *pinned, *extra],
        env={"PATH": os.environ["PATH"], "CONSOLE_TOKEN": token},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def state(folder: Path) -> dict:
    return json.loads((folder / STATE).read_text())


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


class Proxy:
    """A proxy in front of the console. `edit[kind]` (kind "manifest", "bundle", "keys")
    rewrites the body of a 200 answer of that kind: bytes in, bytes out."""

    def __init__(self, upstream: str, stand_in) -> None:
        self.upstream = upstream
        self.edit: dict[str, Callable[[bytes], bytes]] = {}
        self.seen: list[tuple[str, str | None, int]] = []  # path, If-None-Match, status
        self.url = stand_in(self.answer, methods=("GET",)).url

    @staticmethod
    def kind(path: str) -> str:
        route = path.partition("?")[0]
        if route.endswith("/bundle"):
            return "bundle"
        if route.endswith("/sync/manifest"):
            return "manifest"
        if route.endswith("/signing/keys.json"):
            return "keys"
        return "other"

    def answer(self, asked: Request) -> Reply:
        # No gzip: the edits read the bodies.
        skipped = ("host", "accept-encoding")
        headers = {k: v for k, v in asked.headers.items() if k.lower() not in skipped}
        request = urllib.request.Request(self.upstream + asked.path, headers=headers)
        try:
            with urllib.request.urlopen(request) as answer:  # noqa: S310 (test proxy)
                status, body, kept = answer.status, answer.read(), answer.headers
        except urllib.error.HTTPError as error:
            status, body, kept = error.code, error.read(), error.headers
        self.seen.append((asked.path, asked.header("If-None-Match"), status))
        edit = self.edit.get(self.kind(asked.path))
        if edit is not None and status == 200:
            body = edit(body)
        passed = {key: kept[key] for key in ("ETag", "Content-Encoding") if kept.get(key)}
        return Reply(status, body, kept.get("Content-Type") or None, passed)


def write_signed_tool(root: Path, manifest: dict, files: dict[str, bytes]) -> Path:
    """root/<name> holding `files` as the console delivers them (generated index.js
    included), signed by the fixed test keys (tests/support/signing.py), with keys.json and
    the root beside it: a folder the generated index.js and verifying loaders accept."""
    from datetime import UTC, datetime, timedelta

    from tests.support.signing import ROOT_SEED, SIGNING_SEED, fixed_key, keys_envelope, kid
    from tools_app.catalog import bundle, shim
    from tools_app.signing import statement
    from tools_app.signing.envelope import MANIFEST_TYPE, seal

    name = manifest["name"]
    delivered = shim.mirror_files(files, manifest)
    now = datetime.now(UTC).replace(microsecond=0)
    signed = statement.build(
        name, 1, manifest, delivered, publisher="test", published=now, serial=1
    )
    signer = fixed_key(SIGNING_SEED)
    envelope = seal(MANIFEST_TYPE, signed, kid(signer), signer)
    signature = {statement.SIGNATURE_FILE: json.dumps(envelope).encode()}
    bundle.write_tool_dir_atomic(root / name, {**delivered, **signature})
    keys = keys_envelope(issued=now, expires=now + timedelta(days=30))
    (root / KEYS_FILE).write_text(json.dumps(keys))
    root_public = json.loads(base64.b64decode(keys["payload"]))["root"]
    assert root_public["keyid"] == kid(fixed_key(ROOT_SEED))
    (root / ROOT_FILE).write_text(json.dumps(root_public))
    return root / name
