"""The signing documents verifiers need (docs/signing.md): GET /api/v1/signing/keys.json and
GET /api/v1/signing/root.json.

Public, no token: they hold public keys only, and a verifier must be able to fetch keys.json
before it trusts anything. keys.json is trusted by its root signature, not by where it came
from; root.json is for information (clients pin the root key out of band)."""

from __future__ import annotations

import hashlib
from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Router

from tools_app.api.conditional import dumps, make_etag, none_match_hit, with_validator
from tools_app.api.errors import error_response
from tools_app.api.schemas import ErrorOut
from tools_app.signing import keyring

router = Router(tags=["signing"])

ERRORS: dict[int, Any] = {503: ErrorOut}


@router.get(
    "/signing/keys.json",
    response={200: dict[str, Any], 304: None, **ERRORS},
    url_name="signing_keys",
    summary="keys.json: the signing keys that verify, signed by the root key (DSSE envelope)",
)
def signing_keys(request: HttpRequest) -> HttpResponse:
    return _document(request, "keys", keyring.keys_document)


@router.get(
    "/signing/root.json",
    response={200: dict[str, Any], 304: None, **ERRORS},
    url_name="signing_root",
    summary="The root public key keys.json is signed with (pin it out of band)",
)
def signing_root(request: HttpRequest) -> HttpResponse:
    return _document(request, "root", keyring.root_document)


def _document(request: HttpRequest, what: str, read: Any) -> HttpResponse:
    try:
        document = read()
    except keyring.SigningKeyMissing as exc:
        return error_response(503, "no signing keys", str(exc))
    data = dumps(document)
    etag = make_etag(what, hashlib.sha256(data).hexdigest())
    if none_match_hit(request, etag):
        response = HttpResponse(status=304)
    else:
        response = HttpResponse(data, content_type="application/json")
    response = with_validator(response, etag)
    # Public documents: any cache may keep them, as long as it revalidates.
    response["Cache-Control"] = "public, no-cache"
    return response
