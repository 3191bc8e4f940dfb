"""Test-invoking tools in the browser: the run form, the live run page, cancel,
artifacts and the run history."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import PurePosixPath
from typing import IO, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from tools_app.audit import Actor
from tools_app.catalog import presets
from tools_app.forms.runs import (
    RAW_MODE_FIELD,
    TOKEN_PREFIX,
    RawParamsForm,
    RunFilterForm,
    RunForm,
    focus_first_error,
    focus_first_field,
    raw_initial,
    raw_schema,
    undecodable_names,
)
from tools_app.integrations import oauth
from tools_app.integrations.policy import secret_access
from tools_app.lib import nesting
from tools_app.models import (
    AgentToken,
    Run,
    RunArtifact,
    RunUpdate,
    Tool,
    ToolVersion,
)
from tools_app.models.runs import RunStatus, RunVia
from tools_app.ops import health
from tools_app.roles import ADMIN, DEVELOPER, VIEWER, has_role, role_required
from tools_app.runs import artifacts as run_artifacts
from tools_app.runs import cancel, progress, reaper, setup, start
from tools_app.views.htmx import HtmxHttpRequest
from tools_app.views.lists import render_list
from tools_app.views.tools import get_tool_or_404, usable_integrations

RESULTS_TARGET = "run-results"
# How often the run page asks for news while the run is active.
POLL_INTERVAL = "500ms"
VERSION_PARAM_RE = re.compile(r"[0-9]{1,10}")
# Update numbers: at most max_updates per run, so nine digits are plenty.
SEQ_PARAM_RE = re.compile(r"[0-9]{1,9}")


# --------------------------------------------------------------------------------------
# The run form


@require_http_methods(["GET", "POST"])
@role_required(DEVELOPER)
def tool_run(request: HttpRequest, name: str) -> HttpResponse:
    """GET: the form generated from the version's inputs (the published version, or
    ?version=N, drafts included: this is where they are tried). POST: start the run and
    go to its page."""
    tool = get_tool_or_404(name)
    version = _version_to_run(request, tool)
    manifest = setup.manifest_of(version)
    again = _run_to_repeat(request, tool)
    last = again.params if again is not None else last_params(tool, request.user)
    if request.GET.get("defaults"):  # "Reset to defaults": the manifest's values only
        last = {}

    # What a run by this person gets of the presets: the same decision the run takes.
    preset_access = presets.access(version, manifest, user=request.user, via=RunVia.BROWSER)
    preset = preset_access.filled
    withheld = frozenset(w.name for w in preset_access.withheld)
    form = RunForm(manifest=manifest, last=last, preset=preset, withheld=withheld)
    raw = RawParamsForm(initial={"params": raw_initial(manifest, last)})
    json_mode = request.method == "POST" and RAW_MODE_FIELD in request.POST
    if request.method == "POST":
        bound: RunForm | RawParamsForm
        if json_mode:
            raw = bound = RawParamsForm(request.POST)
        else:
            form = bound = RunForm(
                request.POST, request.FILES, manifest=manifest, preset=preset, withheld=withheld
            )
        run = start_from_form(request, version, bound)
        if run is not None:
            return redirect("run", run_id=run.pk)
        focus_first_error(bound)
    else:
        focus_first_field(form)

    context = {
        "prefilled": bool(last),
        "usable_integrations": usable_integrations(),
        "tool": tool,
        "version": version,
        "manifest": manifest,
        "form": form,
        "raw": raw,
        "json_mode": json_mode,
        "raw_mode_field": RAW_MODE_FIELD,
        "params_schema": raw_schema(manifest, preset),
        "again": again,
        "access": secret_access(
            version, manifest.integrations, user=request.user, via=RunVia.BROWSER
        ),
        "preset_access": preset_access,
        # Connected, expiring, failing or to reconnect: before the run fails on it.
        "oauth_states": oauth.healths(manifest.integrations) if manifest.integrations else [],
    }
    return render(
        request, "runs/form.html", context, status=400 if request.method == "POST" else 200
    )


def start_from_form(
    request: HttpRequest, version: ToolVersion, form: RunForm | RawParamsForm
) -> Run | None:
    """Start the run the valid form describes; otherwise put the problems on the form."""
    if request.content_type == "application/x-www-form-urlencoded":
        form.refuse_undecodable(undecodable_names(request.body))
    if not form.is_valid():
        return None
    params = form.params() if isinstance(form, RunForm) else form.cleaned_data["params"]
    try:
        return start.start_run(
            version, params, actor=Actor.from_request(request), via=RunVia.BROWSER
        )
    except start.InvalidParams as exc:
        form.add_param_errors(exc.errors)
        return None


def _version_to_run(request: HttpRequest, tool: Tool) -> ToolVersion:
    raw = request.GET.get("version", "")
    if raw:
        if not VERSION_PARAM_RE.fullmatch(raw):
            raise Http404("No such version.")
        return get_object_or_404(ToolVersion, tool=tool, number=int(raw))
    if tool.published_version_id:
        return ToolVersion.objects.get(pk=tool.published_version_id)
    return get_object_or_404(ToolVersion, tool=tool, number=tool.latest_number)


def _run_to_repeat(request: HttpRequest, tool: Tool) -> Run | None:
    """?again=<run id>: "Run again with these inputs" (sensitive ones are typed again)."""
    raw = request.GET.get("again", "")
    if not raw:
        return None
    try:
        run_id = uuid.UUID(raw)
    except ValueError:
        raise Http404("No such run.") from None
    return get_object_or_404(Run.objects.only("id", "params", "tool_id"), pk=run_id, tool=tool)


def last_params(tool: Tool, user) -> dict:
    """The params of this person's latest run of this tool (masked ones are skipped by the
    form, so a secret is never pre-filled)."""
    params = (
        Run.objects.filter(tool=tool, user=user)
        .order_by("-created_at")
        .values_list("params", flat=True)
        .first()
    )
    return params or {}


# --------------------------------------------------------------------------------------
# The run page and its live part


def _run_or_404(run_id: uuid.UUID) -> Run:
    run = get_object_or_404(
        Run.objects.select_related("tool", "version", "user", "token").defer(
            "sealed_params", "response", "version__files", "version__toolmd"
        ),
        pk=run_id,
    )
    return reaper.reap_if_stale(run)


def seq_param(raw: str | None) -> int:
    """An update sequence number from the query or a form; garbage counts as 0 (the page
    then simply gets every update again)."""
    if raw is None or not SEQ_PARAM_RE.fullmatch(raw):
        return 0
    return int(raw)


def run_ending(run: Run) -> str:
    """Why a finished run ended the way it did, in one line: the exit code alone misleads
    (a tool that reports an error in its result exits 0; a run that never started has none)."""
    status, code = run.status, run.exit_code
    if status == RunStatus.SUCCEEDED:
        return f"Succeeded (exit code {code})." if code is not None else "Succeeded."
    if status == RunStatus.CANCELLED:
        return "Cancelled: the run was cancelled."
    if status == RunStatus.TIMED_OUT:
        return "Timed out: the tool ran past its time limit and was stopped."
    if status == RunStatus.LOST:
        return "Lost: " + (run.error or "the worker stopped answering.")
    if run.error:
        return f"Failed: {run.error}"
    if code is None:
        if run.result and run.result.get("isError"):
            return "Failed: the tool did not run to completion (the reason is above)."
        return "Failed: the tool did not run to completion."
    if code == 0:
        return "Failed: the tool reported an error in its result (it exited with code 0)."
    return f"Failed: the tool exited with code {code}."


def shown_json(value: Any, root: str, level: int = 1, indent: int | None = None) -> str:
    """`value` as JSON on the page; one nested past the cap (stored before it) is named
    instead: json.dumps recursed on it to a 500."""
    if (path := nesting.too_deep(value, root, level)) is not None:
        return f"(not shown: {nesting.TooDeep(path)})"
    return json.dumps(value, indent=indent, ensure_ascii=False)


def structured_json(result: Any) -> str:
    """A result's structuredContent as the page shows it beside the text; "" without one,
    or when the text is that JSON already (an http tool's outputs). Compared as values:
    PostgreSQL's jsonb keeps an object's keys in an order of its own."""
    if not isinstance(result, dict) or "structuredContent" not in result:
        return ""
    structured = result["structuredContent"]
    texts = [b.get("text") for b in result.get("content") or () if isinstance(b, dict)]
    if len(texts) == 1 and isinstance(texts[0], str):
        try:
            if nesting.loads(texts[0], root="text") == structured:
                return ""
        except ValueError:  # not JSON, a number too long, or nested too deep (TooDeep)
            pass
    return shown_json(structured, "structuredContent", indent=2)


def can_read_output(request: HttpRequest, run: Run) -> bool:
    """The tool's output (result, progress, stderr, an http tool's response) follows the
    artifacts' rule (Run.can_download): it is made of the same things, the starter's
    inputs and what the tool fetched with credentials. Viewers and other developers see
    that the run happened, its inputs (sensitive ones masked), status and notices."""
    return run.can_download(Actor(user=request.user))


def live_context(
    request: HttpRequest, run: Run, updates: list[RunUpdate], can_read: bool | None = None
) -> dict:
    last_seq = updates[-1].seq if updates else seq_param(request.GET.get("after"))
    if can_read is None:
        can_read = can_read_output(request, run)
    return {
        "run": run,
        "ending": run_ending(run) if run.is_finished else "",
        # Server-rendered; static/js/run-live.js counts on from data-elapsed-since.
        "elapsed": round((timezone.now() - run.started_at).total_seconds())
        if run.started_at and not run.is_finished
        else 0,
        "result_json": shown_json(run.result, "result", indent=2)
        if run.result and can_read
        else "",
        "structured_json": structured_json(run.result) if can_read else "",
        "updates": updates if can_read else [],
        # The bar near the status: the latest count the tool sent, when it said a total.
        "progress_bar": progress_bar(run) if can_read else None,
        "can_read_output": can_read,
        "last_seq": last_seq,
        "artifacts": list(run.artifacts.all()) if run.is_finished else [],
        "can_run": has_role(request.user, DEVELOPER),
        "can_download": can_read,
        "can_cancel": may_cancel(request.user, run),
        "can_save_sample": can_read and _can_save_sample(request, run),
        # Its inputs and output become a test case of its tool (views/cases.py).
        "can_save_case": can_read and run.is_finished and has_role(request.user, DEVELOPER),
        "poll_interval": POLL_INTERVAL,
        # A queued run says whether anyone will pick it up (one query).
        "worker_wait": health.worker_wait() if run.status == RunStatus.QUEUED else None,
        "worker_silent": worker_silence(run),
        "lost_after": int(settings.RUN_LOST_AFTER_SECONDS),
    }


def progress_bar(run: Run) -> dict | None:
    """What the run page's <progress> shows; None (no bar) until the tool sends a total."""
    counted = run.progress_info
    if counted is None or counted.total is None:
        return None
    return {
        # Attribute values exactly (a valid floating-point number, never localized).
        "value": repr(counted.progress),
        "max": repr(counted.total),
        "percent": counted.percent,
        "progress": progress.shown(counted.progress),
        "total": progress.shown(counted.total),
    }


