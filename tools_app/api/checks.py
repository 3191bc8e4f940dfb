"""Replaying a version's cases for CI (scope `tools:invoke`, docs/agent-api.md#cases).

Unlike invoke, a check may name a draft: CI checks a version before anyone publishes it.
Its runs are draft runs by the token (integrations, sensitive presets and sealed case
inputs withheld unless the tool or integration allows test runs). A check is visible only
to the token that started it: any other gets the same 404 as for no check at all."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import pydantic
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import Field, Query, Router, Schema
from ninja.decorators import decorate_view

from tools_app.api.auth import TokenAuth
from tools_app.api.common import approve_or_409
from tools_app.api.errors import ApiError, shown
from tools_app.api.limits import capped_body
from tools_app.api.schemas import ErrorOut
from tools_app.audit import Actor
from tools_app.cases.document import MAX_CASES, NAME_RE
from tools_app.lib import nesting
from tools_app.manifest.limits import MAX_VERSION
from tools_app.manifest.toolmd import NAME_RE as TOOL_NAME_RE
from tools_app.models import CaseCheck, Tool, ToolVersion
from tools_app.models.runs import RunVia
from tools_app.models.tokens import Scope
from tools_app.runs import replay

router = Router(tags=["cases"], auth=TokenAuth(Scope.TOOLS_INVOKE))

ERRORS: dict[int, Any] = {401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut, 422: ErrorOut}


class CheckIn(Schema):
    # Names of cases to run; none: all of them.
    cases: list[str] | None = Field(None, max_length=MAX_CASES)
    model_config = pydantic.ConfigDict(extra="forbid")
    # Seconds to wait for the result before answering (202 while still running).
    wait: float = Field(0, ge=0, allow_inf_nan=False)


class CheckOfCase(Schema):
    position: int
    name: str
    outcome: str
    run: str | None
    message: str
    checks: list[dict[str, Any]]


class CheckOut(Schema):
    id: str
    tool: str
    version: int
    status: str
    url: str
    total: int
    passed: int
    failed: int
    errored: int
    publish_requested: bool
    published: bool
    override_reason: str
    created_at: datetime
    finished_at: datetime | None
    cases: list[CheckOfCase]


def max_wait() -> float:
    return float(settings.CASES_PUBLISH_WAIT_SECONDS)


def _version(name: str, number: int) -> ToolVersion:
    # Checked before any query (as in api/common.py): no NUL byte or 10 kB name reaches SQL.
    if TOOL_NAME_RE.fullmatch(name) is None:
        raise ApiError(404, "unknown tool", f"{shown(name)} is not a valid tool name")
    tool = Tool.objects.filter(name=name, enabled=True).first()
    if tool is None:
        raise ApiError(404, "unknown tool", f"no enabled tool is named {shown(name)}")
    if not 1 <= number <= MAX_VERSION:
        raise ApiError(404, "unknown version", f"{tool.name} has no version {number}")
    version = tool.versions.select_related("tool").filter(number=number).first()
    if version is None:
        raise ApiError(404, "unknown version", f"{tool.name} has no version {number}")
    return version


def _answer(check: CaseCheck) -> JsonResponse:
    data = replay.check_json(check)
    status = 202 if data["status"] == "running" else 200
    response = JsonResponse(data, status=status)
    if status == 202:
        response["Location"] = data["url"]
    return response


def _body(request: HttpRequest) -> CheckIn:
    """The optional body: nothing at all is `{}`. Parsed here rather than by ninja, whose
    optional bodies turn `[1]` or `"x"` into a 500; errors are those of every endpoint
    (400 "Cannot parse request body", 422 "invalid request" naming each field)."""
    if request.content_type in ("multipart/form-data", "application/x-www-form-urlencoded"):
        # An empty form is no body (what `curl -X POST` or a test client sends); a filled
        # one is not what this endpoint reads.
        if request.POST or request.FILES:
            raise ApiError(422, "invalid request", ["the body must be JSON"])
        return CheckIn()
    if not request.body.strip():
        return CheckIn()
    try:
        data = nesting.loads(request.body, root="", level=0)
    except nesting.TooDeep as exc:
        raise ApiError(400, "Cannot parse request body", [str(exc)]) from None
    except ValueError:  # (json.JSONDecodeError, UnicodeDecodeError and a too long number)
        raise ApiError(400, "Cannot parse request body", None) from None
    if not isinstance(data, dict):
        raise ApiError(422, "invalid request", ["the body must be a JSON object"])
    try:
        return CheckIn(**data)
    except pydantic.ValidationError as exc:
        errors = [
            f"{'.'.join(str(part) for part in error['loc']) or 'body'}: {error['msg']}"
            for error in exc.errors(include_input=False, include_url=False)
        ]
        raise ApiError(422, "invalid request", errors) from None


@router.post(
    "/tools/{name}/versions/{number}/check",
    response={200: CheckOut, 202: CheckOut, 400: ErrorOut, 413: ErrorOut, **ERRORS},
    url_name="tool_version_check",
    summary="Replay a version's cases (cases.yaml)",
    openapi_extra={
        "requestBody": {
            "required": False,
            "content": {"application/json": {"schema": CheckIn.model_json_schema()}},
        }
    },
)
@decorate_view(capped_body)
def start_check(request: HttpRequest, name: str, number: int) -> HttpResponse:
    """Starts one run per case of version `number` (a draft too) and answers with the
    check: `202` while it runs (poll `GET /api/v1/checks/{id}`), `200` once every case has
    a result. The body is optional: `cases` picks cases by name (a 422 names unknown ones);
    `wait` (up to CONSOLE_CASES_PUBLISH_WAIT_SECONDS, 120 by default) waits that long."""
    body = _body(request)
    if body.wait > max_wait():
        raise ApiError(422, "invalid request", [f"wait: must be 0..{max_wait():g}"])
    if body.cases is not None:
        bad = [c for c in body.cases if NAME_RE.fullmatch(c) is None]
        if bad:
            raise ApiError(
                422, "invalid request", [f"cases: {shown(c)} is not a case name" for c in bad]
            )
    version = _version(name, number)
    # A pinned token runs only approved versions (a draft has no signature: never one).
    approve_or_409(request.auth, version.tool.name, version)
    actor = Actor.from_request(request, token=request.auth)
    try:
        check = replay.start_check(version, actor=actor, via=RunVia.API, names=body.cases)
    except replay.UnknownCases as exc:
        raise ApiError(422, "unknown cases", exc.names) from None
    if body.wait:
        check = replay.wait(check, body.wait)
    return _answer(check)


@router.get(
    "/checks/{check_id}",
    response={200: CheckOut, 202: CheckOut, **ERRORS},
    url_name="check",
    summary="A check's status and each case's result",
)
def check_status(request: HttpRequest, check_id: str, wait: float = Query(0, ge=0)) -> HttpResponse:
    """`200` once every case has a result, `202` while some still run. `wait=S` (up to
    CONSOLE_CASES_PUBLISH_WAIT_SECONDS) waits that long for the result."""
    if wait > max_wait():
        raise ApiError(422, "invalid request", [f"wait: must be 0..{max_wait():g}"])
    try:
        pk = uuid.UUID(check_id)
    except ValueError:
        raise ApiError(404, "unknown check", "not a check id") from None
    check = (
        CaseCheck.objects.select_related("tool", "version")
        .defer("version__files", "version__toolmd", "version__manifest")
        .filter(pk=pk, token=request.auth)
        .first()
    )
    if check is None:
        raise ApiError(404, "unknown check", "no check with this id was started by this token")
    if check.status == "running":
        check = replay.wait(check, wait) if wait else replay.refresh(check)
    return _answer(check)
