"""The console's key ring (tools_app/signing/keyring.py): created once, rotated and retired
through keys.json, the root offline-able, trust pinned outside the database, and private
keys never in the clear."""

from __future__ import annotations

import base64
import io
import json
import os
import re

import pytest
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from django.core.management import call_command
from django.test import override_settings

from tests.support.integrations import new_key
from tests.support.signing import OTHER_SEED, fixed_key, keys_envelope, public_b64
from tools_app.audit import Actor
from tools_app.integrations import vault
from tools_app.integrations.rotation import rotate_keys
from tools_app.models import AuditEvent, KeysDocument, SigningKey
from tools_app.models.signing import KeyRole
from tools_app.signing import keyring
from tools_app.signing.trust import SignatureRefused

pytestmark = pytest.mark.django_db
SYSTEM = Actor.system()


def refused(message: str, error: type[Exception] = keyring.KeyRingError):
    return pytest.raises(error, match=re.escape(message))


def test_it_creates_the_ring_once_and_pins_its_root_outside_the_database():
    # The autouse fixture made one; start from none.
    SigningKey.objects.all().delete()
    KeysDocument.objects.all().delete()
    assert keyring.ensure(actor=SYSTEM) is True
    assert keyring.ensure(actor=SYSTEM) is False
    root = keyring.root_key()
    assert json.loads(keyring.pin_path().read_text()) == {
        "keyid": root.key_id,
        "publicKey": root.public_key,
    }
    keys = keyring.keyset()
    assert keys.root_id == root.key_id
    assert list(keys.keys) == [keyring.signer()[0]]
    assert AuditEvent.objects.filter(action="signing.create").count() == 1
    with refused("the console has signing keys already: use rotate"):
        keyring.create(actor=SYSTEM)


def test_it_rotates_to_a_new_key_and_keeps_the_old_one_verifying():
    old, _ = keyring.signer()
    new = keyring.rotate(actor=SYSTEM)
    assert keyring.signer()[0] == new.key_id != old
    keys = keyring.keyset()
    assert keys.serial == 2 and set(keys.keys) == {old, new.key_id}


def test_it_retires_a_key_out_of_keys_json():
    old, _ = keyring.signer()
    with refused(f"{old} is the only signing key: rotate first, then retire it"):
        keyring.retire(old, actor=SYSTEM)
    new = keyring.rotate(actor=SYSTEM)
    keyring.retire(old, actor=SYSTEM)
    keys = keyring.keyset()
    assert keys.serial == 3 and list(keys.keys) == [new.key_id]
    with refused(f"signing key {old} is retired already"):
        keyring.retire(old, actor=SYSTEM)
    with refused("no signing key 0000000000000000"):
        keyring.retire("0" * 16, actor=SYSTEM)
    with refused(f"no signing key {keyring.root_key().key_id}"):
        keyring.retire(keyring.root_key().key_id, actor=SYSTEM)


def test_it_reissues_keys_json_with_the_next_serial_and_a_new_expiry():
    first = KeysDocument.objects.get()
    document = keyring.reissue(actor=SYSTEM, days=30)
    assert document.serial == first.serial + 1
    assert document.expires_at < first.expires_at
    assert keyring.keyset().serial == document.serial


def test_it_works_with_an_offline_root_only_when_given_its_file(tmp_path):
    exported = tmp_path / "root.json"
    root_id = keyring.export_root(exported, remove=True, actor=SYSTEM)
    assert os.stat(exported).st_mode & 0o777 == 0o600
    assert not SigningKey.objects.get(role=KeyRole.ROOT).private_key_sealed
    with refused(f"root key {root_id} is offline: pass --root-key FILE"):
        keyring.rotate(actor=SYSTEM)
    with refused(f"root key {root_id} is offline already"):
        keyring.export_root(tmp_path / "again.json", remove=True)
    key = keyring.rotate(actor=SYSTEM, root_key=exported)
    assert key.key_id in keyring.keyset().keys
    keyring.reissue(actor=SYSTEM, root_key=exported)


