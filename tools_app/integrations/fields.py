"""The fields of an integration: its type's, or an admin's own for custom types
("ENV_NAME [secret] [required] [url|path]", one per line)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tools_app.integrations.errors import InvalidIntegration
from tools_app.integrations.types import FieldSpec, IntegrationType, integration_types
from tools_app.integrations.validation import MAX_FIELDS, env_problem
from tools_app.models import Integration

CUSTOM_FLAGS = ("secret", "required", "url", "path")


def parse_custom_fields(text: str) -> list[FieldSpec]:
    """Parse an admin's field list; raises InvalidIntegration naming the line."""
    specs: list[FieldSpec] = []
    errors: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        env, *flags = line.split()
        problem = env_problem(env)
        if problem:
            errors.append(f"line {number}: {problem}")
            continue
        unknown = [f for f in flags if f.lower() not in CUSTOM_FLAGS]
        if unknown:
            errors.append(
                f"line {number}: unknown flag {unknown[0]!r} (use: {', '.join(CUSTOM_FLAGS)})"
            )
            continue
        flags = [f.lower() for f in flags]
        kind = "url" if "url" in flags else "path" if "path" in flags else "string"
        if "secret" in flags and kind != "string":
            errors.append(f"line {number}: a secret field cannot be a url or path")
            continue
        if any(s.env == env for s in specs):
            errors.append(f"line {number}: {env} is listed twice")
            continue
        specs.append(
            FieldSpec(
                name=env.lower(),
                env=env,
                label=env,
                kind=kind,
                secret="secret" in flags,
                required="required" in flags,
            )
        )
    if len(specs) > MAX_FIELDS:
        errors.append(f"more than {MAX_FIELDS} fields")
    if not specs and not errors:
        errors.append("define at least one field, e.g. MY_API_TOKEN secret required")
    if errors:
        raise InvalidIntegration({"custom_fields": errors})
    return specs


def format_custom_fields(specs: Iterable[FieldSpec]) -> str:
    lines = []
    for s in specs:
        flags = [f for f in ("secret", "required") if getattr(s, f)]
        if s.kind != "string":
            flags.append(s.kind)
        lines.append(" ".join([s.env, *flags]))
    return "\n".join(lines)


def _spec_from_dict(d: Mapping[str, Any]) -> FieldSpec:
    return FieldSpec(
        name=str(d.get("name", "")),
        env=str(d.get("env", "")),
        label=str(d.get("label") or d.get("name", "")),
        kind=str(d.get("kind") or "string"),
        secret=bool(d.get("secret")),
        required=bool(d.get("required")),
    )


def fields_of(integration: Integration) -> tuple[FieldSpec, ...]:
    """The field definitions of an integration: its type's, or its own for custom ones."""
    if integration.custom_fields:
        return tuple(_spec_from_dict(d) for d in integration.custom_fields)
    itype = integration_types().get(integration.type_slug)
    return itype.fields if itype is not None else ()


def type_of(integration: Integration) -> IntegrationType | None:
    return integration_types().get(integration.type_slug)
