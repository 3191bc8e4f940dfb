"""DSSE envelopes (tools_app/signing/envelope.py): what is signed is PAE(type, payload), and
each way an envelope can be wrong is refused with its own message."""

from __future__ import annotations

import base64
import copy
import re

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.support.signing import (
    OTHER_SEED,
    SIGNING_SEED,
    fixed_key,
    kid,
    manifest_envelope,
    public_b64,
)
from tools_app.signing.envelope import (
    KEYS_TYPE,
    MANIFEST_TYPE,
    SignatureRefused,
    decode_public,
    key_id,
    open_envelope,
    pae,
    seal,
)

SIGNER = fixed_key(SIGNING_SEED)
KEYS = {kid(SIGNER): SIGNER.public_key()}


def test_it_signs_pae_with_byte_lengths():
    assert pae("a/b", "é".encode()) == b"DSSEv1 3 a/b 2 \xc3\xa9"
    envelope = seal(MANIFEST_TYPE, {"b": 1, "a": "é"}, kid(SIGNER), SIGNER)
    body = base64.b64decode(envelope["payload"])
    assert body == '{"a":"é","b":1}'.encode()
    signature = base64.b64decode(envelope["signatures"][0]["sig"])
    SIGNER.public_key().verify(signature, pae(MANIFEST_TYPE, body))


def test_it_opens_what_it_sealed():
    payload, signer = open_envelope(manifest_envelope(), MANIFEST_TYPE, KEYS)
    assert signer == kid(SIGNER)
    assert payload["name"] == "web_fetch"


def test_it_names_keys_by_the_hash_of_the_raw_public_key():
    import hashlib

    raw = base64.b64decode(public_b64(SIGNER))
    assert key_id(SIGNER.public_key()) == hashlib.sha256(raw).hexdigest()[:16]
    assert key_id(decode_public(public_b64(SIGNER))) == kid(SIGNER)
    for bad in ("", "not base64!", base64.b64encode(b"short").decode(), 7):
        with pytest.raises(ValueError):
            decode_public(bad)


def _tampered(change) -> dict:
    envelope = copy.deepcopy(manifest_envelope())
    change(envelope)
    return envelope


def _with_payload(envelope: dict, body: bytes) -> None:
    envelope["payload"] = base64.b64encode(body).decode()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # An altered payload: the signature no longer matches.
        (
            lambda e: _with_payload(e, base64.b64decode(e["payload"]).replace(b"alice", b"mallo")),
            f"signature by {kid(SIGNER)} does not verify (forged or altered)",
        ),
        # A signature made by another key under the signer's id.
        (
            lambda e: e["signatures"][0].update(
                sig=manifest_envelope(fixed_key(OTHER_SEED))["signatures"][0]["sig"]
            ),
            "does not verify (forged or altered)",
        ),
        (lambda e: e["signatures"][0].update(keyid="0123456789abcdef"), "signed by unknown key"),
        (lambda e: e.update(payloadType=KEYS_TYPE), f"payload type {KEYS_TYPE}, expected"),
        (lambda e: e.update(signatures=[]), "not a signature envelope"),
        (lambda e: e.pop("payload"), "not a signature envelope"),
        (lambda e: e.update(payload="***"), "not a signature envelope"),
        (lambda e: e["signatures"][0].pop("sig"), "not a signature envelope"),
        (lambda e: e.update(signatures=["x"]), "not a signature envelope"),
    ],
)
def test_it_refuses_a_bad_envelope_precisely(change, message):
    with pytest.raises(SignatureRefused, match=re.escape(message)):
        open_envelope(_tampered(change), MANIFEST_TYPE, KEYS)


@pytest.mark.parametrize("envelope", [None, "text", [], {"payloadType": 1}])
def test_it_refuses_what_is_no_envelope(envelope):
    with pytest.raises(SignatureRefused, match="not a signature envelope"):
        open_envelope(envelope, MANIFEST_TYPE, KEYS)


@pytest.mark.parametrize(
    "body", [b'{"b":1,"a":2}', b'{"a": 1}', b'{"a":1,"a":2}', b'{"a":1.0}', b"[1]", b"\xff"]
)
def test_it_refuses_a_signed_payload_that_is_not_canonical(body):
    """Bytes another parser could read otherwise (order, spaces, duplicates, spellings)
    are refused even when the signature over them is good."""
    signature = SIGNER.sign(pae(MANIFEST_TYPE, body))
    envelope = {
        "payloadType": MANIFEST_TYPE,
        "payload": base64.b64encode(body).decode(),
        "signatures": [{"keyid": kid(SIGNER), "sig": base64.b64encode(signature).decode()}],
    }
    with pytest.raises(SignatureRefused, match="payload is not canonical JSON"):
        open_envelope(envelope, MANIFEST_TYPE, KEYS)


def test_it_ignores_signatures_by_unknown_keys_beside_a_good_one():
    envelope = manifest_envelope()
    stranger = Ed25519PrivateKey.generate()
    extra = {"keyid": kid(stranger), "sig": base64.b64encode(b"x" * 64).decode()}
    envelope["signatures"].insert(0, extra)
    assert open_envelope(envelope, MANIFEST_TYPE, KEYS)[1] == kid(SIGNER)
    # ...but an unknown key alone verifies nothing.
    envelope["signatures"] = [extra]
    with pytest.raises(SignatureRefused, match=f"signed by unknown key {kid(stranger)}"):
        open_envelope(envelope, MANIFEST_TYPE, KEYS)
