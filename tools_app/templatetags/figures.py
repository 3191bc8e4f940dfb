"""Filters for the analytics pages (templates/analytics/): figures as text, and the charts'
shapes and data rows as markup."""

from __future__ import annotations

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from tools_app.analytics.chart import Chart
from tools_app.analytics.figures import Bucket, Comparison, ToolAnalytics

register = template.Library()

NONE = format_html('<span class="muted" title="{}">–</span>', "No run has this value")


@register.filter
def seconds(value: float | None) -> SafeString | str:
    """95.05 -> "95.050 s"; None -> a muted dash."""
    return NONE if value is None else f"{value:.3f} s"


@register.filter
def percent(value: float | None) -> SafeString | str:
    """An error percentage (0..100) -> "12.5 %"; None (nothing finished) -> a muted dash."""
    return NONE if value is None else f"{value:.1f} %"


@register.filter
def svg_shapes(chart: Chart) -> SafeString:
    """The chart's gridlines, bars, lines and dots as SVG elements (tools_app/analytics/
    chart.py has the geometry). Plain string formatting rather than {% for %} or
    format_html: every value is a number the chart computed (nothing to escape), and a week
    by the hour is 168 steps, whose escaping cost more than the page's queries
    (bench/analytics.py)."""
    width = chart.width
    parts = [
        f'<line class="grid" x1="0" x2="{width}" y1="{y}" y2="{y}"'
        ' vector-effect="non-scaling-stroke"/>'
        for y in chart.gridlines
    ]
    for b in chart.bars:
        if not b.height:
            continue
        parts.append(
            f'<rect class="bar" x="{b.x}" y="{b.y}" width="{b.width}" height="{b.height}"/>'
        )
        if b.error_height:
            parts.append(
                f'<rect class="bar error" x="{b.x}" y="{b.error_y}" width="{b.width}"'
                f' height="{b.error_height}"/>'
            )
    parts.extend(
        f'<polyline class="line" points="{points}" vector-effect="non-scaling-stroke"/>'
        for points in chart.lines
    )
    parts.extend(
        f'<line class="dot" x1="{x}" x2="{x}" y1="{y}" y2="{y}"'
        ' vector-effect="non-scaling-stroke"/>'
        for x, y in chart.dots
    )
    return mark_safe("".join(parts))  # noqa: S308 - numbers only, see above


@register.filter
def timeline_rows(timeline: list[Bucket]) -> SafeString:
    """The charts' data table's rows: the steps that had runs (numbers and times only,
    formatted without escaping, as in svg_shapes)."""
    zone = timezone.get_current_timezone()
    rows = []
    for b in timeline:
        if not b.runs:
            continue
        iso = b.start.astimezone(zone).isoformat()  # 2026-12-04T19:00:00+00:00
        rows.append(
            f'<tr><td><time datetime="{iso}">{iso[:10]} {iso[11:16]}</time></td>'
            f"<td>{int(b.runs)}</td><td>{int(b.errors)}</td><td>{seconds(b.p95)}</td></tr>"
        )
    return mark_safe("".join(rows))  # noqa: S308 - numbers and times only


# The comparison's rows: a label, the attribute, and how it is shown.
COMPARED = (
    ("Runs", "runs", str),
    ("Errors", "errors", str),
    ("Error rate", "error_percent", percent),
    ("Cancelled", "cancelled", str),
    ("Lost", "lost", str),
    ("Duration p50", "p50", seconds),
    ("Duration p95", "p95", seconds),
    ("Duration p99", "p99", seconds),
    ("Queue wait p50", "wait_p50", seconds),
    ("Queue wait p95", "wait_p95", seconds),
)


@register.filter
def comparison_rows(comparison: Comparison) -> SafeString:
    """The version-against-version table's rows (numbers only: built as timeline_rows)."""
    a, b = comparison.figures_a, comparison.figures_b
    return mark_safe(  # noqa: S308 - numbers and fixed labels only
        "".join(
            f'<tr><th scope="row">{label}</th><td>{shown(getattr(a, name))}</td>'
            f"<td>{shown(getattr(b, name))}</td></tr>"
            for label, name, shown in COMPARED
        )
    )


# The per-version table's cells after the version: its header, the attribute, the format.
PER_VERSION = (
    ("Runs", "runs", str),
    ("Succeeded", "succeeded", str),
    ("Errors", "errors", str),
    ("Cancelled", "cancelled", str),
    ("Lost", "lost", str),
    ("Error rate", "error_percent", percent),
    ("p50", "p50", seconds),
    ("p95", "p95", seconds),
    ("p99", "p99", seconds),
    ("Wait p50", "wait_p50", seconds),
    ("Wait p95", "wait_p95", seconds),
)


@register.filter
def version_rows(analytics: ToolAnalytics) -> SafeString:
    """The per-version table's rows, the version shown marked (built as timeline_rows)."""
    window = analytics.window.key
    rows = []
    for number, f in analytics.versions:
        current = ' class="current"' if number == analytics.version else ""
        cells = "".join(
            f'<td role="cell" data-label="{label}">{shown(getattr(f, name))}</td>'
            for label, name, shown in PER_VERSION
        )
        rows.append(
            f'<tr role="row"{current}><td role="cell" data-label="Version">'
            f'<a href="?window={window}&amp;version={int(number)}">v{int(number)}</a></td>'
            f"{cells}</tr>"
        )
    return mark_safe("".join(rows))  # noqa: S308 - numbers, a window key and fixed labels
