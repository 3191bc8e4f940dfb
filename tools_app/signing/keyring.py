"""The console's signing key ring (docs/signing.md): one root key that signs keys.json and
the signing keys that sign versions. Private keys are sealed by the vault; the root's may
be exported and removed (offline root), after which rotate, retire and reissue take it
from a file (`--root-key FILE`). No HTTP here: the command, the API and publish call this.

What the console trusts is keys.json opened against the PINNED root public key: setting
CONSOLE_SIGNING_ROOT_KEY, else DATA_PATH/signing/root.json written when the root key was
created. Never the database alone, so whoever can edit the database cannot swap the root."""

from __future__ import annotations

import base64
import binascii
import json
import os
from datetime import datetime, timedelta
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables

from tools_app.audit import Actor, record
from tools_app.integrations import vault
from tools_app.models import KeysDocument, SigningKey
from tools_app.models.signing import KeyRole
from tools_app.signing import trust
from tools_app.signing.envelope import KEYS_TYPE, decode_public, encode_public, key_id, seal

# How long a keys.json is valid; `signing_keys reissue` before then.
VALID_DAYS = 365
MISSING = "no signing key: run `python manage.py signing_keys create`"


class SigningKeyMissing(Exception):
    """Nothing can be signed (or trusted) now; the message names the fix."""


class KeyRingError(Exception):
    """A key ring operation refused; the message says why and what to do."""


def pin_path() -> Path:
    return Path(settings.DATA_PATH) / "signing" / "root.json"