def worker_silence(run: Run) -> int | None:
    """Seconds since a running run's worker last beat, once that is over two beats: the
    page says so at once instead of showing "running" until the run turns lost."""
    if run.status != RunStatus.RUNNING:
        return None
    beat = run.heartbeat_at or run.started_at
    if beat is None:
        return None
    silent = (timezone.now() - beat).total_seconds()
    return int(silent) if silent > 2 * float(settings.RUN_HEARTBEAT_SECONDS) else None


def _can_save_sample(request: HttpRequest, run: Run) -> bool:
    """A developer may keep a successful http run's response as a sample (views/presets)."""
    return (
        run.status == RunStatus.SUCCEEDED
        and run.version.manifest.get("kind") == "http"
        and has_role(request.user, DEVELOPER)
        and Run.objects.filter(pk=run.pk, response__isnull=False).exists()
    )


@require_safe
@role_required(VIEWER)
def run_detail(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    run = _run_or_404(run_id)
    readable = can_read_output(request, run)
    updates = list(run.updates.all()) if readable else []
    context = live_context(request, run, updates, readable)
    context["manifest"] = setup.manifest_of(run.version)
    # Shown the way agents send them: strings as they are, the rest as JSON (true, 3.5).
    context["params"] = [
        (name, value if isinstance(value, str) else shown_json(value, f"params.{name}", level=2))
        for name, value in run.params.items()
    ]
    return render(request, "runs/detail.html", context)


@require_safe
@role_required(VIEWER)
def run_updates(request: HtmxHttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """What changed since update ?after=N: the new updates (appended out of band) and the
    live part again. Once the run has ended the live part comes back without its polling
    trigger, so the page stops asking."""
    after = seq_param(request.GET.get("after"))
    run = _run_or_404(run_id)
    # The status was read first: if it says finished, every update is already stored.
    readable = can_read_output(request, run)
    updates = list(run.updates.filter(seq__gt=after)) if readable else []
    response = render(
        request, "runs/detail.html#poll", live_context(request, run, updates, readable)
    )
    response["Cache-Control"] = "no-store"
    patch_vary_headers(response, ("HX-Request",))
    return response


def may_cancel(user, run: Run) -> bool:
    """Developers cancel their own runs; admins any run, including those agent tokens or
    the system started (a token cancels its own runs through the API)."""
    if has_role(user, ADMIN):
        return True
    return has_role(user, DEVELOPER) and run.user_id is not None and run.user_id == user.pk


@require_POST
@role_required(DEVELOPER)
def run_cancel(request: HtmxHttpRequest, run_id: uuid.UUID) -> HttpResponse:
    run = _run_or_404(run_id)
    if not may_cancel(request.user, run):
        raise PermissionDenied("Only the person who started a run, or an admin, can cancel it.")
    cancel.cancel_run(run, Actor.from_request(request))
    if request.htmx:
        context = live_context(request, run, [])
        context["last_seq"] = seq_param(request.POST.get("after"))
        return render(request, "runs/detail.html#live", context)
    return redirect("run", run_id=run.pk)


@require_safe
@role_required(VIEWER)
def run_artifact(request: HttpRequest, run_id: uuid.UUID, artifact_id: int) -> FileResponse:
    artifact = get_object_or_404(
        RunArtifact.objects.select_related("run"), pk=artifact_id, run_id=run_id
    )
    if not artifact.run.can_download(Actor.from_request(request)):
        raise PermissionDenied(
            "Only the person who started this run, or an admin, may download its artifacts."
        )
    content = run_artifacts.open_artifact(artifact)
    if content is None:
        raise Http404("The artifact's file is gone.")
    return artifact_response(artifact, content)


def artifact_response(artifact: RunArtifact, content: IO[bytes]) -> FileResponse:
    """The bytes as a download, never rendered inline: a tool's output is untrusted, an
    HTML artifact must not run script in the console's origin. FileResponse closes
    `content`."""
    name = safe_filename(artifact.name)
    response = FileResponse(
        content,
        as_attachment=True,
        filename=name,
        content_type="application/octet-stream",
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    return response


def safe_filename(name: str) -> str:
    """The last part of an artifact's name, without control characters or quotes."""
    base = PurePosixPath(name.replace("\\", "/")).name
    cleaned = "".join(ch for ch in base if ch.isprintable() and ch not in '"\r\n;')
    return cleaned.strip(". ") or "artifact"


# --------------------------------------------------------------------------------------
# History


@require_safe
@role_required(VIEWER)
def run_list(request: HtmxHttpRequest) -> HttpResponse:
    """Every run, newest first, filtered by tool, status, person and how it was started."""
    # With every worker dead there is no periodic reaper either: the list reaps too, so it
    # never shows a dead run as running for long.
    reaper.reap_lost_runs()
    form = RunFilterForm(request.GET, tools=_tool_names(), people=_people())
    rows = None
    if form.is_valid():
        rows = form.filter(
            Run.objects.select_related("tool", "version", "user", "token").only(
                "id",
                "status",
                "via",
                "created_at",
                "started_at",
                "finished_at",
                "duration",
                "cancel_requested",
                "tool__name",
                "tool__label",
                "version__number",
                "user__username",
                "token__name",
            )
        ).order_by("-created_at", "-pk")
    return render_list(
        request, "runs/list.html", form=form, rows=rows, results_target=RESULTS_TARGET
    )


def _tool_names() -> list[str]:
    return list(Tool.objects.order_by("name").values_list("name", flat=True))


def _people() -> list[str]:
    """People and agent tokens that have started runs, for the filter's options (two
    queries). A token is offered as "token:NAME" (RunFilterForm.TOKEN_PREFIX)."""
    users = get_user_model().objects.filter(
        pk__in=Run.objects.filter(user__isnull=False).values("user_id")
    )
    tokens = AgentToken.objects.filter(
        pk__in=Run.objects.filter(token__isnull=False).values("token_id")
    )
    return [
        *users.order_by("username").values_list("username", flat=True),
        *(
            f"{TOKEN_PREFIX}{name}"
            for name in tokens.order_by("name").values_list("name", flat=True)
        ),
    ]


__all__ = [
    "run_artifact",
    "run_cancel",
    "run_detail",
    "run_list",
    "run_updates",
    "tool_run",
]
