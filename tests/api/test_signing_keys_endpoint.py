"""GET /api/v1/signing/keys.json and /api/v1/signing/root.json: public, ETag/304, the
latest keys.json, and the root a verifier pins (never the database's)."""

from __future__ import annotations

import base64
import json

import pytest
from django.test import Client
from django.utils import timezone

from tests.support.agent_api import reset_api_caches
from tools_app.audit import Actor
from tools_app.models import KeysDocument, SigningKey
from tools_app.signing import keyring, trust
from tools_app.signing.envelope import SignatureRefused

pytestmark = pytest.mark.django_db

KEYS_URL = "/api/v1/signing/keys.json"
ROOT_URL = "/api/v1/signing/root.json"


@pytest.fixture(autouse=True)
def fresh_caches():
    reset_api_caches()
    yield
    reset_api_caches()


def test_it_serves_keys_json_without_a_token_and_it_opens_against_the_root():
    response = Client().get(KEYS_URL)

    assert response.status_code == 200
    assert response["Cache-Control"] == "public, no-cache"
    root = Client().get(ROOT_URL).json()
    opened = trust.open_keys(response.json(), root["publicKey"], now=timezone.now())
    assert opened.root_id == root["keyid"]
    assert set(opened.keys) == set(keyring.keyset().keys)


def test_it_answers_304_until_the_keys_change():
    client = Client()
    first = client.get(KEYS_URL)
    etag = first["ETag"]
    assert client.get(KEYS_URL, headers={"If-None-Match": etag}).status_code == 304

    keyring.rotate(actor=Actor.system())

    again = client.get(KEYS_URL, headers={"If-None-Match": etag})
    assert again.status_code == 200
    assert again["ETag"] != etag
    serials = [json.loads(_payload(r.json()))["serial"] for r in (first, again)]
    assert serials[1] == serials[0] + 1


def test_it_serves_the_pinned_root_not_the_one_the_database_holds():
    """A database edit that swaps the root key (its public key in SigningKey) must not
    change the root clients are told about: keys.json signed by the swapped root would
    then pass."""
    pinned = Client().get(ROOT_URL).json()
    attacker = SigningKey.objects.filter(role="signing").first()
    SigningKey.objects.filter(role="root").update(public_key=attacker.public_key, key_id="f" * 16)

    assert Client().get(ROOT_URL).json() == pinned


def test_it_serves_a_forged_keys_json_only_as_something_a_verifier_refuses():
    """The endpoint serves what the database holds; the root signature is what protects:
    a keys.json re-signed by another key is refused against the pinned root."""
    root = Client().get(ROOT_URL).json()["publicKey"]
    document = KeysDocument.objects.order_by("-serial").first()
    forged = dict(document.envelope)
    forged["signatures"] = [{**forged["signatures"][0], "keyid": "0" * 16}]
    KeysDocument.objects.filter(pk=document.pk).update(envelope=forged)

    served = Client().get(KEYS_URL).json()

    with pytest.raises(SignatureRefused):
        trust.open_keys(served, root, now=timezone.now())


def test_it_says_when_there_are_no_keys():
    KeysDocument.objects.all().delete()
    response = Client().get(KEYS_URL)
    assert response.status_code == 503
    assert response.json()["error"] == "no signing keys"


def test_it_refuses_other_methods_as_json():
    response = Client().post(KEYS_URL)
    assert response.status_code == 405
    assert response["Content-Type"].startswith("application/json")


def _payload(envelope: dict) -> bytes:
    return base64.b64decode(envelope["payload"])
