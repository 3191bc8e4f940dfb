"""The sync feed (scope `sync:read`): what a client needs to mirror DATA_PATH/tools.

A client fetches the manifest (cheap to poll with If-None-Match), compares each tool's
sha256 with its copy, downloads the bundles that differ and checks them against the hashes
listed here before swapping them in. Hashes, file lists and bundles are of the tool as
mirrored: a python or bash tool carries the generated index.js (tools_app/catalog/shim), so the
`sha256` here differs from the registry's version sha256 for those tools.

Incremental: `?since=<revision>` answers only what changed since the manifest of that
revision (tools added or updated, with their hashes, and tombstones for tools removed).
Each manifest built leaves a snapshot (tool name -> sha256 and signing serial, so a
re-signature with the same files is a change too) in STATE_DIR/sync-snapshots,
shared by the web workers of one host and pruned to the newest SNAPSHOTS_KEPT; a revision
without a snapshot (unknown, from another host, or pruned: too old) gets the full manifest
with `full: true` and the reason.

Signed (docs/signing.md): each tool carries its version's `signature` (the DSSE envelope of
its signed manifest), its `model` view (what a model sees: the client hashes it and compares
with the signed manifest, so a changed description is refused) and its `digest`; `keys_url`
names keys.json, which the client opens against the root key it pinned."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path as FilePath
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from ninja import Path, Router

from tools_app.api.auth import TokenAuth
from tools_app.api.common import (
    MAX_VERSION,
    approve_or_409,
    bundle_url,
    visible_tool,
    visible_version,
)
from tools_app.api.conditional import (
    cached_json,
    make_etag,
    none_match_hit,
    published_revision,
    with_validator,
)
from tools_app.api.schemas import ErrorOut, SyncManifestOut
from tools_app.catalog import bundle, pins, shim
from tools_app.models import AgentToken, Tool
from tools_app.models.tokens import Scope
from tools_app.models.tools import decode_files
from tools_app.signing import statement

router = Router(tags=["sync"], auth=TokenAuth(Scope.SYNC_READ))

ERRORS: dict[int, Any] = {401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 422: ErrorOut}
SNAPSHOTS_KEPT = 200
KEYS_URL = "/api/v1/signing/keys.json"
REVISION_RE = re.compile(r"[0-9a-f]{32}")
SINCE_PARAMETER = {
    "in": "query",
    "name": "since",
    "required": False,
    "description": (
        "A revision from an earlier manifest: answer only the changes since it (`tools` "
        "added or updated, `removed` tombstones), or the full manifest with `full: true` "
        "when the revision is unknown or too old"
    ),
    "schema": {"type": "string"},
}


@router.get(
    "/sync/manifest",
    response={200: SyncManifestOut, 304: None, **ERRORS},
    url_name="sync_manifest",
    summary="Every published, enabled tool with its version, hashes and bundle URL",
    openapi_extra={"parameters": [SINCE_PARAMETER]},
)
def sync_manifest(request: HttpRequest) -> HttpResponse:
    if request.auth.pins:
        return pinned_manifest(request, request.auth)
    # The generated index.js is part of what is mirrored: a new one is a new revision.
    revision = make_etag("sync", published_revision(), shim.fingerprint())
    since = request.GET.get("since")
    if since is None:
        return cached_json(request, revision, lambda: manifest_body(revision))
    since = since[:100]
    etag = make_etag("sync-since", since, revision)
    return cached_json(request, etag, lambda: changes_body(revision, since))


def pinned_manifest(request: HttpRequest, token: AgentToken) -> HttpResponse:
    """A pinned token's manifest: only the tools approved for it (catalog/pins.py), always
    in full (`since` is answered with `full: true`): the snapshots behind `since` are of
    the whole feed, and an approval is a change they do not see. Its own ETag still
    makes polling cheap."""
    revision = make_etag(
        "sync-pinned", published_revision(), shim.fingerprint(), pins.pins_key(token)
    )

    def build() -> dict[str, Any]:
        body = manifest_body(revision)
        approved = pins.approved_versions(token)
        # The version number guards against a publish between the two reads; `digest`
        # (what is served, when the feed carries it) against an edit of the version.
        body["tools"] = [
            tool
            for tool in body["tools"]
            if approved.get(tool["name"]) == tool["version"]
            and tool.get("digest", token.pins[tool["name"]]) == token.pins[tool["name"]]
        ]
        body["count"] = len(body["tools"])
        if "since" in request.GET:
            body |= {"since": request.GET["since"][:100], "full": True, "removed": []}
            body["reason"] = "a pinned token's manifest is always the full one"
        return body

    return cached_json(
        request, make_etag(revision, "since" if "since" in request.GET else ""), build
    )


def changes_body(revision: str, since: str) -> dict[str, Any]:
    """What changed since `since`, or the full manifest saying why it is full."""
    body, marks = _manifest(revision)
    old = read_snapshot(since) if REVISION_RE.fullmatch(since) else None
    if old is None:
        reason = "unknown or too old revision: this is the full manifest"
        return {**body, "since": since, "full": True, "reason": reason, "removed": []}
    changed = []
    for tool in body["tools"]:
        before = old.get(tool["name"])
        if before != marks[tool["name"]]:
            changed.append({**tool, "change": "added" if before is None else "updated"})
    current = {tool["name"] for tool in body["tools"]}
    removed = [{"name": name, "removed": True} for name in sorted(set(old) - current)]
    return {
        "revision": revision,
        "keys_url": body["keys_url"],
        "since": since,
        "full": False,
        "count": len(changed),
        "tools": changed,
        "removed": removed,
    }


def snapshot_dir() -> FilePath:
    return FilePath(settings.STATE_DIR) / "sync-snapshots"


def read_snapshot(revision: str) -> dict[str, str] | None:
    try:
        data = json.loads((snapshot_dir() / f"{revision}.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_snapshot(revision: str, marks: dict[str, str]) -> None:
    """Atomically (another worker may read it meanwhile), then prune the oldest."""
    folder = snapshot_dir()
    target = folder / f"{revision}.json"
    if target.exists():
        return
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".tmp", delete=False) as f:
            json.dump(marks, f)
        os.replace(f.name, target)
        kept = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[SNAPSHOTS_KEPT:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass  # a missing snapshot only makes a later `since` answer full


def manifest_body(revision: str) -> dict[str, Any]:
    return _manifest(revision)[0]


def _manifest(revision: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The body and, by tool name, what the snapshot keeps of it (sha256/signing serial)."""
    rows = (
        Tool.objects.published()
        .order_by("name")
        .values_list(
            "name",
            "published_version__number",
            "published_version__manifest",
            "published_version__files",
            "published_version__signature",
            "published_version__signed_serial",
        )
    )
    tools = []
    marks = {}
    for name, number, manifest, stored, signature, serial in rows:
        files = shim.mirror_files(decode_files(stored), manifest)
        sha256 = bundle.canonical_sha256(files)
        marks[name] = f"{sha256}/{serial or 0}"
        view = statement.model_view(manifest)
        tools.append(
            {
                "name": name,
                "version": number,
                "sha256": sha256,
                "files": [
                    {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                    for path, data in files.items()
                ],
                "bundle_url": bundle_url(name, number),
                "signature": signature,
                "model": view,
                # Of what is served now: the signed manifest's digest unless it was altered.
                "digest": statement.digest(
                    {"sha256": sha256, "model": statement.model_digest(view)}
                ),
            }
        )
    write_snapshot(revision, marks)
    body = {"revision": revision, "count": len(tools), "tools": tools, "keys_url": KEYS_URL}
    return body, marks


@router.get(
    "/tools/{name}/versions/{number}/bundle",
    response={200: bytes, 304: None, 409: ErrorOut, **ERRORS},
    url_name="tool_bundle",
    summary="A zip of one published version's folder",
)
def tool_bundle(
    request: HttpRequest, name: str, number: int = Path(..., ge=1, le=MAX_VERSION)
) -> HttpResponse:
    """The zip holds the folder `<name>/` with every file as mirrored (python and bash tools
    with the generated index.js). `X-Tool-SHA256` is the canonical sha256 of those files,
    the one the manifest lists; `Repr-Digest` is the zip's."""
    tool = visible_tool(name)
    version = visible_version(tool, number)
    approve_or_409(request.auth, tool.name, version)
    files = shim.mirror_files(version.file_bytes(), version.manifest)
    sha256 = bundle.canonical_sha256(files)
    # A version never changes (the shim only with the console): the hash is a strong validator.
    etag = make_etag("bundle", str(version.pk), sha256)
    if none_match_hit(request, etag):
        response = HttpResponse(status=304)
    else:
        data = bundle.zip_bytes(tool.name, files)
        response = HttpResponse(data, content_type="application/zip")
        response["Content-Disposition"] = f'attachment; filename="{tool.name}-v{number}.zip"'
        digest = base64.b64encode(hashlib.sha256(data).digest()).decode("ascii")
        response["Repr-Digest"] = f"sha-256=:{digest}:"
    response["X-Tool-SHA256"] = sha256
    response["X-Tool-Version"] = str(version.number)
    return with_validator(response, etag)


CLIENT_PATH = shim.SYNC_CLIENT


@router.get(
    "/sync/client.mjs",
    response={200: str, 304: None, **ERRORS},
    url_name="sync_client",
    summary="The sync client (clients/sync-tools.mjs): Node.js, no dependencies",
)
def sync_client(request: HttpRequest) -> HttpResponse:
    """The repository's clients/sync-tools.mjs as it is, behind the same token and scope
    (`sync:read`) as the manifest it reads: a host that may sync already holds one, and the
    console does not tell anonymous callers which version it runs."""
    data = CLIENT_PATH.read_bytes()
    etag = make_etag("client", hashlib.sha256(data).hexdigest())
    if none_match_hit(request, etag):
        response = HttpResponse(status=304)
    else:
        response = HttpResponse(data, content_type="text/javascript; charset=utf-8")
        response["Content-Disposition"] = 'inline; filename="sync-tools.mjs"'
    return with_validator(response, etag)
