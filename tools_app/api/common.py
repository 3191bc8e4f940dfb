"""Lookups shared by the API routers: which tools and versions an agent may see."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from tools_app.api.errors import ApiError, shown
from tools_app.catalog import pins
from tools_app.manifest.limits import MAX_VERSION
from tools_app.manifest.toolmd import NAME_RE
from tools_app.models import AgentToken, Tool, ToolVersion
from tools_app.signing import versions as signed_versions

__all__ = ["MAX_VERSION", "bundle_url", "visible_tool", "visible_version"]

# MCP `_meta` keys (reverse-DNS prefixed, as MCP asks of implementation-specific keys).
META_DIGEST = "io.toolconsole/digest"
META_SIGNATURE = "io.toolconsole/signature"


def visible_tool(name: str) -> Tool:
    """The published, enabled tool `name`, else a 404.

    The name is checked before any query: `..`, NUL bytes and 10 kB names are answered
    without touching the database (PostgreSQL refuses NUL in a query, which would be a 500)."""
    if NAME_RE.fullmatch(name) is None:
        raise ApiError(404, "unknown tool", f"{shown(name)} is not a valid tool name")
    tool = Tool.objects.published().select_related("published_version").filter(name=name).first()
    if tool is None:
        raise ApiError(404, "unknown tool", f"no published tool is named {shown(name)}")
    return tool


def visible_version(tool: Tool, number: int) -> ToolVersion:
    """A version of a visible tool that has been published (now or before), else a 404.

    Agents may pin any version that was once published; drafts were never reviewed for
    agents and stay invisible."""
    if tool.published_version is not None and tool.published_version.number == number:
        return tool.published_version
    version = tool.versions.filter(number=number, published_at__isnull=False).first()
    if version is None:
        raise ApiError(404, "unknown version", f"{tool.name} has no published version {number}")
    return version


def version_url(name: str, number: int) -> str:
    return reverse("api:tool_version", kwargs={"name": name, "number": number})


def bundle_url(name: str, number: int) -> str:
    return reverse("api:tool_bundle", kwargs={"name": name, "number": number})


def approve_or_409(token: AgentToken | None, name: str, version: ToolVersion) -> None:
    """A pinned token may use `version` of `name` only when its signed digest is the one
    approved for the token (catalog/pins.py); else a 409 naming both digests."""
    if token is None or not token.pins:
        return  # not pinned: nothing to read (the hot path of every invoke)
    refused = pins.refusal(token, name, signed_versions.digest(version) or "")
    if refused is not None:
        raise ApiError(409, "tool_not_approved", refused.detail())


def signature_meta(sha256: str, signature: Any, digest: str) -> dict[str, Any]:
    """An MCP tool's `_meta`: the version's sha256, its digest (the pin) and, when given,
    its signature envelope, for clients that verify (docs/mcp.md)."""
    meta = {"sha256": sha256, META_DIGEST: digest}
    if signature is not None:
        meta[META_SIGNATURE] = signature
    return meta
