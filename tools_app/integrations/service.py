"""Create, update, enable/disable and delete integrations, each change validated the
same way, written in one transaction and audited with field names, never values; and
what pages show about fields (set or not, never a secret)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables

from tools_app.audit import Actor, record
from tools_app.integrations import oauth, vault
from tools_app.integrations.errors import (
    Conflict,
    InUse,
    InvalidIntegration,
    SecretsUnavailable,
    UnknownIntegration,
)
from tools_app.integrations.fields import fields_of, parse_custom_fields, type_of
from tools_app.integrations.types import FieldSpec, get_type
from tools_app.integrations.validation import (
    MAX_LABEL,
    _normalize_secret,
    secret_problem,
    slug_problem,
    value_problem,
)
from tools_app.models import Integration, IntegrationSecret, Tool


@dataclass
class _Plan:
    values: dict[str, str]
    set_secrets: dict[str, str]
    clear_secrets: set[str]
    changed: list[str] = field(default_factory=list)


@sensitive_variables()
def _plan(
    fields: tuple[FieldSpec, ...],
    *,
    current_values: Mapping[str, str],
    stored_secrets: set[str],
    values: Mapping[str, str],
    secrets: Mapping[str, str],
    clear: Iterable[str],
    errors: dict[str, list[str]],
) -> _Plan:
    by_name = {f.name: f for f in fields}
    known = ", ".join(by_name) or "none"
    new_values = {k: v for k, v in current_values.items() if k in by_name}
    set_secrets: dict[str, str] = {}
    clear_secrets: set[str] = set()
    for name, raw in values.items():
        spec = by_name.get(name)
        if spec is None:
            errors.setdefault(name, []).append(f"unknown field {name!r} (fields: {known})")
            continue
        if spec.secret:
            errors.setdefault(name, []).append(
                f"{name!r} is a secret field: it cannot be set as a plain value"
            )
            continue
        value = (raw or "").strip()
        if value:
            problem = value_problem(spec.kind, value)
            if problem:
                errors.setdefault(name, []).append(f"{spec.display} {problem}")
                continue
            new_values[name] = value
        else:
            new_values.pop(name, None)
    for name, raw in secrets.items():
        spec = by_name.get(name)
        if spec is None:
            errors.setdefault(name, []).append(f"unknown field {name!r} (fields: {known})")
            continue
        if not spec.secret:
            errors.setdefault(name, []).append(f"{name!r} is not a secret field")
            continue
        value = _normalize_secret(raw or "")
        if not value:
            continue  # empty keeps the stored secret
        problem = secret_problem(value)
        if problem:
            errors.setdefault(name, []).append(f"{spec.display} {problem}")
            continue
        set_secrets[name] = value
    for name in clear:
        spec = by_name.get(name)
        if spec is None:
            errors.setdefault(name, []).append(f"unknown field {name!r} (fields: {known})")
        elif name in set_secrets:
            errors.setdefault(name, []).append(
                f"{spec.display}: type a new value or clear it, not both"
            )
        elif spec.secret:
            if name in stored_secrets:
                clear_secrets.add(name)
        else:
            new_values.pop(name, None)
    after_secrets = (stored_secrets - clear_secrets) | set(set_secrets)
    for spec in fields:
        if not spec.required or errors.get(spec.name):
            continue
        present = spec.name in after_secrets if spec.secret else bool(new_values.get(spec.name))
        if not present and not spec.default:
            errors.setdefault(spec.name, []).append(f"{spec.display} is required")
    changed = sorted(
        {n for n in by_name if new_values.get(n) != current_values.get(n)}
        | set(set_secrets)
        | clear_secrets
    )
    return _Plan(new_values, set_secrets, clear_secrets, changed)


@sensitive_variables()
def _store_secrets(integration: Integration, plan: _Plan, user) -> None:
    now = timezone.now()
    for name, value in plan.set_secrets.items():
        try:
            token, kid = vault.encrypt(value)
        except vault.VaultError as exc:  # raised inside the transaction: nothing is saved
            raise SecretsUnavailable(f"Encryption keys: {exc}. Nothing was saved.") from None
        IntegrationSecret.objects.update_or_create(
            integration=integration,
            field=name,
            defaults={"ciphertext": token, "key_id": kid, "set_at": now, "set_by": user},
        )
    if plan.clear_secrets:
        integration.secrets.filter(field__in=plan.clear_secrets).delete()


def _summary(plan: _Plan, fields: tuple[FieldSpec, ...]) -> tuple[str, dict[str, Any]]:
    secret_names = {f.name for f in fields if f.secret}
    plain = [n for n in plan.changed if n not in secret_names]
    parts = []
    if plain:
        parts.append("changed " + ", ".join(plain))
    if plan.set_secrets:
        parts.append("set secret " + ", ".join(sorted(plan.set_secrets)))
    if plan.clear_secrets:
        parts.append("cleared secret " + ", ".join(sorted(plan.clear_secrets)))
    data = {
        "fields_changed": plain,
        "secrets_set": sorted(plan.set_secrets),
        "secrets_cleared": sorted(plan.clear_secrets),
    }
    return "; ".join(parts), data


# ----------------------------------------------------------------------------------------
# Create, update, enable/disable, delete


@sensitive_variables()
def create_integration(
    slug: str,
    type_slug: str,
    *,
    actor: Actor,
    label: str = "",
    values: Mapping[str, str] | None = None,
    secrets: Mapping[str, str] | None = None,
    custom_fields: list[FieldSpec] | str | None = None,
    enabled: bool = True,
) -> Integration:
    itype = get_type(type_slug)
    slug = (slug or type_slug).strip()
    errors: dict[str, list[str]] = {}
    if problem := slug_problem(slug):
        errors["slug"] = [problem]
    elif Integration.objects.filter(slug=slug).exists():
        errors["slug"] = [f"an integration with slug {slug!r} already exists"]
    label = (label or "").strip()
    if len(label) > MAX_LABEL:
        errors["label"] = [f"is longer than {MAX_LABEL} characters"]
    fields = itype.fields
    if itype.custom:
        fields = _custom_specs(custom_fields, errors)
    elif custom_fields:
        errors["custom_fields"] = [f"type {type_slug!r} has fixed fields"]
    plan = _plan(
        fields,
        current_values={},
        stored_secrets=set(),
        values=values or {},
        secrets=secrets or {},
        clear=(),
        errors=errors,
    )
    if errors:
        raise InvalidIntegration(errors)
    with transaction.atomic():
        integration = Integration.objects.create(
            slug=slug,
            type_slug=type_slug,
            label=label,
            enabled=enabled,
            values=plan.values,
            custom_fields=[f.as_dict() for f in fields] if itype.custom else [],
            updated_by=actor.user,
        )
        _store_secrets(integration, plan, actor.user)
        summary, data = _summary(plan, fields)
        record(
            actor,
            "integration.create",
            integration,
            summary=f"created {slug} ({type_slug})" + (f"; {summary}" if summary else ""),
            data={"type": type_slug, **data},
        )
    return integration


def _custom_specs(
    custom_fields: list[FieldSpec] | str | None, errors: dict
) -> tuple[FieldSpec, ...]:
    if isinstance(custom_fields, str):
        try:
            return tuple(parse_custom_fields(custom_fields))
        except InvalidIntegration as exc:
            errors.update(exc.errors)
            return ()
    if not custom_fields:
        errors["custom_fields"] = ["define at least one field, e.g. MY_API_TOKEN secret required"]
        return ()
    return tuple(custom_fields)


def get_integration(slug: str) -> Integration:
    integration = Integration.objects.filter(slug=slug).first()
    if integration is None:
        raise UnknownIntegration(f"no integration with slug {slug!r}")
    return integration


@sensitive_variables()
def update_integration(
    integration: Integration | str,
    *,
    actor: Actor,
    revision: int | None = None,
    label: str | None = None,
    values: Mapping[str, str] | None = None,
    secrets: Mapping[str, str] | None = None,
    clear: Iterable[str] = (),
    custom_fields: list[FieldSpec] | str | None = None,
    enabled: bool | None = None,
) -> Integration:
    """Apply a change. `values` lists non-secret fields to set ("" unsets); fields not
    named keep their values. Empty `secrets` entries keep the stored secret; `clear`
    removes. With `revision`, a save made since then raises Conflict and changes nothing."""
    slug = integration if isinstance(integration, str) else integration.slug
    with transaction.atomic():
        current = Integration.objects.select_for_update().filter(slug=slug).first()
        if current is None:
            raise UnknownIntegration(f"no integration with slug {slug!r}")
        if revision is not None and current.revision != revision:
            raise Conflict(current, revision)
        errors: dict[str, list[str]] = {}
        fields = fields_of(current)
        removed: list[str] = []
        if custom_fields is not None:
            if current.custom_fields or (type_of(current) and type_of(current).custom):
                fields = _custom_specs(custom_fields, errors)
                old = {f.name for f in fields_of(current)}
                removed = sorted(old - {f.name for f in fields})
            else:
                errors["custom_fields"] = [f"type {current.type_slug!r} has fixed fields"]
        elif not fields:
            errors["__all__"] = [
                f"integration type {current.type_slug!r} is not installed; its fields are unknown"
            ]
        new_label = current.label if label is None else label.strip()
        if len(new_label) > MAX_LABEL:
            errors["label"] = [f"is longer than {MAX_LABEL} characters"]
        stored = set(current.secrets.values_list("field", flat=True))
        names = {f.name for f in fields}
        plan = _plan(
            fields,
            current_values=current.values or {},
            stored_secrets=stored & names,
            values=values or {},
            secrets=secrets or {},
            clear=clear,
            errors=errors,
        )
        if errors:
            raise InvalidIntegration(errors)
        plan.clear_secrets |= stored - names  # secrets of fields that no longer exist
        changed_meta = []
        if new_label != current.label:
            changed_meta.append("label")
        if enabled is not None and enabled != current.enabled:
            changed_meta.append("enabled")
        new_custom = [f.as_dict() for f in fields] if current.custom_fields or custom_fields else []
        if custom_fields is not None and new_custom != current.custom_fields:
            changed_meta.append("custom_fields")
        if not plan.changed and not changed_meta and not plan.clear_secrets:
            return current
        current.label = new_label
        if enabled is not None:
            current.enabled = enabled
        current.values = plan.values
        current.custom_fields = new_custom if custom_fields is not None else current.custom_fields
        current.revision += 1
        current.updated_by = actor.user
        current.save()
        _store_secrets(current, plan, actor.user)
        summary, data = _summary(plan, fields)
        parts = [
            p
            for p in (", ".join(changed_meta) and "changed " + ", ".join(changed_meta), summary)
            if p
        ]
        if removed:
            parts.append("removed field " + ", ".join(removed))
        record(
            actor,
            "integration.update",
            current,
            summary="; ".join(parts),
            data={**data, "changed": changed_meta, "fields_removed": removed},
        )
    return current


def set_enabled(integration: Integration, enabled: bool, *, actor: Actor) -> Integration:
    return set_switch(
        integration,
        "enabled",
        enabled,
        actor=actor,
        action="integration.enable" if enabled else "integration.disable",
        summary=f"{'enabled' if enabled else 'disabled'} {integration.slug}",
    )


def set_switch(
    integration: Integration,
    field: str,
    value: bool,
    *,
    actor: Actor,
    action: str,
    summary: str,
    data: dict[str, Any] | None = None,
) -> Integration:
    """Set one on/off field of an integration under a row lock, a new revision, audited as
    `action`; nothing happens (no revision, no audit) when it already has that value."""
    with transaction.atomic():
        current = Integration.objects.select_for_update().get(pk=integration.pk)
        if getattr(current, field) == value:
            return current
        setattr(current, field, value)
        current.revision += 1
        current.updated_by = actor.user
        current.save(update_fields=[field, "revision", "updated_by", "updated_at"])
        record(actor, action, current, summary=summary, data=data)
    return current


def tools_using(slug: str) -> list[Tool]:
    """Tools whose latest or published version declares the integration."""
    tools = {
        t.pk: t for t in Tool.objects.using_integration(slug).select_related("published_version")
    }
    for tool in Tool.objects.filter(published_version__isnull=False).select_related(
        "published_version"
    ):
        if tool.pk not in tools and slug in (
            tool.published_version.manifest.get("integrations") or []
        ):
            tools[tool.pk] = tool
    return sorted(tools.values(), key=lambda t: t.name)


def published_tools_using(slug: str) -> list[Tool]:
    return [
        t
        for t in tools_using(slug)
        if t.enabled
        and t.published_version is not None
        and slug in (t.published_version.manifest.get("integrations") or [])
    ]


def delete_integration(integration: Integration, *, actor: Actor, confirm: bool = False) -> str:
    """Delete, refused (InUse) while published tools declare it unless confirmed. Returns
    what revoking an OAuth integration's tokens at the provider did, in words ("" else)."""
    in_use = published_tools_using(integration.slug)
    if in_use and not confirm:
        raise InUse(integration, in_use)
    revoked = oauth.revoke(integration, actor=actor) if oauth.spec_of(integration) else ""
    with transaction.atomic():
        slug, type_slug = integration.slug, integration.type_slug
        secrets = sorted(integration.secrets.values_list("field", flat=True))
        record(
            actor,
            "integration.delete",
            integration,
            summary=f"deleted {slug} ({type_slug})"
            + (f"; declared by {', '.join(t.name for t in in_use)}" if in_use else "")
            + (f"; {revoked}" if revoked else ""),
            data={
                "type": type_slug,
                "secrets_deleted": secrets,
                "tools": [t.name for t in in_use],
            },
        )
        integration.delete()
    return revoked


# ----------------------------------------------------------------------------------------
# What pages show: which fields are set, never values


@dataclass(frozen=True)
class FieldState:
    spec: FieldSpec
    is_set: bool
    value: str = ""  # non-secret fields only, for admins
    set_at: Any = None
    set_by: str = ""


def field_states(integration: Integration) -> list[FieldState]:
    secrets = {s.field: s for s in integration.secrets.select_related("set_by")}
    states = []
    for spec in fields_of(integration):
        if spec.secret:
            stored = secrets.get(spec.name)
            states.append(
                FieldState(
                    spec=spec,
                    is_set=stored is not None,
                    set_at=stored.set_at if stored else None,
                    set_by=(stored.set_by.get_username() if stored and stored.set_by else "")
                    if stored
                    else "",
                )
            )
        else:
            value = (integration.values or {}).get(spec.name, "")
            states.append(FieldState(spec=spec, is_set=bool(value), value=value))
    return states
