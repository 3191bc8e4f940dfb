"""Invoke, run status, cancel and artifacts (scope `tools:invoke`).

A run is visible only to the token that started it: any other token gets the same 404 as
for a run that does not exist, so run ids cannot be probed."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import connections
from django.db.models import Exists, OuterRef
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from ninja import Query, Router, Schema
from ninja.decorators import decorate_view

from tools_app.api.auth import TokenAuth
from tools_app.api.common import approve_or_409, visible_tool, visible_version
from tools_app.api.errors import ApiError
from tools_app.api.limits import MAX_PARAMS_BYTES, capped_body, params_size, too_large
from tools_app.api.schemas import ErrorOut
from tools_app.audit import Actor
from tools_app.manifest.limits import MAX_VERSION
from tools_app.models import Run, RunArtifact, RunUpdate
from tools_app.models.runs import FINISHED, RunVia
from tools_app.models.tokens import Scope
from tools_app.runs import artifacts as run_artifacts
from tools_app.runs import cancel, reaper, setup, start
from tools_app.views.runs import artifact_response

router = Router(tags=["runs"], auth=TokenAuth(Scope.TOOLS_INVOKE))

ERRORS: dict[int, Any] = {401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 422: ErrorOut}
INVOKE_ERRORS: dict[int, Any] = {**ERRORS, 409: ErrorOut, 413: ErrorOut}
# Long polling (GET /runs/{id}?wait=S): the longest wait, and how often the database is
# asked meanwhile: after FIRST seconds, then each pause GROWTH times the last, up to MAX.
MAX_WAIT = 30.0
# Each look costs the web server ~0.15 ms of CPU: with runs of ~0.1 s ending one after
# another, 8 looks per 80 ms wait instead of 15 (2 ms, x1.1) halve that cost, for ~5 ms
# more latency on average (bench/system_cpu.py, bench/invoke.py).
WAIT_POLL_FIRST = 0.004
WAIT_POLL_GROWTH = 1.2
WAIT_POLL_MAX = 0.1


class InvokeIn(Schema):
    # Any JSON value: validate_params names what is wrong with a non-object, all in one
    # 422 like every other params problem.
    params: Any = None
    version: int | None = None


class InvokeOut(Schema):
    run: str
    status: str
    url: str


class UpdateOut(Schema):
    seq: int
    at: datetime
    content: list[dict[str, Any]]
    # The update's count when the tool sent a valid one (MCP's progress/total).
    progress: float | None = None
    total: float | None = None


class ArtifactOut(Schema):
    name: str
    size: int
    url: str


class RunOut(Schema):
    id: str
    tool: str
    version: int
    status: str
    via: str
    params: dict[str, Any]
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration: float | None
    isolation: str
    # Whether the run started in a sandbox prepared before it (a warm start).
    spare: bool
    # The egress policy the run had (network: true), or why it had none.
    network_policy: str
    result: dict[str, Any] | None
    error: str
    notices: list[str]
    stderr_tail: str
    exit_code: int | None
    # The latest valid count the tool sent, whatever `after` is; total null: not known.
    progress: float | None
    total: float | None
    updates: list[UpdateOut]
    artifacts: list[ArtifactOut]


class CancelOut(Schema):
    run: str
    status: str
    cancel_requested: bool


@router.post(
    "/tools/{name}/invoke",
    response={202: InvokeOut, **INVOKE_ERRORS},
    url_name="tool_invoke",
    summary="Start a run of a published tool",
)
@decorate_view(capped_body)
def invoke(request: HttpRequest, name: str, body: InvokeIn) -> HttpResponse:
    """Validates `params` (at most 1 MiB of JSON, else a 413) against the tool's input
    schema (a 422 lists every problem), queues the run and answers at once with its id.
    Poll `GET /api/v1/runs/{id}`.
    `version` pins an older published version; the default is the published one. A
    pinned token gets a `409` `tool_not_approved` for a version it has no approval for."""
    tool = visible_tool(name)
    if body.version is not None:
        if not 1 <= body.version <= MAX_VERSION:
            raise ApiError(422, "invalid request", [f"version: must be 1..{MAX_VERSION}"])
        version = visible_version(tool, body.version)
    else:
        version = tool.published_version
    # A pinned token runs only what was approved for it: a changed tool is a 409.
    approve_or_409(request.auth, tool.name, version)
    params = {} if body.params is None else body.params
    # (NestingParser already refused params nested too deep for json.dumps to count.)
    size = params_size(setup.manifest_of(version), params)
    if size > MAX_PARAMS_BYTES:
        raise too_large("params", size, MAX_PARAMS_BYTES)
    try:
        run = start.start_run(
            version,
            params,
            actor=Actor.from_request(request, token=request.auth),
            via=RunVia.API,
        )
    except start.InvalidParams as exc:
        raise ApiError(422, "invalid params", exc.errors) from None
    url = reverse("api:run", kwargs={"run_id": str(run.pk)})
    response = JsonResponse({"run": str(run.pk), "status": run.status, "url": url}, status=202)
    response["Location"] = url
    return response


def _own_run(request: HttpRequest, run_id: str) -> Run:
    try:
        pk = uuid.UUID(run_id)
    except ValueError:
        raise ApiError(404, "unknown run", "not a run id") from None
    run = (
        Run.objects.select_related("tool", "version")
        .defer("sealed_params", "version__files", "version__toolmd", "version__manifest")
        .filter(pk=pk, token=request.auth)
        .first()
    )
    if run is None:
        raise ApiError(404, "unknown run", "no run with this id was started by this token")
    return reaper.reap_if_stale(run)


def _news_probe(run: Run, after: int) -> Callable[[], bool]:
    """A function answering: has the run ended, left its current status, or an update
    after `after`? One query, compiled here once: a long poll asks it up to ~40 times a
    second, and building it through the ORM each time cost 30 times its execution (most
    of the web server's CPU per run under load)."""
    query = (
        Run.objects.filter(pk=run.pk)
        .annotate(fresh=Exists(RunUpdate.objects.filter(run=OuterRef("pk"), seq__gt=after)))
        .values_list("status", "fresh")[:1]
    )
    sql, params = query.query.get_compiler(using=query.db).as_sql()
    status = run.status

    def news() -> bool:
        with connections[query.db].cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        return row is None or row[0] != status or row[0] in FINISHED or bool(row[1])

    return news


def _wait_for_news(news: Callable[[], bool], seconds: float) -> None:
    """Look after 4 ms, then less and less often, up to every WAIT_POLL_MAX: a run that
    ends within tens of milliseconds (a warm start) is answered within a fifth of that
    time at most, and a long wait costs ten cheap queries a second (about twenty in its
    first second)."""
    deadline = time.monotonic() + seconds
    pause = WAIT_POLL_FIRST
    while time.monotonic() + pause < deadline:
        time.sleep(pause)
        if news():
            return
        pause = min(pause * WAIT_POLL_GROWTH, WAIT_POLL_MAX)
    time.sleep(max(0.0, deadline - time.monotonic()))


@router.get(
    "/runs/{run_id}",
    response={200: RunOut, **ERRORS},
    url_name="run",
    summary="A run's status, progress updates, result and artifacts",
)
def run_status(
    request: HttpRequest,
    run_id: str,
    after: int = Query(0, ge=0, le=2**31 - 1),
    wait: float = Query(0, ge=0, le=MAX_WAIT),
) -> dict[str, Any]:
    """`after=N` returns only the updates with `seq` > N, for cheap polling. `wait=S`
    (up to 30 s) long-polls: the answer comes as soon as the run has ended, changed
    status or has an update after N, or after S seconds with no news."""
    run = _own_run(request, run_id)
    if wait and not run.is_finished:
        news = _news_probe(run, after)
        if not news():
            _wait_for_news(news, wait)
        run = _own_run(request, run_id)
    # Updates after the status, so a finished status comes with every update.
    updates = run.updates.filter(seq__gt=after).values_list(
        "seq", "created_at", "content", "progress", "total"
    )
    artifacts = run.artifacts.all() if run.is_finished else []
    return {
        "id": str(run.pk),
        "tool": run.tool.name,
        "version": run.version.number,
        "status": run.status,
        "via": run.via,
        "params": run.params,
        "cancel_requested": run.cancel_requested,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "duration": run.duration,
        "isolation": run.isolation,
        "spare": run.spare,
        "network_policy": run.network_policy,
        "result": run.result,
        "error": run.error,
        "notices": run.notices,
        "stderr_tail": run.stderr_tail,
        "exit_code": run.exit_code,
        "progress": run.progress,
        "total": run.progress_total,
        "updates": [
            {"seq": s, "at": at, "content": c, "progress": p, "total": t}
            for s, at, c, p, t in updates
        ],
        "artifacts": [
            {
                "name": a.name,
                "size": a.size,
                "url": reverse(
                    "api:run_artifact", kwargs={"run_id": str(run.pk), "artifact_id": a.pk}
                ),
            }
            for a in artifacts
        ],
    }


@router.post(
    "/runs/{run_id}/cancel",
    response={200: CancelOut, 409: ErrorOut, **ERRORS},
    url_name="run_cancel",
    summary="Cancel a run: at once when queued, within seconds when running",
)
def run_cancel(request: HttpRequest, run_id: str) -> dict[str, Any]:
    run = _own_run(request, run_id)
    if run.is_finished:
        raise ApiError(409, "run already ended", {"status": run.status})
    cancel.cancel_run(run, Actor.from_request(request, token=request.auth))
    return {"run": str(run.pk), "status": run.status, "cancel_requested": run.cancel_requested}


@router.get(
    "/runs/{run_id}/artifacts/{artifact_id}",
    response={200: None, **ERRORS},
    url_name="run_artifact",
    summary="Download one artifact of a run",
)
def run_artifact(request: HttpRequest, run_id: str, artifact_id: int) -> HttpResponse:
    run = _own_run(request, run_id)
    # _own_run already hides other tokens' runs (404); the model's rule is checked too, so
    # the page and the API cannot drift apart.
    if not run.can_download(Actor.from_request(request, token=request.auth)):
        raise ApiError(403, "forbidden", "only the run's own token may download its artifacts")
    artifact = RunArtifact.objects.filter(run=run, pk=artifact_id).first()
    content = run_artifacts.open_artifact(artifact) if artifact is not None else None
    if artifact is None or content is None:
        raise ApiError(404, "unknown artifact", None)
    return artifact_response(artifact, content)
