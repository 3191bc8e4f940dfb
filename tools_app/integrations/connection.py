"""The connection test: a type's `test` request with the form's values."""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from django.views.decorators.debug import sensitive_variables

from tools_app.audit import Actor, record
from tools_app.egress import client, config
from tools_app.egress import policy as egress_policy
from tools_app.integrations import vault
from tools_app.integrations.environment import secret_label
from tools_app.integrations.types import IntegrationType, placeholders
from tools_app.integrations.validation import (
    EXCERPT_CHARS,
    TEST_TIMEOUT,
    _normalize_secret,
    secret_problem,
    value_problem,
)
from tools_app.models import Integration
from tools_app.runner.redact import Redactor


@dataclass(frozen=True)
class TestOutcome:
    ok: bool
    message: str
    status: int | None = None
    excerpt: str = ""
    elapsed_ms: int | None = None
    available: bool = True  # False: the type has no test


@sensitive_variables()
def redact(text: str, secrets: Mapping[str, str]) -> str:
    """Replace every secret (and its encodings: base64, hex, reversed, URL, JSON) with its
    label, the same way a run's output is redacted."""
    return Redactor(dict(secrets)).redact(text)


def _fill(
    template: str, values: Mapping[str, str], kinds: Mapping[str, str], *, in_url: bool
) -> str:
    out = []
    for literal, name, _spec, _conv in string.Formatter().parse(template):
        out.append(literal)
        if name is None:
            continue
        value = values.get(name, "")
        if kinds.get(name) == "url":
            value = value.rstrip("/")
        elif in_url:
            value = quote(value, safe="")
        out.append(value)
    return "".join(out)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


@sensitive_variables()
def connection_test(
    itype: IntegrationType,
    *,
    actor: Actor,
    values: Mapping[str, str],
    secrets: Mapping[str, str],
    clear: Iterable[str] = (),
    integration: Integration | None = None,
    slug: str = "",
    transport: Any = None,
) -> TestOutcome:
    """Run the type's `test` request with the form's values, before saving.

    A typed secret is used; an empty secret field uses the stored one, but stored secrets
    are only ever sent to the saved URL's origin (changing the URL requires typing the
    secret again, so a write-only secret cannot be redirected to another server)."""
    slug = (integration.slug if integration else slug) or itype.slug
    outcome = _connection_test(itype, values, secrets, set(clear), integration, slug, transport)
    if outcome.available:
        record(
            actor,
            "integration.test",
            integration,
            summary=f"tested {slug} ({itype.slug}): "
            + ("ok" if outcome.ok else f"HTTP {outcome.status}" if outcome.status else "failed"),
            data={"type": itype.slug, "slug": slug, "ok": outcome.ok, "status": outcome.status},
        )
    return outcome


@sensitive_variables()
def _connection_test(
    itype: IntegrationType,
    values: Mapping[str, str],
    typed: Mapping[str, str],
    clear: set[str],
    integration: Integration | None,
    slug: str,
    transport: Any,
) -> TestOutcome:
    test = itype.test
    if test is None:
        return TestOutcome(
            False, f"The {itype.label} type has no connection test.", available=False
        )
    fields = itype.fields
    kinds = {f.name: f.kind for f in fields}
    secret_names = {f.name for f in fields if f.secret}
    filled: dict[str, str] = {}
    labels: dict[str, str] = {}
    used_stored: list[str] = []
    problems: list[str] = []
    stored = {s.field: s for s in integration.secrets.all()} if integration else {}
    for spec in fields:
        if spec.secret:
            value = _normalize_secret(typed.get(spec.name) or "")
            if value:
                if problem := secret_problem(value):
                    problems.append(f"{spec.display} {problem}")
                    continue
            elif spec.name in stored and spec.name not in clear:
                try:
                    value = vault.decrypt(
                        stored[spec.name].ciphertext, what=f"secret {slug}.{spec.name}"
                    )
                except vault.VaultError as exc:
                    return TestOutcome(False, str(exc))
                used_stored.append(spec.name)
            if value:
                labels[secret_label(slug, spec.name)] = value
        else:
            value = (values.get(spec.name) or "").strip() or spec.default
            if value and (problem := value_problem(spec.kind, value)):
                problems.append(f"{spec.display} {problem}")
                continue
        filled[spec.name] = value
    if problems:
        return TestOutcome(False, "Not tested: " + "; ".join(problems))
    needed = placeholders(test.url) + [f.name for f in fields if f.required]
    empty = list(dict.fromkeys(n for n in needed if not filled.get(n)))
    if empty:
        names = ", ".join(itype.field(n).display if itype.field(n) else n for n in empty)
        return TestOutcome(False, f"Not tested: fill in {names} first.")
    url = _fill(test.url, filled, kinds, in_url=True)
    if used_stored and integration is not None:
        saved = {**{f.name: f.default for f in fields}, **(integration.values or {})}
        saved_url = _fill(
            test.url, {**filled, **{k: v for k, v in saved.items() if v}}, kinds, in_url=True
        )
        if _origin(url) != _origin(saved_url):
            names = ", ".join(used_stored)
            return TestOutcome(
                False,
                f"Not tested: the stored {names} is only sent to the saved address. "
                "Type the secret again to test it against a new address.",
            )
    headers = {}
    for name, template in test.headers:
        used = placeholders(template)
        if used and not all(filled.get(n) for n in used):
            continue  # an optional credential that is not set: send no header
        headers[name] = _fill(template, filled, kinds, in_url=False)
    body = _fill(test.body, filled, kinds, in_url=False) if test.body else None
    try:
        result = client.request(
            test.method,
            url,
            headers=headers,
            content=body,
            timeout=TEST_TIMEOUT,
            max_body=16 * 1024,
            secret_headers=[
                name
                for name, template in test.headers
                if any(p in secret_names for p in placeholders(template))
            ],
            transport=transport,
            policy=config.console_policy(integration),
        )
    except (client.HttpError, egress_policy.PolicyError) as exc:
        return TestOutcome(False, redact(f"Request failed: {exc}", labels))
    excerpt = " ".join(redact(result.text(), labels).split())
    if len(excerpt) > EXCERPT_CHARS:
        excerpt = excerpt[:EXCERPT_CHARS] + "…"
    ok = result.status in test.expect if test.expect else result.ok
    elapsed_ms = int(result.elapsed * 1000)
    if ok:
        message = f"Connection works: HTTP {result.status} {result.reason} in {elapsed_ms} ms."
    else:
        expected = ", ".join(map(str, test.expect)) if test.expect else "2xx"
        message = (
            f"The provider answered HTTP {result.status} {result.reason} (expected {expected})."
        )
    return TestOutcome(ok, redact(message, labels), result.status, excerpt, elapsed_ms)
