"""The OpenAPI import page (tools/-/import-openapi/): read a document (upload or paste),
choose its operations, create draft kind: http tools. Every outcome goes through
tools_app/http_tools/openapi/plan.py, as the `import_openapi` command does; bad documents are
clear errors on the page (400), refused imports list why (422), never a 500."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from tools_app.audit import Actor
from tools_app.forms.openapi import (
    OpenApiChooseForm,
    OpenApiReadForm,
    decode_source,
    encode_source,
)
from tools_app.http_tools.openapi import build, plan
from tools_app.http_tools.openapi import document as openapi_document
from tools_app.http_tools.openapi.document import OpenApiError
from tools_app.http_tools.openapi.plan import ImportRefused
from tools_app.roles import DEVELOPER, role_required

TEMPLATE = "editor/openapi_import.html"


@dataclass
class Preview:
    """One operation as the choosing step shows it: what importing it would do."""

    key: str
    method: str
    path: str
    summary: str
    status: str  # created | skipped | invalid
    name: str
    detail: str
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "created"

    @property
    def outcome(self) -> str:
        """What importing it would do: nothing exists yet on this page."""
        return {"created": "becomes a draft", "skipped": "would be skipped"}.get(
            self.status, "cannot be imported"
        )


def _preview(document: dict[str, Any], prefix: str, server: str, origin: str) -> list[Preview]:
    rows = []
    for op in build.operations(document):
        warnings: tuple[str, ...] = ()
        try:
            draft = plan.plan(document, [op.key], prefix=prefix, server=server, origin=origin)[0]
            status = "skipped" if draft.skipped else "created"
            name, detail = draft.name, plan.describe(draft)
            warnings = tuple(draft.warnings)
        except ImportRefused as exc:
            line = exc.lines[0]
            status, name, detail = "invalid", line.name, line.detail
        except OpenApiError as exc:
            status, name, detail = "invalid", "", str(exc)
        rows.append(Preview(op.key, op.method, op.path, op.summary, status, name, detail, warnings))
    return rows


@require_http_methods(["GET", "POST"])
@role_required(DEVELOPER)
def openapi_import_page(request: HttpRequest) -> HttpResponse:
    if request.method == "POST" and "source" in request.POST:
        return _choose(request)
    form = OpenApiReadForm(request.POST or None, request.FILES or None)
    context: dict[str, Any] = {"form": form, "error": ""}
    if request.method != "POST":
        return render(request, TEMPLATE, context)
    if not form.is_valid():
        return render(request, TEMPLATE, context, status=400)
    prefix = form.cleaned_data.get("prefix") or ""
    server = form.cleaned_data.get("server") or ""
    try:
        data, origin = form.document_bytes()
        document = openapi_document.parse_document(data)
        preview = _preview(document, prefix, server, origin)
    except OpenApiError as exc:
        form.add_error(None, f"Refused, nothing imported: {exc}.")
        return render(request, TEMPLATE, context, status=400)
    choose = OpenApiChooseForm(
        initial={
            "source": encode_source(data),
            "origin": origin,
            "prefix": prefix,
            "server": server,
        }
    )
    context.update(choose=choose, preview=preview, origin=origin)
    return render(request, TEMPLATE, context)


def _choose(request: HttpRequest) -> HttpResponse:
    context: dict[str, Any] = {"form": OpenApiReadForm(), "error": ""}
    source = decode_source(request.POST.get("source", ""))
    try:
        if source is None:
            raise OpenApiError("the document sent back is damaged: read it again")
        document = openapi_document.parse_document(source)
        choices = [(op.key, op.key) for op in build.operations(document)]
    except OpenApiError as exc:
        context["error"] = f"Refused, nothing imported: {exc}."
        return render(request, TEMPLATE, context, status=400)
    form = OpenApiChooseForm(request.POST, choices=choices)
    if not form.is_valid():
        post = request.POST
        preview = _preview(document, post.get("prefix", ""), post.get("server", ""), "")
        context.update(choose=form, origin=post.get("origin", ""), preview=preview)
        return render(request, TEMPLATE, context, status=400)
    data = form.cleaned_data
    origin = data["origin"]
    try:
        drafts = plan.plan(
            document, data["operations"], prefix=data["prefix"], server=data["server"],
            origin=origin,
        )  # fmt: skip
        lines = plan.import_drafts(drafts, actor=Actor.from_request(request), origin=origin)
    except ImportRefused as exc:
        context.update(refused=exc.lines, origin=origin)
        return render(request, TEMPLATE, context, status=422)
    except OpenApiError as exc:
        context["error"] = f"Refused, nothing imported: {exc}."
        return render(request, TEMPLATE, context, status=400)
    context.update(lines=lines, origin=origin)
    return render(request, TEMPLATE, context)
