"""`manage.py signing_keys` (docs/commands.md, docs/signing.md "The key ring"): each action,
its output and its exit status."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.support import tool_files
from tools_app.audit import Actor
from tools_app.catalog import datapath
from tools_app.catalog.versions import save_version
from tools_app.models import AuditEvent, KeysDocument, SigningKey, ToolVersion
from tools_app.signing import keyring
from tools_app.signing import versions as signing

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("signing_keys", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def fails(*args: str, code: int = 1) -> str:
    with pytest.raises(CommandError) as caught:
        run(*args)
    assert caught.value.returncode == code
    return str(caught.value)


def test_it_creates_keys_once():
    SigningKey.objects.all().delete()
    KeysDocument.objects.all().delete()
    out = run("create")
    root, key = keyring.root_key(), keyring.signer()[0]
    assert f"root key {root.key_id} (pinned in {keyring.pin_path()})" in out
    assert f"signing key {key} created" in out
    assert run("create", "--if-missing") == "signing keys exist already; nothing to do\n"
    assert "use rotate" in fails("create")
    assert AuditEvent.objects.filter(action="signing.create").count() == 1


def test_it_lists_keys_and_keys_json():
    first = keyring.signer()[0]
    run("rotate")
    second = keyring.signer()[0]
    run("retire", first)
    lines = run("list").splitlines()
    assert lines[0].startswith(f"{keyring.root_key().key_id}  root     online")
    assert lines[1].startswith(f"{first}  signing  retired")
    assert lines[2].startswith(f"{second}  signing  signs")
    assert lines[3].startswith("keys.json #3, expires") and lines[3].endswith("1 key(s) verify")


def test_it_rotates_and_retires_with_resign_and_refreshes_data_path():
    saved = save_version("alpha", tool_files("alpha"), actor=Actor.system(), publish=True)
    old = keyring.signer()[0]
    assert "signs from now on" in run("rotate")
    out = run("retire", old, "--resign")
    assert f"signing key {old} retired" in out
    assert "re-signed 1 published version(s) it had signed" in out
    version = ToolVersion.objects.select_related("tool").get(pk=saved.version.pk)
    assert signing.verify(version) == []
    tools = datapath.tools_dir()
    assert json.loads((tools / datapath.KEYS_FILE).read_text()) == keyring.keys_document()
    on_disk = json.loads((tools / "alpha" / datapath.SIGNATURE_FILE).read_text())
    assert on_disk == version.signature


def test_it_signs_unsigned_versions_or_all_of_them():
    saved = save_version("alpha", tool_files("alpha"), actor=Actor.system(), publish=True)
    save_version("beta", tool_files("beta"), actor=Actor.system(), publish=True)
    ToolVersion.objects.filter(pk=saved.version.pk).update(signature=None)
    out = run("sign")
    assert out.endswith("signed 1 published version(s)\n") and "alpha v1: signed by" in out
    assert run("sign").endswith("signed 0 published version(s)\n")
    assert run("sign", "--all").endswith("signed 2 published version(s)\n")


def test_it_exports_the_root_and_then_needs_its_file(tmp_path: Path):
    exported = tmp_path / "root.json"
    out = run("export-root", "--out", str(exported), "--remove")
    assert "(0600); removed from the console" in out
    assert os.stat(exported).st_mode & 0o777 == 0o600
    assert "is offline: pass --root-key FILE" in fails("rotate")
    assert "is offline: pass --root-key FILE" in fails("reissue")
    assert "signs from now on" in run("rotate", "--root-key", str(exported))
    assert "keys.json #3 issued" in run("reissue", "--root-key", str(exported))
    assert "is offline already" in fails("export-root", "--out", str(tmp_path / "again.json"))


def test_it_refuses_bad_usage_with_exit_2(tmp_path: Path):
    message = fails("rotate", "--root-key", str(tmp_path / "nope"), code=2)
    assert "no such file" in message


def test_it_refuses_without_keys_with_exit_1():
    SigningKey.objects.all().delete()
    KeysDocument.objects.all().delete()
    assert keyring.MISSING in fails("list")
    assert keyring.MISSING in fails("rotate")
    assert keyring.MISSING in fails("sign")
