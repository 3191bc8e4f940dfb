"""Response shapes, for the OpenAPI document. Handlers build plain dicts (cached as bytes),
so these describe the answers rather than validate them on the hot path."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from ninja import Schema


class Format(StrEnum):
    """Registry entry formats (tools_app.manifest.schema.FORMATS)."""

    native = "native"
    openai = "openai"
    openai_responses = "openai-responses"
    anthropic = "anthropic"
    mcp = "mcp"


class ErrorOut(Schema):
    error: str
    detail: Any = None


class RegistryOut(Schema):
    format: Format
    revision: str
    count: int
    tools: list[dict[str, Any]]


class FileOut(Schema):
    path: str
    size: int
    sha256: str
    encoding: str  # "utf-8" or "base64"
    content: str


class VersionOut(Schema):
    name: str
    version: int
    sha256: str
    size: int
    created_at: datetime
    published_at: datetime | None
    published_with_failing_cases: bool
    manifest: dict[str, Any]
    input_schema: dict[str, Any]
    body: str
    toolmd: str
    files: list[FileOut]
    bundle_url: str
    # The DSSE envelope of the signed manifest (docs/signing.md) and its digest (the pin
    # value); null for a version that was never signed.
    signature: dict[str, Any] | None = None
    digest: str | None = None


class VersionRef(Schema):
    version: int
    sha256: str
    published_at: datetime | None
    published_with_failing_cases: bool
    url: str


class ToolOut(VersionOut):
    published_version: int
    versions: list[VersionRef]


class SyncFileOut(Schema):
    path: str
    size: int
    sha256: str


class SyncToolOut(Schema):
    name: str
    version: int
    sha256: str
    files: list[SyncFileOut]
    bundle_url: str
    # The version's DSSE envelope (docs/signing.md), null while it is unsigned.
    signature: dict[str, Any] | None = None
    # What a model sees: name, description, inputSchema (and outputSchema).
    model: dict[str, Any]
    digest: str
    # With `since`: "added" or "updated".
    change: str | None = None


class SyncRemovedOut(Schema):
    name: str
    removed: bool


class SyncManifestOut(Schema):
    revision: str
    count: int
    tools: list[SyncToolOut]
    # keys.json (the signing keys, signed by the root key): open it against a pinned root.
    keys_url: str
    # With `since` only: the revision asked about, whether this is the full manifest
    # (the revision was unknown or too old) and why, and tombstones of removed tools.
    since: str | None = None
    full: bool | None = None
    reason: str | None = None
    removed: list[SyncRemovedOut] | None = None
