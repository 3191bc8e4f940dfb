"""DSSE envelopes (docs/signing.md): a payload, its type and Ed25519 signatures over PAE.

{"payloadType": T, "payload": base64(JCS bytes), "signatures": [{"keyid": K, "sig": base64}]}

The signature covers PAE(T, payload bytes), so a payload can never be taken for one of
another type. Keys are named by key_id(): the first 16 hex digits of the SHA-256 of the
raw public key."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tools_app.signing import canonical

MANIFEST_TYPE = "application/vnd.tool-console.manifest+json"
KEYS_TYPE = "application/vnd.tool-console.keys+json"


class SignatureRefused(Exception):
    """A signed document that must not be trusted; the message says why, precisely."""


class UnknownKey(SignatureRefused):
    """Signed by no key the verifier knows (trust.py words it for keys.json)."""

    def __init__(self, key_id: str) -> None:
        self.key_id = key_id
        super().__init__(f"signed by unknown key {key_id}")


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: lengths are ASCII decimal byte counts."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def encode_public(key: Ed25519PublicKey) -> str:
    return base64.b64encode(raw_public(key)).decode("ascii")


def decode_public(text: object) -> Ed25519PublicKey:
    """A base64 raw Ed25519 public key; ValueError for anything else."""
    if not isinstance(text, str):
        raise ValueError("a public key must be a base64 string")
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error:
        raise ValueError("a public key must be base64") from None
    if len(raw) != 32:
        raise ValueError(f"an Ed25519 public key has 32 bytes, not {len(raw)}")
    return Ed25519PublicKey.from_public_bytes(raw)


def key_id(key: Ed25519PublicKey) -> str:
    return hashlib.sha256(raw_public(key)).hexdigest()[:16]


def seal(payload_type: str, payload: Mapping, key_id: str, private_key: Ed25519PrivateKey) -> dict:
    body = canonical.dumps(dict(payload))
    signature = private_key.sign(pae(payload_type, body))
    return {
        "payloadType": payload_type,
        "payload": base64.b64encode(body).decode("ascii"),
        "signatures": [{"keyid": key_id, "sig": base64.b64encode(signature).decode("ascii")}],
    }


def open_envelope(
    envelope: object, payload_type: str, keys: Mapping[str, Ed25519PublicKey]
) -> tuple[dict, str]:
    """(payload, id of the key that verified it), or SignatureRefused. One signature by a
    known key must verify; signatures by keys not in `keys` are ignored beside it."""
    kind, body, signatures = _parts(envelope)
    if kind != payload_type:
        raise SignatureRefused(f"payload type {kind}, expected {payload_type}")
    message = pae(kind, body)
    known = [(k, sig) for k, sig in signatures if k in keys]
    if not known:
        raise UnknownKey(signatures[0][0])
    for signer, sig in known:
        try:
            keys[signer].verify(sig, message)
        except InvalidSignature:
            continue
        return _payload(body), signer
    raise SignatureRefused(f"signature by {known[0][0]} does not verify (forged or altered)")


def _parts(envelope: object) -> tuple[str, bytes, list[tuple[str, bytes]]]:
    refused = SignatureRefused("not a signature envelope")
    if not isinstance(envelope, Mapping):
        raise refused
    kind, payload, signatures = (envelope.get(k) for k in ("payloadType", "payload", "signatures"))
    if not isinstance(kind, str) or not isinstance(payload, str):
        raise refused
    if not isinstance(signatures, list) or not signatures:
        raise refused
    parsed = []
    try:
        body = base64.b64decode(payload, validate=True)
        for entry in signatures:
            signer = entry["keyid"] if isinstance(entry, Mapping) else None
            sig = entry.get("sig") if isinstance(entry, Mapping) else None
            if not isinstance(signer, str) or not isinstance(sig, str):
                raise refused
            parsed.append((signer, base64.b64decode(sig, validate=True)))
    except (binascii.Error, KeyError):
        raise refused from None
    return kind, body, parsed


def _payload(body: bytes) -> dict:
    # Signed bytes that are not their own canonical form could read differently to
    # another parser (duplicate keys, NaN, number spellings): refused.
    try:
        payload = json.loads(body.decode("utf-8"))
        if not isinstance(payload, dict) or canonical.dumps(payload) != body:
            raise ValueError
    except ValueError:
        raise SignatureRefused("payload is not canonical JSON") from None
    return payload
