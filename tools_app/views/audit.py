"""The audit page (admins and auditors): the append-only log, filtered by who, action,
target and date, with each target named and linked, and the same rows as CSV."""

from __future__ import annotations

import csv

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters, sensitive_variables
from django.views.decorators.http import require_http_methods, require_safe

from tools_app.audit import Actor, record
from tools_app.audit_targets import attach_targets, target_label, target_url
from tools_app.forms.audit import AuditFilterForm, SecretFindForm
from tools_app.integrations import ledger
from tools_app.models import AuditEvent
from tools_app.roles import ADMIN, allowed_if, can_audit, role_required
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


@never_cache
@sensitive_post_parameters("value")
@sensitive_variables("value")
@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def secret_find(request: HttpRequest) -> HttpResponse:
    """Find by value (admins): every run the secret-usage ledger says received a pasted
    value, by its fingerprint. Nothing is stored; the audit event says who searched and
    how many rows matched, never the value or its fingerprint."""
    form = SecretFindForm(request.POST if request.method == "POST" else None)
    rows = None
    if form.is_valid():
        value = form.cleaned_data["value"]
        rows = ledger.find_by_value(value)
        del value
        record(
            Actor.from_request(request),
            "ledger.find",
            summary=f"searched the secret-usage ledger by value: {len(rows)} use(s) found",
            data={"matches": len(rows), "runs": len({row.run_id for row in rows})},
        )
        form = SecretFindForm()  # the value is never rendered back
    status = 400 if request.method == "POST" and rows is None else 200
    return render(
        request,
        "audit/secret_find.html",
        {"form": form, "rows": rows, "time_zone": timezone.get_current_timezone_name()},
        status=status,
    )
