"""What an audit event acted on, named and linked as a person reads it: the audit page and
Django admin's audit log both show targets this way, looking each model up once per page."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import DataError, transaction
from django.db.models import Model
from django.urls import NoReverseMatch, reverse

from tools_app.models import AuditEvent

# How a target's console page is found, by model name; other registered models link to
# their admin change page.
CONSOLE_PAGES = {
    "tool": lambda tool: reverse("tool", args=[tool.name]),
    "toolversion": lambda v: reverse("tool", args=[v.tool.name]) + f"?version={v.number}",
    "run": lambda run: reverse("run", args=[run.pk]),
    "integration": lambda integration: reverse("integration", args=[integration.slug]),
}
# Rows the list may load per model: never the large or secret columns.
TARGET_QUERIES = {
    "toolversion": lambda qs: qs.select_related("tool").only("number", "tool__name"),
    "run": lambda qs: qs.select_related("tool").only("id", "tool__name"),
    "tool": lambda qs: qs.only("name"),
    "integration": lambda qs: qs.only("slug"),
}


def _audited_models() -> dict[str, type[Model]]:
    # AuditEvent.target_type is a model name (tools_app.audit.record); admin knows them all.
    return {model._meta.model_name: model for model in admin.site._registry}


def attach_targets(events) -> None:
    """Set `target_object` on each event: its target if it still exists, else None."""
    models = _audited_models()
    wanted: dict[str, set] = {}
    for event in events:
        event.target_object = None
        model = models.get(event.target_type)
        if model is None or not event.target_id:
            continue
        try:
            wanted.setdefault(event.target_type, set()).add(
                model._meta.pk.to_python(event.target_id)
            )
        except ValidationError:
            continue  # an id this model could never have: nothing to find
    found: dict[tuple[str, str], Model] = {}
    for name, ids in wanted.items():
        queryset = TARGET_QUERIES.get(name, lambda qs: qs)(
            models[name]._default_manager.filter(pk__in=ids)
        )
        try:
            # A savepoint: an id out of the column's range (PostgreSQL refuses it) must
            # leave the page and any surrounding transaction usable.
            with transaction.atomic(using=queryset.db):
                rows = list(queryset)
        except (DataError, OverflowError):
            continue
        for obj in rows:
            found[(name, str(obj.pk))] = obj
    for event in events:
        event.target_object = found.get((event.target_type, event.target_id))


def target_label(event: AuditEvent) -> str:
    """What the event acted on, as a person reads it ("Run of web_fetch · ef8da48f")."""
    obj = getattr(event, "target_object", None)
    if event.target_type == "run":
        short = event.target_id[:8]
        return f"Run of {obj.tool.name} · {short}" if obj is not None else f"Run · {short}"
    if event.target_type == "toolversion" and obj is not None:
        return f"{obj.tool.name} v{obj.number}"
    if obj is not None and event.target_type in ("tool", "integration"):
        return str(obj)
    return event.target


def target_url(event: AuditEvent) -> str:
    obj = getattr(event, "target_object", None)
    if obj is None:
        return ""
    if event.target_type in CONSOLE_PAGES:
        return CONSOLE_PAGES[event.target_type](obj)
    meta = obj._meta
    try:
        return reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])
    except NoReverseMatch:
        return ""