def pinned_root() -> str | None:
    """The root public key (base64) the console trusts, or None when nothing pins one."""
    if settings.CONSOLE_SIGNING_ROOT_KEY:
        return settings.CONSOLE_SIGNING_ROOT_KEY
    try:
        pinned = json.loads(pin_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    public = pinned.get("publicKey") if isinstance(pinned, dict) else None
    return public if isinstance(public, str) else None


def root_document() -> dict:
    """{"keyid", "publicKey"} of the pinned root (what clients pin, out of band)."""
    public = pinned_root()
    if public is None:
        raise SigningKeyMissing(_unpinned())
    return {"keyid": key_id(decode_public(public)), "publicKey": public}


def _unpinned() -> str:
    return (
        "no signing root key is pinned: set CONSOLE_SIGNING_ROOT_KEY, or restore "
        f"{pin_path()} (`python manage.py signing_keys list` shows the root key), or run "
        "`python manage.py signing_keys create` on a console without keys"
    )


def root_key() -> SigningKey | None:
    return SigningKey.objects.filter(role=KeyRole.ROOT).order_by("-created_at", "-pk").first()


def active_keys() -> QuerySet[SigningKey]:
    """The signing keys keys.json lists: not retired, oldest first (the newest signs)."""
    return SigningKey.objects.filter(role=KeyRole.SIGNING, retired_at__isnull=True).order_by(
        "created_at", "pk"
    )


def ensure(*, actor: Actor) -> bool:
    """Create the root and a first signing key when the console has no key at all; True
    when it did. Safe when several processes start at once: one creates, the rest see it."""
    if SigningKey.objects.exists():
        return False
    try:
        create(actor=actor)
    except (IntegrityError, KeyRingError):
        return False  # another process created the ring meanwhile
    return True


@sensitive_variables()
def create(*, actor: Actor, days: int = VALID_DAYS) -> SigningKey:
    """A new key ring: a root key (pinned in DATA_PATH/signing/root.json), a signing key and
    keys.json serial 1 (or the next serial). Refused when a ring exists (rotate instead)."""
    with transaction.atomic():
        if SigningKey.objects.select_for_update().exists():
            raise KeyRingError("the console has signing keys already: use rotate")
        root_private = Ed25519PrivateKey.generate()
        root = _store(root_private, KeyRole.ROOT, actor)
        signing = _store(Ed25519PrivateKey.generate(), KeyRole.SIGNING, actor)
        document = _issue(root_private, days=days)
        _write_pin(root)
        record(
            actor,
            "signing.create",
            signing,
            f"signing key ring created: root {root.key_id}, signing key {signing.key_id}",
            {"root": root.key_id, "key": signing.key_id, "serial": document.serial},
        )
    return signing


@sensitive_variables()
def rotate(*, actor: Actor, root_key: Path | None = None) -> SigningKey:
    """A new signing key that signs from now on; the previous ones stay listed (their
    versions still verify) until retired."""
    with transaction.atomic():
        root_private = _root_private(root_key)
        signing = _store(Ed25519PrivateKey.generate(), KeyRole.SIGNING, actor)
        document = _issue(root_private)
        record(
            actor,
            "signing.rotate",
            signing,
            f"signing key {signing.key_id} signs from now on (keys.json #{document.serial})",
            {"key": signing.key_id, "serial": document.serial},
        )
    return signing


@sensitive_variables()
def retire(key: str, *, actor: Actor, root_key: Path | None = None) -> SigningKey:
    """Leave signing key `key` out of keys.json from now on: what it signed stops verifying
    (re-sign it first, or with `--resign`). The last active key cannot be retired."""
    with transaction.atomic():
        row = SigningKey.objects.select_for_update().filter(key_id=key).first()
        if row is None or row.role != KeyRole.SIGNING:
            raise KeyRingError(f"no signing key {key} (`signing_keys list` shows them)")
        if row.retired_at is not None:
            raise KeyRingError(f"signing key {key} is retired already")
        if not active_keys().exclude(pk=row.pk).exists():
            raise KeyRingError(f"{key} is the only signing key: rotate first, then retire it")
        root_private = _root_private(root_key)
        row.retired_at = timezone.now()
        row.save(update_fields=["retired_at"])
        document = _issue(root_private)
        record(
            actor,
            "signing.retire",
            row,
            f"signing key {key} retired (keys.json #{document.serial})",
            {"key": key, "serial": document.serial},
        )
    return row


@sensitive_variables()
def reissue(*, actor: Actor, root_key: Path | None = None, days: int = VALID_DAYS) -> KeysDocument:
    """keys.json again with the same keys, the next serial and a new expiry."""
    with transaction.atomic():
        document = _issue(_root_private(root_key), days=days)
        record(
            actor,
            "signing.reissue",
            summary=f"keys.json #{document.serial} issued, expires {document.expires_at:%Y-%m-%d}",
            data={"serial": document.serial},
        )
    return document


@sensitive_variables()
def export_root(path: Path, *, remove: bool, actor: Actor | None = None) -> str:
    """Write the root private key to `path` (created, mode 0600, never overwritten); with
    `remove`, delete it from the console (offline root). Returns the root key id."""
    actor = actor or Actor.system()
    with transaction.atomic():
        root = SigningKey.objects.select_for_update().filter(role=KeyRole.ROOT).first()
        if root is None:
            raise KeyRingError(MISSING)
        if not root.online:
            raise KeyRingError(f"root key {root.key_id} is offline already (not on the console)")
        private = _unseal(root)
        document = {
            "keyid": root.key_id,
            "publicKey": root.public_key,
            "privateKey": base64.b64encode(_raw_private(private)).decode("ascii"),
        }
        _write_private_file(Path(path), json.dumps(document, indent=2) + "\n")
        if remove:
            root.private_key_sealed = ""
            root.sealed_key_id = ""
            root.save(update_fields=["private_key_sealed", "sealed_key_id"])
        record(
            actor,
            "signing.export_root",
            root,
            f"root key {root.key_id} exported" + (" and removed from the console" * remove),
            {"key": root.key_id, "removed": remove},
        )
    return root.key_id


def keys_document() -> dict:
    """The latest keys.json envelope."""
    envelope = KeysDocument.objects.order_by("-serial").values_list("envelope", flat=True).first()
    if envelope is None:
        raise SigningKeyMissing(MISSING)
    return envelope


# (pinned root, signed payload) -> its KeySet: opening keys.json costs a signature check,
# and keyset() runs before every run of a published version.
_opened: dict[tuple[str, str], trust.KeySet] = {}


def keyset(*, now: datetime | None = None) -> trust.KeySet:
    """The latest keys.json opened against the pinned root; SignatureRefused when it does
    not open (expired, signed by another root), SigningKeyMissing when there is none."""
    now = now or timezone.now()
    root = pinned_root()
    if root is None:
        raise SigningKeyMissing(_unpinned())
    envelope = keys_document()
    cache_key = (root, str(envelope.get("payload")) if isinstance(envelope, dict) else "")
    cached = _opened.get(cache_key)
    if cached is not None and cached.expires > now:
        return cached
    opened = trust.open_keys(envelope, root, now=now)
    if len(_opened) > 64:
        _opened.clear()
    _opened[cache_key] = opened
    return opened


@sensitive_variables()
def signer() -> tuple[str, Ed25519PrivateKey]:
    """(key id, private key) of the newest active signing key, or SigningKeyMissing."""
    # active_keys().exclude(private_key_sealed="").last() in plain SQL: every publish signs,
    # and building that query cost more than signing itself (bench/signing.py).
    with connection.cursor() as cursor:
        cursor.execute(_SIGNER_SQL, [KeyRole.SIGNING.value, ""])
        found = cursor.fetchone()
    if found is None:
        raise SigningKeyMissing(MISSING)
    return found[0], _unseal(SigningKey(key_id=found[0], private_key_sealed=found[1]))


_SIGNER_SQL = (
    f"SELECT key_id, private_key_sealed FROM {SigningKey._meta.db_table}"  # noqa: S608 (a model's table)
    " WHERE role = %s AND retired_at IS NULL AND private_key_sealed <> %s"
    " ORDER BY created_at DESC, id DESC LIMIT 1"
)


@sensitive_variables()
def _store(private: Ed25519PrivateKey, role: str, actor: Actor) -> SigningKey:
    public = private.public_key()
    token, sealed_by = vault.encrypt(base64.b64encode(_raw_private(private)).decode("ascii"))
    return SigningKey.objects.create(
        key_id=key_id(public),
        role=role,
        public_key=encode_public(public),
        private_key_sealed=token,
        sealed_key_id=sealed_by,
        # Whole seconds: keys.json's validFrom is this time.
        created_at=timezone.now().replace(microsecond=0),
        created_by=actor.user,
    )


def _raw_private(private: Ed25519PrivateKey) -> bytes:
    return private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())


