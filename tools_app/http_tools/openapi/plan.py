"""Draft `kind: http` tools from an OpenAPI 3.0/3.1 document (docs/http-tools.md), for
`manage.py import_openapi` and the console's import page. No HTTP concerns here.

This is the front door: choosing operations, planning their drafts and importing them. The
document is read by document.py, its refs followed by refs.py, and each tool is built by
build.py. Anything that goes wrong with a chosen operation (a ref cycle, a relative or
templated server URL, a name clash, a tool that does not validate) refuses the whole
import: nothing is half-imported."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from tools_app.audit import Actor, record
from tools_app.catalog.versions import InvalidTool, save_version, validate
from tools_app.http_tools import spec as http_spec
from tools_app.http_tools.context import validation_context
from tools_app.http_tools.openapi.build import Builder, Draft, Operation, operations, snake
from tools_app.http_tools.openapi.document import OpenApiError, parse_document
from tools_app.http_tools.openapi.refs import Resolver
from tools_app.models import Tool
from tools_app.models.tools import VersionSource


@dataclass(frozen=True)
class Line:
    operation: str
    status: str  # created | skipped | invalid
    name: str = ""
    detail: str = ""
    warnings: tuple[str, ...] = ()  # of a created tool (Draft.warnings)

    def __str__(self) -> str:
        text = f"{self.operation}: {self.status}"
        if self.name:
            text += f" {self.name}"
        return text + (f" ({self.detail})" if self.detail else "")


class ImportRefused(Exception):
    """Nothing was imported; `lines` says what was wrong with each chosen operation."""

    def __init__(self, lines: list[Line], message: str = "") -> None:
        self.lines = lines
        bad = [line for line in lines if line.status == "invalid"]
        super().__init__(message or f"{len(bad)} operation(s) cannot be imported; nothing imported")


def tool_name(prefix: str, op: Operation) -> str:
    base = snake(op.key) if op.key != f"{op.method} {op.path}" else snake(f"{op.method} {op.path}")
    base = base or op.method.lower()
    name = f"{prefix}_{base}" if prefix and not prefix.endswith("_") else f"{prefix}{base}"
    if not name[0].isalpha():
        name = f"op_{name}"
    return name[:64].rstrip("_")


def check_prefix(prefix: str) -> str:
    if prefix and not re.fullmatch(r"[a-z][a-z0-9_]{0,30}", prefix):
        raise OpenApiError(
            f"prefix {prefix!r}: lowercase letters, digits and _, starting with a letter"
        )
    return prefix


def choose(document: dict[str, Any], chosen: Iterable[str] | None) -> list[Operation]:
    """The operations named in `chosen` (operationIds or "METHOD /path"), all when None."""
    ops = operations(document)
    if chosen is None:
        return ops
    wanted = list(dict.fromkeys(chosen))
    by_key = {op.key: op for op in ops}
    by_route = {f"{op.method} {op.path}": op for op in ops}
    missing = [w for w in wanted if w not in by_key and w not in by_route]
    if missing:
        raise OpenApiError(
            "no such operation: " + ", ".join(repr(m) for m in missing) + " (operationIds "
            "or 'METHOD /path')"
        )
    return [by_key.get(w) or by_route[w] for w in wanted]


def plan(
    document: dict[str, Any],
    chosen: Iterable[str] | None = None,
    *,
    prefix: str = "",
    origin: str = "openapi",
    server: str = "",
) -> list[Draft]:
    """A draft per chosen operation; raises ImportRefused when any cannot be imported."""
    check_prefix(prefix)
    if server and http_spec.url_shape_problem(server):
        raise OpenApiError(f"server URL {server!r}: {http_spec.url_shape_problem(server)}")
    ops = choose(document, chosen)
    if not ops:
        raise OpenApiError("the document has no operations to import")
    builder = Builder(document, Resolver(document), origin, server)
    context = validation_context()  # read once for every operation
    drafts: list[Draft] = []
    lines: list[Line] = []
    names: dict[str, str] = {}
    existing = set(
        Tool.objects.filter(name__in=[tool_name(prefix, op) for op in ops]).values_list(
            "name", flat=True
        )
    )
    for op in ops:
        name = tool_name(prefix, op)
        try:
            if name in names:
                raise OpenApiError(
                    f"its tool name {name!r} is also the name of {names[name]!r}: import them "
                    "separately with different --prefix values"
                )
            if name in existing:
                raise OpenApiError(
                    f"a tool named {name!r} exists already: choose a prefix (--prefix) or "
                    "leave this operation out"
                )
            names[name] = op.key
            draft = builder.build(op, name)
        except OpenApiError as exc:
            lines.append(Line(op.key, "invalid", name, str(exc)))
            continue
        except (AttributeError, TypeError, KeyError, IndexError, ValueError, RecursionError) as exc:
            # A part of the operation is not the shape OpenAPI gives it.
            detail = f"the operation is malformed ({type(exc).__name__}: {str(exc)[:120]})"
            lines.append(Line(op.key, "invalid", name, detail))
            continue
        if not draft.skipped:
            result = validate(name, draft.files, context)
            if result.errors:
                detail = "; ".join(f"{p.key}: {p.message}" for p in result.errors[:5])
                lines.append(Line(op.key, "invalid", name, detail))
                continue
            draft.warnings += [f"{p.key}: {p.message}" for p in result.warnings]
        drafts.append(draft)
        lines.append(Line(op.key, "skipped" if draft.skipped else "created", name, draft.skipped))
    if any(line.status == "invalid" for line in lines):
        raise ImportRefused(_refused(lines))
    return drafts


def _refused(lines: list[Line]) -> list[Line]:
    return [
        line
        if line.status == "invalid"
        else Line(
            line.operation,
            "skipped",
            line.name,
            "nothing is imported while another operation cannot be",
        )
        for line in lines
    ]


def describe(draft: Draft) -> str:
    if draft.skipped:
        return draft.skipped
    if not draft.outputs:
        return "no outputs: the response is undocumented" if draft.undocumented else "no outputs"
    return "outputs: " + ", ".join(draft.outputs)


def import_drafts(drafts: list[Draft], *, actor: Actor, origin: str) -> list[Line]:
    """Save every draft as a new tool's first version, all or none (one transaction)."""
    lines: list[Line] = []
    context = validation_context()
    with transaction.atomic():
        for draft in drafts:
            if draft.skipped:
                lines.append(Line(draft.operation.key, "skipped", draft.name, draft.skipped))
                continue
            if Tool.objects.filter(name=draft.name).exists():  # created since plan()
                raise ImportRefused(
                    [Line(draft.operation.key, "invalid", draft.name, "a tool of this name exists")]
                )
            try:
                save_version(
                    draft.name,
                    draft.files,
                    actor=actor,
                    source=VersionSource.IMPORT,
                    note=f"imported from OpenAPI {origin}: {draft.operation.key}",
                    context=context,
                )
            except InvalidTool as exc:  # plan() validated it; settings may have changed since
                line = Line(draft.operation.key, "invalid", draft.name, str(exc))
                raise ImportRefused([line]) from None
            lines.append(
                Line(
                    draft.operation.key,
                    "created",
                    draft.name,
                    describe(draft),
                    tuple(draft.warnings),
                )
            )
        record(
            actor,
            "tools.import_openapi",
            summary=f"OpenAPI import from {origin}: "
            + ", ".join(str(line) for line in lines)[:900],
            data={"origin": origin, "operations": [str(line) for line in lines]},
        )
    return lines


def import_document(
    data: bytes,
    chosen: Iterable[str] | None = None,
    *,
    actor: Actor,
    prefix: str = "",
    origin: str = "openapi",
    server: str = "",
) -> list[Line]:
    document = parse_document(data)
    drafts = plan(document, chosen, prefix=prefix, origin=origin, server=server)
    return import_drafts(drafts, actor=actor, origin=origin)