def test_it_refuses_a_root_file_of_another_key_and_an_existing_export(tmp_path):
    other = fixed_key(OTHER_SEED)
    raw = other.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"privateKey": base64.b64encode(raw).decode()}))
    with refused("holds another key than the root key"):
        keyring.rotate(actor=SYSTEM, root_key=wrong)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{")
    with refused("not a root key file written by export-root"):
        keyring.rotate(actor=SYSTEM, root_key=garbage)
    with refused(f"{wrong} exists: choose a new file"):
        keyring.export_root(wrong, remove=False)


def test_it_trusts_the_pin_not_the_database():
    """A database edit replaces keys.json with one of the attacker's root (and keys):
    the console opens keys.json against the pinned root, so it refuses."""
    KeysDocument.objects.update(envelope=keys_envelope(root=fixed_key(OTHER_SEED)))
    with refused("keys.json is not signed by the pinned root key", SignatureRefused):
        keyring.keyset()


def test_it_trusts_the_root_key_setting_over_the_pin_file():
    other = public_b64(fixed_key(OTHER_SEED))
    with (
        override_settings(CONSOLE_SIGNING_ROOT_KEY=other),
        refused("keys.json is not signed by the pinned root key", SignatureRefused),
    ):
        keyring.keyset()
    with override_settings(CONSOLE_SIGNING_ROOT_KEY=keyring.root_key().public_key):
        keyring.pin_path().unlink()
        assert keyring.keyset().root_id == keyring.root_key().key_id


def test_it_says_how_to_fix_a_missing_pin_or_key():
    keyring.pin_path().unlink()
    with refused("no signing root key is pinned", keyring.SigningKeyMissing):
        keyring.keyset()
    SigningKey.objects.all().delete()
    with refused(keyring.MISSING, keyring.SigningKeyMissing):
        keyring.signer()


def test_it_never_dumps_a_private_key_in_the_clear():
    call_command("signing_keys", "rotate", stdout=io.StringIO())
    secrets = []
    for row in SigningKey.objects.all():
        private = keyring._unseal_now(row)
        raw = private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        secrets += [base64.b64encode(raw).decode(), raw.hex(), base64.urlsafe_b64encode(raw)]
    out = io.StringIO()
    call_command("dumpdata", stdout=out)
    dump = out.getvalue()
    assert '"private_key_sealed": "gAAAA' in dump  # sealed by the vault (Fernet), present
    assert [s for s in secrets if str(s) in dump] == []


def test_it_reseals_private_keys_when_the_encryption_key_rotates(settings):
    first = new_key()
    settings.CONSOLE_ENCRYPTION_KEYS = [first]
    vault.clear_cache()
    SigningKey.objects.all().delete()
    KeysDocument.objects.all().delete()
    keyring.ensure(actor=SYSTEM)
    second = new_key()
    settings.CONSOLE_ENCRYPTION_KEYS = [second, first]
    vault.clear_cache()
    assert rotate_keys().signing == 2
    settings.CONSOLE_ENCRYPTION_KEYS = [second]
    vault.clear_cache()
    for row in SigningKey.objects.all():
        assert row.sealed_key_id == vault.primary_key_id()
        keyring._unseal_now(row)  # decrypts under the new key alone


def test_it_shows_auditors_keys_in_admin_but_never_a_private_one(admin_client):
    row = SigningKey.objects.filter(role="signing").first()
    raw = keyring._unseal_now(row).private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    pages = [
        admin_client.get(f"/admin/tools_app/signingkey/{key.pk}/change/").content.decode()
        for key in SigningKey.objects.all()
    ]
    pages.append(admin_client.get("/admin/tools_app/signingkey/").content.decode())
    assert row.public_key in pages[0] + "".join(pages)
    for page in pages:
        assert base64.b64encode(raw).decode() not in page and raw.hex() not in page
        assert row.private_key_sealed not in page  # not even sealed
