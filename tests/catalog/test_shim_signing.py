"""Verification before anything runs, on the agent's host: the generated index.js of
python, bash and http tools (tools_app/catalog/shim, the verifier block of
clients/sync-tools.mjs embedded) checks its own folder in DATA_PATH/tools against its
.tool-signature.json, and a seed-rules loader that imports verifyFolder from the sync
client (tests/data/seed_loader.mjs with VERIFY_WITH) checks index.ts/index.js tools before
it imports them (docs/sync.md, "Verified before it runs", "Loaders that verify")."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings

from tests.support.signing import OTHER_SEED, fixed_key, keys_envelope, kid, public_b64
from tests.support.sync_client import CLIENT
from tools_app.audit import Actor
from tools_app.catalog import bundle, datapath
from tools_app.catalog.sync import sync_tools
from tools_app.models import Tool
from tools_app.runner.sandbox import node_executable
from tools_app.signing import canonical, keyring, statement
from tools_app.signing.envelope import MANIFEST_TYPE, seal

REPO = Path(__file__).resolve().parents[2]
LOADER = REPO / "tests" / "data" / "seed_loader.mjs"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
# Runs in a second if it runs at all: the refusals below come before it.
QUERY = {"sql": "SELECT 1", "format": "json"}


@pytest.fixture
def mirrored(db) -> Path:
    sync_tools(seed_dir=REPO / "seed" / "tools")
    return datapath.tools_dir(settings.DATA_PATH)


def call(tools: Path, name: str, params: dict, **env: str) -> dict:
    """The loader's last event of one call: {"result"}, {"thrown"} or {"refused"}."""
    done = subprocess.run(
        [node_executable(), "--disable-warning=ExperimentalWarning", str(LOADER)]
        + ["call", name, json.dumps(params)],
        env={"PATH": SYSTEM_PATH, "PI_TOOLS_DIRS": str(tools), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def tamper(path: Path, data: bytes | None = None) -> None:
    path.write_bytes(data if data is not None else path.read_bytes() + b"\n# one more line\n")


def test_it_runs_a_verified_python_tool(mirrored):
    assert "result" in call(mirrored, "email_db", QUERY)  # it ran (the error is its own)


@pytest.mark.parametrize(
    ("name", "change", "problem"),
    [
        ("email_db", "index.py", "index.py does not match its signed sha256"),
        ("convert_audio_to_mp3", "index.sh", "index.sh does not match its signed sha256"),
        ("email_db", "TOOL.md", "TOOL.md does not match its signed sha256"),
        ("email_db", "extra", "unexpected file evil.py"),
        ("email_db", "missing", "missing file index.py"),
        ("convert_audio_to_mp3", "mode", "mode of index.sh is 777, signed 755"),
        ("email_db", "unsigned", "not signed (no .tool-signature.json)"),
        ("apify_get_run", "TOOL.md", "TOOL.md does not match its signed sha256"),
    ],
)
def test_it_refuses_a_tampered_folder_before_it_runs_anything(mirrored, name, change, problem):
    folder = mirrored / name
    if change == "extra":
        (folder / "evil.py").write_text("import os\n")
    elif change == "missing":
        (folder / "index.py").unlink()
    elif change == "mode":
        os.chmod(folder / "index.sh", 0o777)  # noqa: S103 (the attack)
    elif change == "unsigned":
        (folder / statement.SIGNATURE_FILE).unlink()
    else:
        tamper(folder / change)
    # An http tool would call the console: this one cannot be reached, and is never tried.
    env = {"CONSOLE_URL": "http://127.0.0.1:9", "CONSOLE_TOKEN": "tc_x"}

    event = call(mirrored, name, QUERY, **env)

    assert event == {"thrown": f"{name}: refused: {problem}"}


def forge_trust(tools: Path, name: str) -> None:
    """Someone who can write the folder: a changed index.py signed by a key of their own,
    listed in a keys.json signed by a root of their own, both beside it."""
    root, signer = fixed_key(OTHER_SEED), Ed25519PrivateKey.generate()
    folder = tools / name
    tamper(folder / "index.py")
    files = bundle.read_tool_dir(folder)
    for unsigned in statement.UNSIGNED_FILES:
        files.pop(unsigned, None)
    version = Tool.objects.get(name=name).published_version
    signed = statement.build(
        name,
        version.number,
        version.manifest,
        files,
        publisher="mallory",
        published=version.published_at,
        serial=99,
    )
    envelope = seal(MANIFEST_TYPE, signed, kid(signer), signer)
    (folder / statement.SIGNATURE_FILE).write_text(json.dumps(envelope))
    now = version.published_at.replace(microsecond=0)
    keys = keys_envelope(root=root, keys=[signer], issued=now, expires=now + timedelta(days=30))
    (tools / datapath.KEYS_FILE).write_text(json.dumps(keys))
    (tools / datapath.ROOT_FILE).write_text(
        json.dumps({"keyid": kid(root), "publicKey": public_b64(root)})
    )


def test_only_the_environments_root_key_holds_against_a_rewritten_folder(mirrored):
    """docs/sync.md: .tool-root.json is as writable as the folder; TOOL_CONSOLE_ROOT_KEY is
    not."""
    forge_trust(mirrored, "email_db")
    assert "result" in call(mirrored, "email_db", QUERY)  # the folder vouches for itself

    pinned = keyring.root_document()["publicKey"]
    event = call(mirrored, "email_db", QUERY, TOOL_CONSOLE_ROOT_KEY=pinned)
    assert event == {
        "thrown": "email_db: refused: keys.json is not signed by the pinned root key "
        f"{keyring.root_document()['keyid']}"
    }


def test_it_refuses_a_version_signed_by_a_retired_key(mirrored):
    old = Tool.objects.get(name="email_db").published_version.signing_key_id
    keyring.rotate(actor=Actor.system())
    keyring.retire(old, actor=Actor.system())
    datapath.write_trust()  # what signing_keys retire does after it

    event = call(mirrored, "email_db", QUERY)

    assert event == {
        "thrown": f"email_db: refused: signed by key {old}, which keys.json does not list "
        "(unknown or retired)"
    }


def test_it_refuses_an_expired_keys_json(mirrored):
    expired = keyring.reissue(actor=Actor.system(), days=-1)
    datapath.write_trust()
    event = call(mirrored, "email_db", QUERY)
    stamp = canonical.timestamp(expired.expires_at)
    assert event == {"thrown": f"email_db: refused: keys.json expired at {stamp}"}


# -- the seed-rules loader that verifies ---------------------------------------------------


def test_a_verifying_loader_imports_a_verified_typescript_tool(mirrored):
    event = call(mirrored, "web_fetch", {"url": "not a url"}, VERIFY_WITH=str(CLIENT))
    assert "result" in event  # imported and run (the error is web_fetch's own)


@pytest.mark.parametrize(
    ("name", "path"),
    [("web_fetch", "index.ts"), ("email_db", "index.js")],  # a generated index.js too
)
def test_a_verifying_loader_refuses_a_tampered_entry_before_it_imports_it(mirrored, name, path):
    poisoned = b"export async function execute() { return { content: [], pwned: true }; }\n"
    tamper(mirrored / name / path, poisoned)
    # Without verifying, the loader runs whatever the file now says.
    assert call(mirrored, name, QUERY)["result"]["pwned"] is True

    event = call(mirrored, name, QUERY, VERIFY_WITH=str(CLIENT))

    assert event == {"refused": f"{name}: refused: {path} does not match its signed sha256"}
