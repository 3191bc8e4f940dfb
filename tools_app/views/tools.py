"""Browsing tools: the searchable list and a tool's page."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from django.db.models import F, OuterRef, Subquery
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe

from tools_app.catalog import presets, rendering
from tools_app.forms.tools import ToolFilterForm
from tools_app.integrations.policy import secret_access
from tools_app.manifest import schema, toolmd
from tools_app.models import CaseCheck, Integration, Tool, ToolVersion
from tools_app.models.runs import RunVia
from tools_app.models.tools import VersionSource, decode_files
from tools_app.roles import VIEWER, role_required
from tools_app.runs import replay
from tools_app.views.htmx import HtmxHttpRequest
from tools_app.views.lists import PER_PAGE, render_list

__all__ = ["PER_PAGE"]  # re-exported for tests and callers that page tool lists

HIGHLIGHT_BUDGET = 300_000
RESULTS_TARGET = "tool-results"
# Versions are numbered from 1 and stored in a 32-bit column: more digits is never one.
VERSION_PARAM_RE = re.compile(r"[0-9]{1,10}")


@require_safe
@role_required(VIEWER)
def tool_list(request: HtmxHttpRequest) -> HttpResponse:
    form = ToolFilterForm(request.GET, integrations=_integration_slugs())
    rows = None
    if form.is_valid():
        rows = form.filter(
            # The list never needs the published version's content, only its number.
            with_last_check(Tool.objects.annotate(published_number=F("published_version__number")))
        )
    return render_list(
        request,
        "tools/list.html",
        form=form,
        rows=rows,
        results_target=RESULTS_TARGET,
        extra={"usable_integrations": usable_integrations()},
    )


def with_last_check(tools):
    """Each tool's latest check of its cases, of any version (status, id, version number),
    as subqueries of the list's own query: no query per row."""
    last = CaseCheck.objects.filter(tool=OuterRef("pk")).order_by("-created_at", "-pk")
    return tools.annotate(
        last_check_status=Subquery(last.values("status")[:1]),
        last_check_id=Subquery(last.values("pk")[:1]),
        last_check_version=Subquery(last.values("version__number")[:1]),
    )


def usable_integrations() -> set[str]:
    """Slugs of the integrations that exist and are enabled (one query): a tool declaring
    any other fails at run time, so the pages say so before anyone runs it."""
    return set(Integration.objects.filter(enabled=True).values_list("slug", flat=True))


def _integration_slugs() -> list[str]:
    """Every integration some tool uses, for the filter's options (one query)."""
    rows = (
        Tool.objects.exclude(integration_slugs="")
        .values_list("integration_slugs", flat=True)
        .distinct()
    )
    return sorted({slug for row in rows for slug in row.split(",") if slug})


@dataclass(frozen=True)
class SourceFile:
    path: str
    size: int
    html: str | None  # None for binary files
    is_entry: bool


@dataclass(frozen=True)
class Tab:
    label: str
    url: str
    current: bool


# The tool page's tabs, in order: (label, URL name). Each is a page of its own, so it can
# be linked and works without JavaScript; a version other than the latest stays selected
# across them (?version=N) except on Versions, which lists them all.
TABS = (
    ("Overview", "tool"),
    ("Inputs", "tool_inputs"),
    ("Source", "tool_source"),
    ("Versions", "tool_versions"),
    ("Cases", "tool_cases"),
    ("Registry", "tool_registry"),
    ("Analytics", "tool_analytics"),
)
# The registry formats the switcher offers, with their labels (tools_app.manifest.schema.FORMATS).
REGISTRY_FORMATS = {
    "native": "Native",
    "openai": "OpenAI",
    "openai-responses": "OpenAI Responses",
    "anthropic": "Anthropic",
    "mcp": "MCP",
}


