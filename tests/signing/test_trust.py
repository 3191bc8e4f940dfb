"""keys.json (tools_app/signing/trust.py): opened against a pinned root key only, refused
when forged, expired or rolled back, and the keys it lists are the only ones a version's
signature may come from."""

from __future__ import annotations

import base64
import copy
import json
import re
from datetime import timedelta

import pytest

from tests.support.signing import (
    EXPIRES,
    ISSUED,
    OTHER_SEED,
    ROOT_SEED,
    SIGNING_SEED,
    fixed_key,
    keys_envelope,
    kid,
    manifest_envelope,
    public_b64,
)
from tools_app.signing.envelope import KEYS_TYPE, MANIFEST_TYPE, seal
from tools_app.signing.trust import SignatureRefused, open_keys

ROOT, SIGNER, OTHER = fixed_key(ROOT_SEED), fixed_key(SIGNING_SEED), fixed_key(OTHER_SEED)
PIN = public_b64(ROOT)
NOW = ISSUED + timedelta(days=1)


def refused(message: str):
    return pytest.raises(SignatureRefused, match=re.escape(message))


def test_it_opens_keys_json_signed_by_the_pinned_root():
    keys = open_keys(keys_envelope(serial=7), PIN, now=NOW, min_serial=7)
    assert (keys.serial, keys.expires, keys.root_id) == (7, EXPIRES, kid(ROOT))
    assert list(keys.keys) == [kid(SIGNER)]
    assert keys.open_manifest(manifest_envelope())["name"] == "web_fetch"


def test_it_refuses_keys_json_signed_by_another_root():
    with refused("keys.json is not signed by the pinned root key"):
        open_keys(keys_envelope(root=OTHER), PIN, now=NOW)


def test_it_refuses_a_forged_keys_json():
    """Someone adds their own key to keys.json: the root's signature no longer matches."""
    envelope = keys_envelope()
    body = base64.b64decode(envelope["payload"]).replace(
        public_b64(SIGNER).encode(), public_b64(OTHER).encode()
    )
    envelope["payload"] = base64.b64encode(body).decode()
    with refused(f"keys.json: signature by {kid(ROOT)} does not verify (forged or altered)"):
        open_keys(envelope, PIN, now=NOW)


def test_it_refuses_an_expired_keys_json():
    with refused("keys.json expired at 2027-12-03T10:00:00Z"):
        open_keys(keys_envelope(), PIN, now=EXPIRES)
    open_keys(keys_envelope(), PIN, now=EXPIRES - timedelta(seconds=1))


def test_it_refuses_a_rolled_back_keys_json():
    with refused("keys.json serial 6 is older than the serial 7 already seen (rolled back)"):
        open_keys(keys_envelope(serial=6), PIN, now=NOW, min_serial=7)


def test_it_refuses_keys_json_naming_another_root_than_the_one_that_signed_it():
    envelope = keys_envelope()
    payload = _payload(envelope)
    payload["root"] = {"keyid": kid(OTHER), "publicKey": public_b64(OTHER)}
    with refused("keys.json names another root key than the pinned one"):
        open_keys(seal(KEYS_TYPE, payload, kid(ROOT), ROOT), PIN, now=NOW)


def test_it_refuses_a_key_entry_whose_id_is_not_its_key():
    payload = _payload(keys_envelope())
    payload["keys"][0]["keyid"] = kid(OTHER)
    with refused(f"keys.json key {kid(OTHER)} does not match its id"):
        open_keys(seal(KEYS_TYPE, payload, kid(ROOT), ROOT), PIN, now=NOW)


def test_it_refuses_a_manifest_envelope_offered_as_keys_json():
    with refused(f"keys.json: payload type {MANIFEST_TYPE}, expected {KEYS_TYPE}"):
        open_keys(seal(MANIFEST_TYPE, _payload(keys_envelope()), kid(ROOT), ROOT), PIN, now=NOW)


def test_it_refuses_a_manifest_signed_by_a_key_keys_json_does_not_list():
    """An unknown key, or a retired one: keys.json no longer lists it."""
    retired = open_keys(keys_envelope(keys=[OTHER], serial=2), PIN, now=NOW)
    with refused(
        f"signed by key {kid(SIGNER)}, which keys.json does not list (unknown or retired)"
    ):
        retired.open_manifest(manifest_envelope())


def test_it_refuses_a_forged_manifest_and_one_of_another_type():
    keys = open_keys(keys_envelope(), PIN, now=NOW)
    forged = copy.deepcopy(manifest_envelope())
    forged["signatures"][0]["sig"] = manifest_envelope(OTHER)["signatures"][0]["sig"]
    with refused("does not verify (forged or altered)"):
        keys.open_manifest(forged)
    with refused(f"payload type {KEYS_TYPE}, expected {MANIFEST_TYPE}"):
        keys.open_manifest(seal(KEYS_TYPE, _payload(manifest_envelope()), kid(SIGNER), SIGNER))
    # A signing key's signature over keys.json is not a manifest either.
    with refused("not a signed tool manifest"):
        keys.open_manifest(seal(MANIFEST_TYPE, _payload(keys_envelope()), kid(SIGNER), SIGNER))


def test_it_refuses_a_root_pin_that_is_no_key():
    with refused("the pinned root key is not usable"):
        open_keys(keys_envelope(), "nope", now=NOW)


def _payload(envelope: dict) -> dict:
    return json.loads(base64.b64decode(envelope["payload"]))
