"""Lookups shared by the API routers: which tools and versions an agent may see."""

from __future__ import annotations

from django.urls import reverse

from tools_app.api.errors import ApiError, shown
from tools_app.manifest.limits import MAX_VERSION
from tools_app.manifest.toolmd import NAME_RE
from tools_app.models import Tool, ToolVersion

__all__ = ["MAX_VERSION", "bundle_url", "visible_tool", "visible_version"]


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