def tool_tabs(tool: Tool, current: str, version_number: int | None = None) -> list[Tab]:
    query = ""
    if version_number is not None and version_number != tool.latest_number:
        query = f"?version={version_number}"
    tabs = []
    for label, url_name in TABS:
        if url_name == "tool_cases":  # cases belong to one version: it is in the path
            url = reverse(url_name, args=[tool.name, version_number or tool.latest_number])
        elif url_name == "tool_versions":
            url = reverse(url_name, args=[tool.name])
        else:
            url = reverse(url_name, args=[tool.name]) + query
        tabs.append(Tab(label, url, url_name == current))
    return tabs


def tool_header(tool: Tool, version: ToolVersion, tab: str) -> dict:
    """What every tab shows above its content: the tool's name, state and actions, for
    `version` (the one on screen), and the tabs."""
    manifest, body = _manifest_and_body(version)
    return {
        "tool": tool,
        "usable_integrations": usable_integrations(),
        "version": version,
        "version_state": tool.version_state(version),
        "manifest": manifest,
        "body": body,
        "tabs": tool_tabs(tool, tab, version.number),
        "highlight_css_version": rendering.pygments_css_hash(),
        "case_count": len(replay.cases_of_version(version).cases),
        "case_problems": bool(replay.cases_of_version(version).problems),
        "override": override_of(version),
    }


def override_of(version: ToolVersion) -> CaseCheck | None:
    """The check an admin overrode to publish `version` with failing cases (its reason)."""
    if not version.published_with_failing_cases:
        return None
    return (
        CaseCheck.objects.filter(version=version)
        .exclude(override_reason="")
        .select_related("override_by")
        .order_by("-created_at")
        .first()
    )


def _viewed_tab(request: HttpRequest, name: str, tab: str) -> tuple[Tool, ToolVersion, dict]:
    """The tool, the version on screen (?version=, else the latest) and the tab's header."""
    tool = get_tool_or_404(name)
    number = _version_number(request, default=tool.latest_number)
    version = get_object_or_404(ToolVersion, tool=tool, number=number)
    return tool, version, tool_header(tool, version, tab)


@require_safe
@role_required(VIEWER)
def tool_detail(request: HttpRequest, name: str) -> HttpResponse:
    """The Overview tab: the rendered documentation (the source has its own tab)."""
    tool, version, context = _viewed_tab(request, name, "tool")
    # The two latest versions, enough to tell whether a seed import replaced an edit.
    latest_two = list(tool.versions.only("tool_id", "number", "source").order_by("-number")[:2])
    context |= {
        "body_html": rendering.render_markdown(context["body"]),
        "seed_notice": _seed_replaced_console_edit(tool, latest_two),
        "previous_number": latest_two[1].number if len(latest_two) > 1 else None,
        # What a run of this version by the current person would receive (docs/security.md).
        "access": secret_access(
            version, context["manifest"].integrations, user=request.user, via=RunVia.BROWSER
        ),
        "preset_access": presets.access(
            version, context["manifest"], user=request.user, via=RunVia.BROWSER
        ),
    }
    return render(request, "tools/overview.html", context)


@require_safe
@role_required(VIEWER)
def tool_inputs(request: HttpRequest, name: str) -> HttpResponse:
    *_, context = _viewed_tab(request, name, "tool_inputs")
    # Defaults shown as JSON (true, "text"), the way agents send them.
    context["inputs"] = [
        (spec, json.dumps(spec.default, ensure_ascii=False) if spec.has_default else None)
        for spec in context["manifest"].inputs.values()
    ]
    return render(request, "tools/inputs.html", context)


@require_safe
@role_required(VIEWER)
def tool_source(request: HttpRequest, name: str) -> HttpResponse:
    _, version, context = _viewed_tab(request, name, "tool_source")
    files = _source_files(version)
    context |= {
        "entry_file": next((f for f in files if f.is_entry), None),
        "other_files": [f for f in files if not f.is_entry],
    }
    return render(request, "tools/source.html", context)


