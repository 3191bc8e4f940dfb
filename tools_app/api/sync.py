"""The sync feed (scope `sync:read`): what a client needs to mirror DATA_PATH/tools.

A client fetches the manifest (cheap to poll with If-None-Match), compares each tool's
sha256 with its copy, downloads the bundles that differ and checks them against the hashes
listed here before swapping them in."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Path, Router

from tools_app import bundle
from tools_app.api.auth import TokenAuth
from tools_app.api.common import MAX_VERSION, bundle_url, visible_tool, visible_version
from tools_app.api.conditional import (
    cached_json,
    make_etag,
    none_match_hit,
    published_revision,
    with_validator,
)
from tools_app.api.schemas import ErrorOut, SyncManifestOut
from tools_app.models import Tool
from tools_app.models.tokens import Scope
from tools_app.models.tools import decode_files

router = Router(tags=["sync"], auth=TokenAuth(Scope.SYNC_READ))

ERRORS: dict[int, Any] = {401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 422: ErrorOut}


@router.get(
    "/sync/manifest",
    response={200: SyncManifestOut, 304: None, **ERRORS},
    url_name="sync_manifest",
    summary="Every published, enabled tool with its version, hashes and bundle URL",
)
def sync_manifest(request: HttpRequest) -> HttpResponse:
    revision = make_etag("sync", published_revision())
    return cached_json(request, revision, lambda: manifest_body(revision))


def manifest_body(revision: str) -> dict[str, Any]:
    rows = (
        Tool.objects.published()
        .order_by("name")
        .values_list(
            "name",
            "published_version__number",
            "published_version__sha256",
            "published_version__files",
        )
    )
    tools = [
        {
            "name": name,
            "version": number,
            "sha256": sha,
            "files": [
                {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                for path, data in sorted(decode_files(files).items())
            ],
            "bundle_url": bundle_url(name, number),
        }
        for name, number, sha, files in rows
    ]
    return {"revision": revision, "count": len(tools), "tools": tools}


@router.get(
    "/tools/{name}/versions/{number}/bundle",
    response={200: bytes, 304: None, **ERRORS},
    url_name="tool_bundle",
    summary="A zip of one published version's folder",
)
def tool_bundle(
    request: HttpRequest, name: str, number: int = Path(..., ge=1, le=MAX_VERSION)
) -> HttpResponse:
    """The zip holds the folder `<name>/` with every file. `X-Tool-SHA256` is the version's
    sha256 (the one the manifest lists, over the files); `Repr-Digest` is the zip's."""
    tool = visible_tool(name)
    version = visible_version(tool, number)
    # A version never changes, so its content hash is a strong validator.
    etag = make_etag("bundle", str(version.pk), version.sha256)
    if none_match_hit(request, etag):
        response = HttpResponse(status=304)
    else:
        data = bundle.zip_bytes(tool.name, version.file_bytes())
        response = HttpResponse(data, content_type="application/zip")
        response["Content-Disposition"] = f'attachment; filename="{tool.name}-v{number}.zip"'
        digest = base64.b64encode(hashlib.sha256(data).digest()).decode("ascii")
        response["Repr-Digest"] = f"sha-256=:{digest}:"
    response["X-Tool-SHA256"] = version.sha256
    response["X-Tool-Version"] = str(version.number)
    return with_validator(response, etag)
