"""The runner's environment: the declared integrations' variables, the secrets to
redact, the preview pages show (variable names, never values), and the names the static
checks are told of (`integration_env`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from django.db import DatabaseError
from django.views.decorators.debug import sensitive_variables

from tools_app.integrations import oauth, vault
from tools_app.integrations.errors import IntegrationUnavailable
from tools_app.integrations.fields import fields_of
from tools_app.integrations.paths import bindable
from tools_app.integrations.types import integration_types
from tools_app.manifest.staticcheck import NO_INTEGRATIONS, IntegrationEnv
from tools_app.models import Integration, Tool


def secret_label(slug: str, field_name: str) -> str:
    """What a secret value is replaced with in everything stored or shown about a run."""
    return "{{" + f"{slug}.{field_name}" + "}}"


@dataclass(frozen=True)
class Delivered:
    """The secret values a run received of one integration, for the secret-usage ledger
    (tools_app/integrations/ledger.py), which keeps their fingerprints, never them."""

    slug: str
    integration_id: int
    fields: tuple[str, ...]
    key_ids: tuple[str, ...]  # the vault key each was sealed under, in the same order
    values: tuple[str, ...] = field(repr=False)


@sensitive_variables()
def environment_for(slugs: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
    """The variables for a tool that declares `slugs`, and its secrets for redaction.

    Returns (env, secrets): env maps variable name -> value for the declared integrations
    only; secrets maps label `{{slug.field}}` -> plaintext for every secret injected.
    Raises IntegrationUnavailable (a message the run shows) when an integration is
    missing, disabled, incomplete, collides with another, or a secret cannot be
    decrypted. Nothing is partially returned."""
    env, labels, _delivered = deliveries_for(slugs)
    return env, labels


@sensitive_variables()
def deliveries_for(
    slugs: Iterable[str],
) -> tuple[dict[str, str], dict[str, str], list[Delivered]]:
    """environment_for, and per integration that gave a run at least one secret value:
    which fields, under which vault keys (non-secret fields are not listed)."""
    env: dict[str, str] = {}
    owners: dict[str, str] = {}
    labels: dict[str, str] = {}
    delivered: list[Delivered] = []
    slugs = list(dict.fromkeys(slugs))
    found = {
        i.slug: i for i in Integration.objects.filter(slug__in=slugs).prefetch_related("secrets")
    }
    for slug in slugs:
        integration = found.get(slug)
        if integration is None:
            raise IntegrationUnavailable(
                f"integration {slug!r} is not configured: an admin must create it "
                "(Integrations > New) before this tool can run"
            )
        if not integration.enabled:
            raise IntegrationUnavailable(
                f"integration {slug!r} is disabled: an admin must enable it "
                "before this tool can run"
            )
        fields = fields_of(integration)
        if not fields:
            raise IntegrationUnavailable(
                f"integration {slug!r} has type {integration.type_slug!r}, which is not installed"
            )
        if (oauth_spec := oauth.spec_of(integration)) is not None:  # the access token only
            oauth_env, oauth_labels, kid = oauth.environment(integration, oauth_spec)
            for name in oauth_env:
                if name in owners:
                    raise IntegrationUnavailable(
                        f"integrations {owners[name]!r} and {slug!r} both set {name}"
                    )
                owners[name] = slug
            env |= oauth_env
            labels |= oauth_labels
            token = tuple(oauth_env.values())
            delivered.append(Delivered(slug, integration.pk, ("access_token",), (kid,), token))
            continue
        stored = {s.field: s for s in integration.secrets.all()}
        names: list[str] = []
        kids: list[str] = []
        values: list[str] = []
        for spec in fields:
            secret = stored.get(spec.name) if spec.secret else None
            if spec.secret:
                if secret is None:
                    value = ""
                else:
                    try:
                        value = vault.decrypt(secret.ciphertext, what=f"secret {slug}.{spec.name}")
                    except vault.VaultError as exc:
                        raise IntegrationUnavailable(str(exc)) from None
            else:
                value = (integration.values or {}).get(spec.name) or spec.default
            if not value:
                if spec.required:
                    raise IntegrationUnavailable(
                        f"integration {slug!r} lacks required field {spec.name!r} "
                        f"({spec.env}): an admin must set it"
                    )
                continue
            if spec.env in owners:
                raise IntegrationUnavailable(
                    f"integrations {owners[spec.env]!r} and {slug!r} both set {spec.env}"
                )
            owners[spec.env] = slug
            env[spec.env] = value
            if spec.secret:
                labels[secret_label(slug, spec.name)] = value
                names.append(spec.name)
                kids.append(secret.key_id if secret is not None else "")
                values.append(value)
        if names:
            delivered.append(
                Delivered(slug, integration.pk, tuple(names), tuple(kids), tuple(values))
            )
    return env, labels, delivered


@dataclass(frozen=True)
class PreviewVariable:
    env: str
    field: str
    secret: bool
    is_set: bool


@dataclass(frozen=True)
class PreviewItem:
    slug: str
    state: str  # ok | missing | disabled | incomplete | unknown_type
    message: str
    variables: tuple[PreviewVariable, ...] = ()
    integration: Integration | None = None


def env_preview(tool_or_slugs: Tool | Iterable[str]) -> list[PreviewItem]:
    """For each integration a tool declares: the variable names it would receive (never
    values) and whether anything stops the run."""
    if isinstance(tool_or_slugs, Tool):
        tool = tool_or_slugs
        version = tool.published_version
        slugs = (version.manifest.get("integrations") if version else None) or tool.integrations
    else:
        slugs = list(tool_or_slugs)
    found = {
        i.slug: i for i in Integration.objects.filter(slug__in=slugs).prefetch_related("secrets")
    }
    items = []
    for slug in dict.fromkeys(slugs):
        integration = found.get(slug)
        if integration is None:
            items.append(
                PreviewItem(slug, "missing", "not configured: the tool gets none of its variables")
            )
            continue
        fields = fields_of(integration)
        if not fields:
            items.append(
                PreviewItem(
                    slug,
                    "unknown_type",
                    f"type {integration.type_slug!r} is not installed",
                    (),
                    integration,
                )
            )
            continue
        if (health := oauth.health(integration)) is not None:
            spec = oauth.spec_of(integration)
            assert spec is not None
            connected = health.state != "not_connected"
            items.append(
                PreviewItem(
                    slug,
                    "disabled"
                    if not integration.enabled
                    else "ok"
                    if connected and health.state != "needs_reconnect"
                    else "incomplete",
                    "" if health.ok else f"{health.label}: {health.message}",
                    (PreviewVariable(spec.env, "access_token", True, connected),),
                    integration,
                )
            )
            continue
        stored = {s.field for s in integration.secrets.all()}
        variables = tuple(
            PreviewVariable(
                env=f.env,
                field=f.name,
                secret=f.secret,
                is_set=(f.name in stored)
                if f.secret
                else bool((integration.values or {}).get(f.name) or f.default),
            )
            for f in fields
        )
        missing = [
            v.env for v, f in zip(variables, fields, strict=True) if f.required and not v.is_set
        ]
        if not integration.enabled:
            state, message = "disabled", "disabled: runs that need it fail"
        elif missing:
            state, message = "incomplete", "required but not set: " + ", ".join(missing)
        else:
            state, message = "ok", ""
        items.append(PreviewItem(slug, state, message, variables, integration))
    return items


def readable_paths_for(slugs: Iterable[str], notices: list[str] | None = None) -> list[Path]:
    """Host paths a tool declaring `slugs` may read: the values of the declared, enabled
    integrations' `path` fields (e.g. the e-mail database). The runner binds them
    read-only into the sandbox, which otherwise sees only the tool's own folder. A value
    that is (or contains, or lies in) a protected path is left out with a notice."""
    notices = [] if notices is None else notices
    paths: list[Path] = []
    for integration in Integration.objects.enabled().filter(slug__in=list(slugs)):
        for spec in fields_of(integration):
            value = (integration.values or {}).get(spec.name) or spec.default
            if spec.kind == "path" and not spec.secret and value:
                source = f"integration {integration.slug!r} field {spec.name!r}:"
                paths += bindable([Path(value)], notices, source=source)
    return paths


def integration_env(slugs: Iterable[str]) -> IntegrationEnv:
    """What the static checks need to know of the integrations `slugs`: the environment
    variable names they provide, and the slugs whose variables are unknown (no integration
    with that slug in the console, and no integration type of that name in
    seed/integrations, which an integration's slug defaults to)."""
    slugs = list(dict.fromkeys(slugs))
    if not slugs:
        return NO_INTEGRATIONS
    types = integration_types()
    try:
        configured = {i.slug: i for i in Integration.objects.filter(slug__in=slugs)}
    except DatabaseError:  # tables not migrated yet (a check run before migrate)
        configured = {}
    provided: set[str] = set()
    unknown: list[str] = []
    for slug in slugs:
        integration = configured.get(slug)
        if integration is not None and (
            integration.custom_fields or integration.type_slug in types
        ):
            fields = fields_of(integration)
            itype = types.get(integration.type_slug)
        elif slug in types:
            itype = types[slug]
            fields = itype.fields
        else:
            unknown.append(slug)
            continue
        provided.update(field.env for field in fields if field.env)
        if itype is not None and itype.oauth is not None:  # the access token's variable
            provided.add(itype.oauth.env)
    return IntegrationEnv(frozenset(provided), tuple(unknown))