@require_safe
@role_required(VIEWER)
def tool_registry(request: HttpRequest, name: str) -> HttpResponse:
    """The version's registry entry in the format chosen (?format=), as agents get it
    from GET /api/v1/registry?format=... once it is published."""
    tool, version, context = _viewed_tab(request, name, "tool_registry")
    fmt = request.GET.get("format") or "native"
    base = reverse("tool_registry", args=[tool.name]) + "?"
    if version.number != tool.latest_number:
        base += f"version={version.number}&"
    context["formats"] = [
        Tab(label, f"{base}format={key}", key == fmt) for key, label in REGISTRY_FORMATS.items()
    ]
    context["format"] = fmt
    context["format_label"] = REGISTRY_FORMATS.get(fmt, "")
    if fmt not in REGISTRY_FORMATS:
        context["format_error"] = "Unknown format: choose one of " + ", ".join(
            REGISTRY_FORMATS.values()
        )
        return render(request, "tools/registry.html", context, status=400)
    extra = {"sha256": version.sha256}
    entry = schema.tool_entry(context["manifest"], fmt=fmt, extra=extra)
    context["registry_json"] = json.dumps(entry, indent=2, ensure_ascii=False)
    return render(request, "tools/registry.html", context)


def get_tool_or_404(name: str) -> Tool:
    """The tool named `name`; anything that is not a valid tool name is a 404 before it
    reaches the database (`..`, `%2e%2e`, NUL bytes, over-long names)."""
    if not toolmd.NAME_RE.fullmatch(name):
        raise Http404("No such tool.")
    return get_object_or_404(Tool, name=name)


def _version_number(request: HttpRequest, default: int) -> int:
    raw = request.GET.get("version")
    if raw is None or raw == "":
        return default
    if not VERSION_PARAM_RE.fullmatch(raw):
        raise Http404("No such version.")
    return int(raw)


def _manifest_and_body(version: ToolVersion) -> tuple[toolmd.Manifest, str]:
    parsed = toolmd.parse_toolmd(version.toolmd)
    if parsed.manifest is not None:
        return parsed.manifest, parsed.manifest.body
    # A version stored under older, looser rules: trust the stored manifest and show the
    # whole TOOL.md rather than failing the page.
    return toolmd.Manifest.from_dict(version.manifest), version.toolmd


def _source_files(version: ToolVersion) -> list[SourceFile]:
    """Entry file first, then the rest by path, TOOL.md last (its body is shown above).

    Highlighting costs time per character: past HIGHLIGHT_BUDGET characters on one page,
    files are shown as escaped plain text instead."""
    entry = version.entry
    files = sorted(
        decode_files(version.files).items(),
        key=lambda item: (item[0] != entry, item[0] == "TOOL.md", item[0]),
    )
    budget = HIGHLIGHT_BUDGET
    shown = []
    for path, data in files:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            shown.append(SourceFile(path, len(data), None, path == entry))
            continue
        html = rendering.highlight(text, path, plain=len(text) > budget)
        budget = max(0, budget - len(text))
        shown.append(SourceFile(path, len(data), html, path == entry))
    return shown


def _seed_replaced_console_edit(tool: Tool, versions: list[ToolVersion]) -> bool:
    """The latest version came from seed/ right after someone's console edit: worth a look,
    since the seed version does not contain that edit."""
    if len(versions) < 2 or tool.seed_version != tool.latest_number:
        return False
    latest, previous = versions[0], versions[1]
    return latest.source == VersionSource.SEED and previous.source == VersionSource.CONSOLE


@require_safe
@cache_control(max_age=365 * 24 * 3600, public=True, immutable=True)
def highlight_css(request: HttpRequest) -> HttpResponse:
    """Pygments' stylesheet, generated (not copied into the repo) so it always matches the
    installed Pygments. Pages link it with ?v=<hash>, so it can be cached for long."""
    return HttpResponse(rendering.pygments_css(), content_type="text/css; charset=utf-8")
