"""Registry, tool and version endpoints (scope `registry:read`)."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from ninja import Path, Router
from ninja.errors import ValidationError

from tools_app.api.auth import TokenAuth
from tools_app.api.common import (
    MAX_VERSION,
    approve_or_409,
    bundle_url,
    signature_meta,
    version_url,
    visible_tool,
    visible_version,
)
from tools_app.api.conditional import cached_json, make_etag, published_revision
from tools_app.api.errors import ApiError
from tools_app.api.schemas import ErrorOut, Format, RegistryOut, ToolOut, VersionOut
from tools_app.catalog import integrity, pins
from tools_app.manifest import schema, toolmd
from tools_app.models import AgentToken, Tool, ToolVersion
from tools_app.models.tokens import Scope
from tools_app.signing import versions as signed_versions

router = Router(tags=["registry"], auth=TokenAuth(Scope.REGISTRY_READ))

FORMAT_VALUES = tuple(f.value for f in Format)
ERRORS: dict[int, Any] = {
    401: ErrorOut,
    403: ErrorOut,
    404: ErrorOut,
    409: ErrorOut,
    422: ErrorOut,
}
# Versions never change, so what is derived from one is cached for long.
VERSION_CACHE_SECONDS = 24 * 3600


# `format` is read by hand rather than declared as a typed parameter: ninja's pydantic
# parsing of it was a third of a 304's cost beyond a trivial view. Declared here for the
# OpenAPI document; checked by registry_format() with ninja's error shape.
FORMAT_PARAMETER = {
    "in": "query",
    "name": "format",
    "required": False,
    "description": "Entry format: " + ", ".join(FORMAT_VALUES),
    "schema": {"type": "string", "enum": list(FORMAT_VALUES), "default": "native"},
}
STRICT_PARAMETER = {
    "in": "query",
    "name": "strict",
    "required": False,
    "description": (
        "OpenAI strict mode (formats openai and openai-responses only): every input "
        "required, optional ones nullable (null means not given), additionalProperties false"
    ),
    "schema": {"type": "boolean", "default": False},
}
STRICT_VALUES = {"true": True, "1": True, "false": False, "0": False}
SIGNATURES_PARAMETER = {
    "in": "query",
    "name": "signatures",
    "required": False,
    "description": (
        "Formats native and mcp: each entry carries its version's signature envelope too "
        "(its `digest` it always carries). An envelope is about 1.5 kB that does not "
        "compress: ask for them when you verify"
    ),
    "schema": {"type": "boolean", "default": False},
}
SIGNED_FORMATS = (Format.native.value, Format.mcp.value)


@router.get(
    "/registry",
    response={200: RegistryOut, 304: None, **ERRORS},
    url_name="registry",
    summary="Published, enabled tools with the JSON Schema of their inputs",
    openapi_extra={"parameters": [FORMAT_PARAMETER, STRICT_PARAMETER, SIGNATURES_PARAMETER]},
)
def registry(request: HttpRequest) -> HttpResponse:
    """Every published, enabled tool in one of five formats. Send the `ETag` back in
    `If-None-Match` to get a `304` while nothing changed."""
    fmt = registry_format(request)
    strict = registry_strict(request, fmt)
    signed = registry_signatures(request, fmt)
    # The revision is read before the tools, so a body is never older than its ETag.
    tag = ("registry", fmt, "strict") if strict else ("registry", fmt)
    token = request.auth
    # A pinned token's registry is its own: only the tools approved for it.
    revision = make_etag(*tag, published_revision(), pins.pins_key(token), signed)
    return cached_json(
        request, revision, lambda: registry_body(fmt, revision, strict, token, bool(signed))
    )


def registry_format(request: HttpRequest) -> str:
    fmt = request.GET.get("format", Format.native.value)
    if fmt not in FORMAT_VALUES:
        allowed = ", ".join(repr(value) for value in FORMAT_VALUES)
        raise ValidationError(
            [{"type": "enum", "loc": ["query", "format"], "msg": f"Input should be {allowed}"}]
        )
    return fmt


def registry_strict(request: HttpRequest, fmt: str) -> bool:
    raw = request.GET.get("strict", "false").lower()
    strict = STRICT_VALUES.get(raw)
    message = None
    if strict is None:
        message = "Input should be true or false"
    elif strict and fmt not in schema.STRICT_FORMATS:
        message = "strict applies to the formats openai and openai-responses only"
    if message:
        raise ValidationError([{"type": "value_error", "loc": ["query", "strict"], "msg": message}])
    return bool(strict)


def registry_signatures(request: HttpRequest, fmt: str) -> str:
    """An ETag part: "signed" when the entries are to carry their envelopes, else ""."""
    raw = request.GET.get("signatures", "false").lower()
    signed = STRICT_VALUES.get(raw)
    message = None
    if signed is None:
        message = "Input should be true or false"
    elif signed and fmt not in SIGNED_FORMATS:
        message = "signatures applies to the formats native and mcp only"
    if message:
        raise ValidationError(
            [{"type": "value_error", "loc": ["query", "signatures"], "msg": message}]
        )
    return "signed" if signed else ""


def registry_body(
    fmt: str,
    revision: str,
    strict: bool = False,
    token: AgentToken | None = None,
    signatures: bool = False,
) -> dict[str, Any]:
    """The tools whose stored version verifies (catalog/integrity.py: a database edit is
    left out, not served), and for a pinned token only those approved for it."""
    _sealed, verified = integrity.verified_versions(
        "published_version__manifest", "published_version__sha256", "published_version__signature"
    )
    tools = []
    for name, seal, (manifest, sha, signature) in verified:
        if pins.refusal(token, name, seal.digest) is not None:
            continue
        # Manifest.from_dict rebuilds the stored manifest without parsing YAML again.
        tools.append(
            schema.tool_entry(
                toolmd.Manifest.from_dict(manifest),
                fmt=fmt,
                extra=signed_extra(fmt, sha, signature if signatures else None, seal.digest),
                strict=strict,
            )
        )
    return {"format": fmt, "revision": revision, "count": len(tools), "tools": tools}


def signed_extra(fmt: str, sha: str, signature: Any, digest: str) -> dict[str, Any]:
    """What an entry carries besides the tool: in the native and mcp formats (the ones
    whose readers can check it) the version's digest (the pin), and its signature
    envelope when there is one to give (`signatures=true`)."""
    if fmt == Format.native.value:
        signed = {"signature": signature} if signature is not None else {}
        return {"sha256": sha, **signed, "digest": digest}
    if fmt == Format.mcp.value:
        return signature_meta(sha, signature, digest)
    return {"sha256": sha}


@router.get(
    "/tools/{name}",
    response={200: ToolOut, 304: None, **ERRORS},
    url_name="tool",
    summary="A tool's published version: manifest, body, files, sha256",
)
def tool_detail(request: HttpRequest, name: str) -> HttpResponse:
    tool = visible_tool(name)
    published = tool.published_version
    assert published is not None  # visible_tool only returns published tools
    approve_or_409(request.auth, tool.name, published)
    etag = make_etag(
        "tool",
        tool.name,
        str(published.pk),
        str(published.signed_serial),
        tool.updated_at.isoformat(),
    )

    def build() -> dict[str, Any]:
        versions = (
            tool.versions.filter(published_at__isnull=False)
            .order_by("-number")
            .values_list("number", "sha256", "published_at", "published_with_failing_cases")
        )
        refs = [
            {
                "version": number,
                "sha256": sha,
                "published_at": published_at,
                "published_with_failing_cases": failing,
                "url": version_url(tool.name, number),
            }
            for number, sha, published_at, failing in versions
        ]
        return {
            **version_payload(tool, published),
            "published_version": published.number,
            "versions": refs,
        }

    return cached_json(request, etag, build)


@router.get(
    "/tools/{name}/versions/{number}",
    response={200: VersionOut, 304: None, **ERRORS},
    url_name="tool_version",
    summary="One published version of a tool: manifest, body, files, sha256",
)
def tool_version(
    request: HttpRequest, name: str, number: int = Path(..., ge=1, le=MAX_VERSION)
) -> HttpResponse:
    tool = visible_tool(name)
    version = visible_version(tool, number)
    approve_or_409(request.auth, tool.name, version)
    etag = make_etag("version", str(version.pk), version.sha256, str(version.signed_serial))
    return cached_json(request, etag, lambda: version_payload(tool, version))


def version_payload(tool: Tool, version: ToolVersion) -> dict[str, Any]:
    """Everything about one immutable version, cached by id, content hash and signature
    serial (a re-signed version carries its new envelope). Verified when it is built: a
    version the database no longer holds as signed is refused (409), not served."""
    key = f"api:version:{version.pk}:{version.sha256}:{version.signed_serial}"
    payload = cache.get(key)
    if payload is None:
        version.tool = tool
        problems = signed_versions.verify(version)
        if problems:
            raise ApiError(
                409,
                "signature mismatch",
                {"tool": tool.name, "version": version.number, "problems": problems},
            )
        payload = _version_payload(tool.name, version)
        cache.set(key, payload, VERSION_CACHE_SECONDS)
    return payload


def _version_payload(name: str, version: ToolVersion) -> dict[str, Any]:
    parsed = toolmd.parse_toolmd(version.toolmd)
    manifest = toolmd.Manifest.from_dict(version.manifest)
    return {
        "name": name,
        "version": version.number,
        "sha256": version.sha256,
        "size": version.size,
        "created_at": version.created_at,
        "published_at": version.published_at,
        # An admin published it although its cases failed (docs/cases.md, the publish gate).
        "published_with_failing_cases": version.published_with_failing_cases,
        "manifest": version.manifest,
        "input_schema": schema.input_schema(manifest),
        "body": parsed.manifest.body if parsed.manifest is not None else "",
        "toolmd": version.toolmd,
        "files": [_file(path, data) for path, data in sorted(version.file_bytes().items())],
        "bundle_url": bundle_url(name, version.number),
        # The DSSE envelope over the signed manifest (docs/signing.md) and its digest.
        "signature": version.signature,
        "digest": signed_versions.digest(version),
    }


def _file(path: str, data: bytes) -> dict[str, Any]:
    try:
        content, encoding = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        content, encoding = base64.b64encode(data).decode("ascii"), "base64"
    return {
        "path": path,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "encoding": encoding,
        "content": content,
    }
