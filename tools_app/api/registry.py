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
    bundle_url,
    version_url,
    visible_tool,
    visible_version,
)
from tools_app.api.conditional import cached_json, make_etag, published_revision
from tools_app.api.schemas import ErrorOut, Format, RegistryOut, ToolOut, VersionOut
from tools_app.manifest import schema, toolmd
from tools_app.models import Tool, ToolVersion
from tools_app.models.tokens import Scope

router = Router(tags=["registry"], auth=TokenAuth(Scope.REGISTRY_READ))

FORMAT_VALUES = tuple(f.value for f in Format)
ERRORS: dict[int, Any] = {401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 422: ErrorOut}
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


@router.get(
    "/registry",
    response={200: RegistryOut, 304: None, **ERRORS},
    url_name="registry",
    summary="Published, enabled tools with the JSON Schema of their inputs",
    openapi_extra={"parameters": [FORMAT_PARAMETER, STRICT_PARAMETER]},
)
def registry(request: HttpRequest) -> HttpResponse:
    """Every published, enabled tool in one of five formats. Send the `ETag` back in
    `If-None-Match` to get a `304` while nothing changed."""
    fmt = registry_format(request)
    strict = registry_strict(request, fmt)
    # The revision is read before the tools, so a body is never older than its ETag.
    tag = ("registry", fmt, "strict") if strict else ("registry", fmt)
    revision = make_etag(*tag, published_revision())
    return cached_json(request, revision, lambda: registry_body(fmt, revision, strict))


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


def registry_body(fmt: str, revision: str, strict: bool = False) -> dict[str, Any]:
    rows = (
        Tool.objects.published()
        .order_by("name")
        .values_list("published_version__manifest", "published_version__sha256")
    )
    # Manifest.from_dict rebuilds the stored manifest without parsing YAML again.
    tools = [
        schema.tool_entry(
            toolmd.Manifest.from_dict(manifest), fmt=fmt, extra={"sha256": sha}, strict=strict
        )
        for manifest, sha in rows
    ]
    return {"format": fmt, "revision": revision, "count": len(tools), "tools": tools}


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
    etag = make_etag("tool", tool.name, str(published.pk), tool.updated_at.isoformat())

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
            **version_payload(tool.name, published),
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
    etag = make_etag("version", str(version.pk), version.sha256)
    return cached_json(request, etag, lambda: version_payload(tool.name, version))


def version_payload(name: str, version: ToolVersion) -> dict[str, Any]:
    """Everything about one immutable version, cached by id and content hash."""
    key = f"api:version:{version.pk}:{version.sha256}"
    payload = cache.get(key)
    if payload is None:
        payload = _version_payload(name, version)
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