# (key id, sealed token) -> the private key: unsealing costs more than signing does, and a
# re-sealed or replaced key has another token.
_unsealed: dict[tuple[str, str], Ed25519PrivateKey] = {}


@sensitive_variables()
def _unseal(row: SigningKey) -> Ed25519PrivateKey:
    cache_key = (row.key_id, row.private_key_sealed)
    private = _unsealed.get(cache_key)
    if private is None:
        private = _unseal_now(row)
        if len(_unsealed) > 64:
            _unsealed.clear()
        _unsealed[cache_key] = private
    return private


@sensitive_variables()
def _unseal_now(row: SigningKey) -> Ed25519PrivateKey:
    try:
        raw = base64.b64decode(vault.decrypt(row.private_key_sealed, what=f"key {row.key_id}"))
    except vault.VaultError as exc:
        raise SigningKeyMissing(f"signing key {row.key_id} cannot be unsealed: {exc}") from None
    return Ed25519PrivateKey.from_private_bytes(raw)


@sensitive_variables()
def _root_private(path: Path | None) -> Ed25519PrivateKey:
    """The root private key: from `path` (an export_root file) or sealed on the console."""
    root = root_key()
    if root is None:
        raise KeyRingError(MISSING)
    if path is None:
        if not root.online:
            raise KeyRingError(
                f"root key {root.key_id} is offline: pass --root-key FILE (its export_root file)"
            )
        return _unseal(root)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        private = Ed25519PrivateKey.from_private_bytes(
            base64.b64decode(data["privateKey"], validate=True)
        )
    except (OSError, ValueError, KeyError, TypeError, binascii.Error):
        raise KeyRingError(f"{path}: not a root key file written by export-root") from None
    if key_id(private.public_key()) != root.key_id:
        raise KeyRingError(f"{path} holds another key than the root key {root.key_id}")
    return private


def _issue(root_private: Ed25519PrivateKey, *, days: int = VALID_DAYS) -> KeysDocument:
    """keys.json with the next serial, listing the active signing keys, signed by the root."""
    latest = KeysDocument.objects.order_by("-serial").values_list("serial", flat=True).first()
    serial = (latest or 0) + 1
    issued = timezone.now().replace(microsecond=0)
    expires = issued + timedelta(days=days)
    root_public = root_private.public_key()
    payload = trust.keys_payload(
        serial=serial,
        issued=issued,
        expires=expires,
        root=root_public,
        keys=[(decode_public(k.public_key), k.created_at) for k in active_keys()],
    )
    envelope = seal(KEYS_TYPE, payload, key_id(root_public), root_private)
    return KeysDocument.objects.create(
        serial=serial, envelope=envelope, issued_at=issued, expires_at=expires
    )


def _write_pin(root: SigningKey) -> None:
    """DATA_PATH/signing/root.json, replaced whole (written beside, then renamed)."""
    path = pin_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    text = json.dumps({"keyid": root.key_id, "publicKey": root.public_key}, indent=2) + "\n"
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def _write_private_file(path: Path, text: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise KeyRingError(f"{path} exists: choose a new file") from None
    except OSError as exc:
        raise KeyRingError(f"{path} cannot be created ({exc.strerror})") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
