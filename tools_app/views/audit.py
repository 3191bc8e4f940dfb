"""The audit page (admins and auditors): the append-only log, filtered by who, action,
target and date, with each target named and linked, and the same rows as CSV."""

from __future__ import annotations

import csv

from django.http import HttpResponse, StreamingHttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from tools_app.audit_targets import attach_targets, target_label, target_url
from tools_app.forms.audit import AuditFilterForm
from tools_app.models import AuditEvent
from tools_app.roles import allowed_if, can_audit
from tools_app.views.htmx import HtmxHttpRequest
from tools_app.views.lists import render_list

RESULTS_TARGET = "audit-results"
CSV_CHUNK = 500
CSV_COLUMNS = ("time", "actor", "actor_kind", "action", "target_type", "target_id", "target")
CSV_COLUMNS += ("summary", "ip")


@never_cache
@require_safe
@allowed_if(can_audit)
def audit_list(request: HtmxHttpRequest) -> HttpResponse:
    """Newest first; `?format=csv` downloads every row the filters keep."""
    form = AuditFilterForm(request.GET, actions=_actions())
    rows = form.filter(AuditEvent.objects.all()) if form.is_valid() else None
    if rows is not None and request.GET.get("format") == "csv":
        return _csv(rows)
    return render_list(
        request,
        "audit/list.html",
        form=form,
        rows=rows,
        results_target=RESULTS_TARGET,
        extra={"time_zone": timezone.get_current_timezone_name()},
        prepare=annotate,
    )


def _actions() -> list[str]:
    return list(AuditEvent.objects.order_by("action").values_list("action", flat=True).distinct())


def _csv(rows) -> StreamingHttpResponse:
    """Streamed in chunks, so a long log is never held in memory; formula-looking cells
    are quoted with a leading apostrophe so a spreadsheet shows them as text."""

    class Echo:
        def write(self, value: str) -> str:
            return value

    writer = csv.writer(Echo())

    def lines():
        yield writer.writerow(CSV_COLUMNS)
        for event in rows.iterator(chunk_size=CSV_CHUNK):
            yield writer.writerow(
                [
                    _cell(value)
                    for value in (
                        timezone.localtime(event.created_at).isoformat(),
                        event.actor,
                        event.actor_kind,
                        event.action,
                        event.target_type,
                        event.target_id,
                        event.target,
                        event.summary,
                        event.ip or "",
                    )
                ]
            )

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    stamp = timezone.localtime().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.csv"'
    return response


def _cell(value: str) -> str:
    # CSV injection: =, +, -, @ (and tab/CR) start a formula in spreadsheets.
    return f"'{value}" if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def annotate(events) -> list[AuditEvent]:
    """The page's events with `target_label` and `target_url` set, one query per model."""
    events = list(events)
    attach_targets(events)
    for event in events:
        event.label = target_label(event)
        event.url = target_url(event)
    return events
