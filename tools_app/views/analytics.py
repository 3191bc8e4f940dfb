"""Run analytics: a tool's Analytics tab and the console-wide page (tools_app/analytics/)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.defaultfilters import pluralize
from django.utils import timezone
from django.views.decorators.http import require_safe

from tools_app.analytics import chart, figures
from tools_app.forms.analytics import ToolAnalyticsForm, WindowForm
from tools_app.roles import VIEWER, role_required
from tools_app.views.tools import get_tool_or_404, tool_header


@require_safe
@role_required(VIEWER)
def tool_analytics(request: HttpRequest, name: str) -> HttpResponse:
    """?window=24h|7d|30d, ?version=N (else all versions), ?compare=M (else N's previous)."""
    tool = get_tool_or_404(name)
    ids = dict(tool.versions.order_by("-number").values_list("pk", "number"))
    numbers = list(ids.values())
    form = ToolAnalyticsForm(request.GET, numbers=numbers)
    valid = form.is_valid()
    shown = form.cleaned_data.get("version") if valid else None
    version = tool.versions.get(number=shown or tool.latest_number)
    context = tool_header(tool, version, "tool_analytics") | {"form": form}
    if not valid:
        return render(request, "analytics/tool.html", context, status=400)
    found = figures.tool_analytics(
        tool,
        window=form.cleaned_data["window"],
        now=timezone.now(),
        numbers=numbers,
        version=shown,
        compare=form.cleaned_data["compare"],
        ids=ids,
    )
    context |= {"analytics": found, **charts(found)}
    return render(request, "analytics/tool.html", context)


def charts(found: figures.ToolAnalytics) -> dict:
    """The two charts and their text alternatives (what a screen reader says instead)."""
    timeline, step = found.timeline, found.window.bucket
    runs = sum(b.runs for b in timeline)
    errors = sum(b.errors for b in timeline)
    busiest = max(timeline, key=lambda b: b.runs, default=None)
    slowest = max((b for b in timeline if b.p95 is not None), key=lambda b: b.p95, default=None)
    span = f"{len(timeline)} {step}s of the last {found.window.label}"
    if busiest is None or not busiest.runs:
        runs_desc = f"No runs in the {span}."
    else:
        runs_desc = (
            f"{runs} run{pluralize(runs)} ({errors} error{pluralize(errors)}) over the {span}; "
            f"the busiest {step}, from {when(busiest.start)}, had {busiest.runs} "
            f"({busiest.errors} error{pluralize(busiest.errors)})."
        )
    if slowest is None:
        p95_desc = f"No run with a duration in the {span}."
    else:
        p95_desc = (
            f"The p95 duration of each {step} with runs, over the {span}; the highest, "
            f"{slowest.p95:.3f} s, from {when(slowest.start)}."
        )
    return {
        "runs_chart": chart.bar_chart([b.runs for b in timeline], [b.errors for b in timeline]),
        "p95_chart": chart.line_chart([b.p95 for b in timeline]),
        "runs_desc": runs_desc,
        "p95_desc": p95_desc,
    }


def when(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M")


@require_safe
@role_required(VIEWER)
def console_analytics(request: HttpRequest) -> HttpResponse:
    """The slowest and the most failing tools over ?window=."""
    form = WindowForm(request.GET)
    if not form.is_valid():
        return render(request, "analytics/console.html", {"form": form}, status=400)
    found = figures.console_analytics(window=form.cleaned_data["window"], now=timezone.now())
    return render(request, "analytics/console.html", {"form": form, "analytics": found})
