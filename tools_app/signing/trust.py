"""keys.json (docs/signing.md, TUF style): the root key signs the list of signing keys that
still verify, with a serial and an expiry. A verifier pins the root public key once; a
rotated signing key then needs no change on its side, and a retired one stops verifying as
soon as it takes the next keys.json."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from tools_app.signing import canonical, statement
from tools_app.signing.envelope import (
    KEYS_TYPE,
    MANIFEST_TYPE,
    SignatureRefused,
    UnknownKey,
    decode_public,
    encode_public,
    key_id,
    open_envelope,
)

TYPE = "tool-console/keys"
FORMAT = 1

__all__ = ["FORMAT", "TYPE", "KeySet", "SignatureRefused", "keys_payload", "open_keys"]


@dataclass(frozen=True)
class KeySet:
    """An opened keys.json: the signing keys it lists, by key id."""

    serial: int
    expires: datetime
    root_id: str
    keys: dict[str, Ed25519PublicKey] = field(default_factory=dict)

    def open_manifest(self, envelope: object) -> dict:
        """The signed manifest in `envelope`, or SignatureRefused."""
        try:
            signed, _signer = open_envelope(envelope, MANIFEST_TYPE, self.keys)
        except UnknownKey as exc:
            raise SignatureRefused(
                f"signed by key {exc.key_id}, which keys.json does not list (unknown or retired)"
            ) from None
        problems = statement.shape_problems(signed)
        if problems:
            raise SignatureRefused(problems[0])
        return signed


def keys_payload(
    *,
    serial: int,
    issued: datetime,
    expires: datetime,
    root: Ed25519PublicKey,
    keys: list[tuple[Ed25519PublicKey, datetime]],
) -> dict:
    """The keys.json payload: `keys` are (public key, valid from), oldest first."""
    return {
        "_type": TYPE,
        "format": FORMAT,
        "serial": serial,
        "issued": canonical.timestamp(issued),
        "expires": canonical.timestamp(expires),
        "root": {"keyid": key_id(root), "publicKey": encode_public(root)},
        "keys": [
            {
                "keyid": key_id(key),
                "publicKey": encode_public(key),
                "validFrom": canonical.timestamp(valid_from),
            }
            for key, valid_from in keys
        ],
    }


def open_keys(
    envelope: object, root_public_key: str, *, now: datetime, min_serial: int = 0
) -> KeySet:
    """keys.json opened against the pinned root key (base64 raw), or SignatureRefused:
    not signed by that root, expired at `now`, or older than `min_serial` (rolled back)."""
    try:
        root = decode_public(root_public_key)
    except ValueError as exc:
        raise SignatureRefused(f"the pinned root key is not usable: {exc}") from None
    root_id = key_id(root)
    try:
        payload, _signer = open_envelope(envelope, KEYS_TYPE, {root_id: root})
    except UnknownKey:
        raise SignatureRefused("keys.json is not signed by the pinned root key") from None
    except SignatureRefused as exc:
        raise SignatureRefused(f"keys.json: {exc}") from None
    return _keyset(payload, root, now=now, min_serial=min_serial)


def _keyset(
    payload: Mapping, root_key: Ed25519PublicKey, *, now: datetime, min_serial: int
) -> KeySet:
    root_id = key_id(root_key)
    if payload.get("_type") != TYPE or payload.get("format") != FORMAT:
        raise SignatureRefused(f"keys.json is not a {TYPE} document of format {FORMAT}")
    root = payload.get("root")
    named = (root.get("keyid"), root.get("publicKey")) if isinstance(root, Mapping) else None
    if named != (root_id, encode_public(root_key)):
        raise SignatureRefused("keys.json names another root key than the pinned one")
    serial = payload.get("serial")
    if not isinstance(serial, int) or isinstance(serial, bool) or serial < 1:
        raise SignatureRefused("keys.json has no serial")
    if serial < min_serial:
        raise SignatureRefused(
            f"keys.json serial {serial} is older than the serial {min_serial} "
            "already seen (rolled back)"
        )
    try:
        expires = canonical.parse_timestamp(payload.get("expires"))
    except ValueError:
        raise SignatureRefused("keys.json has no valid expiry time") from None
    if expires <= now:
        raise SignatureRefused(f"keys.json expired at {payload['expires']}")
    entries = payload.get("keys")
    if not isinstance(entries, list):
        raise SignatureRefused("keys.json lists no keys")
    keys: dict[str, Ed25519PublicKey] = {}
    for entry in entries:
        if not isinstance(entry, Mapping):
            raise SignatureRefused("keys.json holds a key entry that is not an object")
        try:
            public = decode_public(entry.get("publicKey"))
        except ValueError as exc:
            raise SignatureRefused(f"keys.json key {entry.get('keyid')}: {exc}") from None
        if key_id(public) != entry.get("keyid"):
            raise SignatureRefused(f"keys.json key {entry.get('keyid')} does not match its id")
        keys[key_id(public)] = public
    return KeySet(serial=serial, expires=expires, root_id=root_id, keys=keys)
