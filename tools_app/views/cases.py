"""A tool's test cases in the browser: saving a finished run as a case, the Cases tab of a
version, a check's page (per case pass/fail, expected beside actual, accept the new output,
the publish gate and an admin's override).

State changes go through tools_app.runs.replay and tools_app.runs.gate, the same core as
the API and `test_tools`; views only turn requests into those calls."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.html import format_html
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from tools_app.audit import Actor
from tools_app.cases import document, propose
from tools_app.catalog.versions import InvalidTool, VersionConflict
from tools_app.forms.cases import AcceptForm, OverrideForm, SaveCaseForm, shown_yaml
from tools_app.manifest import limits as manifest_limits
from tools_app.models import CaseCheck, CaseRun, Run, Tool, ToolVersion
from tools_app.models.cases import CaseOutcome, CheckStatus
from tools_app.models.runs import RunVia
from tools_app.roles import ADMIN, DEVELOPER, VIEWER, has_role, role_required
from tools_app.runs import gate, replay, setup
from tools_app.runs.start import MASK
from tools_app.signing.keyring import SigningKeyMissing
from tools_app.views.htmx import HtmxHttpRequest
from tools_app.views.runs import POLL_INTERVAL, _run_or_404, can_read_output, shown_json
from tools_app.views.tools import get_tool_or_404, tool_header

SEALED_SHOWN = MASK


# --------------------------------------------------------------------------------------
# Save a finished run as a case


@require_http_methods(["GET", "POST"])
@role_required(DEVELOPER)
def run_save_case(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    run = _run_or_404(run_id)
    if not run.is_finished:
        raise Http404("Only a finished run can be saved as a case.")
    if not can_read_output(request, run):
        # The expectations are made of the run's output: its starter's and admins' only.
        raise PermissionDenied(
            "Only the person who started this run, or an admin, may save it as a case."
        )
    tool = run.tool
    latest = get_object_or_404(ToolVersion, tool=tool, number=tool.latest_number)
    manifest = setup.manifest_of(run.version)
    latest_cases = replay.cases_of_version(latest)
    sensitive = {
        name: (spec, name in run.params) for name, spec in manifest.inputs.items() if spec.sensitive
    }
    proposals = propose.propose(replay.outcome_of(run))
    kwargs = {
        "proposals": proposals,
        "existing": [case.name for case in latest_cases.cases],
        "sensitive": sensitive,
    }
    if request.method == "GET":
        initial = {"base": latest.number, "proposed": [str(i) for i in range(len(proposals))]}
        form = SaveCaseForm(initial=initial, **kwargs)
        return _save_case_page(request, run, form, latest)

    form = SaveCaseForm(request.POST, **kwargs)
    if form.is_valid():
        data = form.cleaned_data
        try:
            saved = replay.save_case_from_run(
                run,
                name=data["name"],
                description=data["description"],
                expect=data["expect"],
                sealed_values=data["sealed_values"],
                actor=Actor.from_request(request),
                base=data["base"],
            )
        except VersionConflict as conflict:
            who = f" by {conflict.latest.author.username}" if conflict.latest.author else ""
            form.add_error(
                None,
                f"Not saved: version {conflict.latest.number} of {tool.name} was saved{who} "
                f"after version {conflict.base}, which this page started from. Nothing you "
                "typed is lost: press Save as a case again to add the case to version "
                f"{conflict.latest.number}.",
            )
            # The next press saves on top of the newer version, deliberately.
            form.data = form.data.copy()
            form.data["base"] = str(conflict.latest.number)
        except InvalidTool as exc:
            for problem in exc.problems[:10]:
                form.add_error(None, f"Not saved: {problem}")
        except ValueError as exc:  # a duplicate name saved meanwhile, a refused value
            form.add_error(None, f"Not saved: {exc}")
        else:
            version = saved.version
            messages.success(
                request,
                format_html(
                    'Saved case {} in draft version {} of {}. <a href="{}">Run all cases</a> '
                    "of that version from its Cases tab.",
                    data["name"],
                    version.number,
                    tool.name,
                    reverse("tool_cases", args=[tool.name, version.number]),
                ),
            )
            return redirect("tool_cases", name=tool.name, number=version.number)
    return _save_case_page(request, run, form, latest, status=400)


def _save_case_page(
    request: HttpRequest, run: Run, form: SaveCaseForm, latest: ToolVersion, status: int = 200
) -> HttpResponse:
    params = [
        (name, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
        for name, value in run.params.items()
    ]
    context = {
        "run": run,
        "latest": latest,
        "form": form,
        "params": params,
        "mask": MASK,
    }
    return render(request, "cases/save.html", context, status=status)


# --------------------------------------------------------------------------------------
# The Cases tab of a version


@dataclass(frozen=True)
class CaseRow:
    case: document.Case
    inputs: list[tuple[str, str]]
    expectations: list[str]
    last: CaseRun | None


@require_http_methods(["GET", "POST"])
@role_required(VIEWER)
def tool_cases(request: HttpRequest, name: str, number: int) -> HttpResponse:
    """GET: the version's cases and how each did in its latest check. POST ("Run all
    cases", developers): start a check as the person who asked, then watch it."""
    tool = get_tool_or_404(name)
    version = _version_or_404(tool, number)
    if request.method == "POST":
        if not has_role(request.user, DEVELOPER):
            raise PermissionDenied("Only developers and admins may run cases.")
        check = replay.start_check(version, actor=Actor.from_request(request), via=RunVia.BROWSER)
        if check.status == CheckStatus.EMPTY:
            messages.info(request, f"Version {version.number} has no cases: nothing to run.")
            return redirect("tool_cases", name=tool.name, number=version.number)
        return redirect("check", check_id=check.pk)

    context = tool_header(tool, version, "tool_cases")
    result = replay.cases_of_version(version)
    latest_check = CaseCheck.objects.filter(version=version).order_by("-created_at").first()
    last_runs = (
        {cr.name: cr for cr in latest_check.case_runs.all()} if latest_check is not None else {}
    )
    context |= {
        "rows": [_case_row(case, last_runs.get(case.name)) for case in result.cases],
        "case_problems": [str(p) for p in result.problems],
        "latest_check": latest_check,
        "cases_file": document.CASES_FILE,
    }
    return render(request, "cases/tab.html", context)


def _case_row(case: document.Case, last: CaseRun | None) -> CaseRow:
    inputs = [
        (key, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
        for key, value in case.inputs.items()
    ]
    # A sealed input's token is never shown: only that there is one.
    inputs += [(key, SEALED_SHOWN) for key in case.sealed]
    return CaseRow(case, inputs, [shown_yaml(e.to_yaml()) for e in case.expect], last)


# --------------------------------------------------------------------------------------
# A check's page


def _check_or_404(check_id: uuid.UUID) -> CaseCheck:
    return get_object_or_404(
        CaseCheck.objects.select_related("tool", "version", "user", "token", "override_by"),
        pk=check_id,
    )


def _may_read(request: HttpRequest, check: CaseCheck) -> bool:
    """What the tool returned in a check's runs follows the runs' rule (Run.can_download):
    the person who started the check and admins see it; others see the verdicts."""
    if has_role(request.user, ADMIN):
        return True
    return check.user_id is not None and check.user_id == request.user.pk


@dataclass(frozen=True)
class ShownCheck:
    kind: str
    verdict: str
    message: str
    expected: str
    actual: str
    diff: str
    line: int

    @property
    def compare(self) -> bool:
        """Expected beside actual, for an expectation that did not pass."""
        return self.verdict != "passed" and bool(self.expected or self.actual)


def _shown_checks(case_run: CaseRun) -> list[ShownCheck]:
    shown = []
    for item in case_run.checks or []:
        if not isinstance(item, dict):
            continue
        shown.append(
            ShownCheck(
                kind=str(item.get("kind", "")),
                verdict=str(item.get("verdict", "")),
                message=str(item.get("message", "")),
                expected=_shown_value(item.get("expected"), "expected"),
                actual=_shown_value(item.get("actual"), "actual"),
                diff=str(item.get("diff") or ""),
                line=item.get("line") or 0,
            )
        )
    return shown


def _shown_value(value: Any, root: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return shown_json(value, root, indent=2)


def check_context(request: HttpRequest, check: CaseCheck) -> dict:
    readable = _may_read(request, check)
    case_runs = list(check.case_runs.select_related("run").order_by("position"))
    finished = check.is_finished
    return {
        "check": check,
        "tool": check.tool,
        "version": check.version,
        "rows": [(cr, _shown_checks(cr) if readable else []) for cr in case_runs],
        "can_read": readable,
        "finished": finished,
        "poll_interval": POLL_INTERVAL,
        "latest_number": check.tool.latest_number,
        "can_accept": readable and has_role(request.user, DEVELOPER),
        "failing_outcomes": (CaseOutcome.FAILED, CaseOutcome.ERROR),
        "can_override": gate.can_override(check, request.user),
        "override_form": OverrideForm(),
        "version_published": check.tool.published_version_id == check.version_id,
    }


@require_safe
@role_required(VIEWER)
def check_detail(request: HttpRequest, check_id: uuid.UUID) -> HttpResponse:
    check = _check_or_404(check_id)
    if check.status == CheckStatus.RUNNING:
        # The worker refreshes a check after each case run; refreshing here too settles
        # one whose runs were reaped as lost with nobody left to report it.
        check = replay.refresh(check)
    return render(request, "cases/check.html", check_context(request, check))


@require_safe
@role_required(VIEWER)
def check_live(request: HtmxHttpRequest, check_id: uuid.UUID) -> HttpResponse:
    """The live part of a check's page again: polled while the check runs, then served
    without its polling trigger, so the page stops asking."""
    check = _check_or_404(check_id)
    if check.status == CheckStatus.RUNNING:
        check = replay.refresh(check)
    response = render(request, "cases/check.html#live", check_context(request, check))
    response["Cache-Control"] = "no-store"
    patch_vary_headers(response, ("HX-Request",))
    return response


@require_POST
@role_required(DEVELOPER)
def check_accept(request: HttpRequest, check_id: uuid.UUID, position: int) -> HttpResponse:
    """ "Accept the new output": the case's expectations take what its run gave, in a new
    draft version."""
    check = _check_or_404(check_id)
    case_run = get_object_or_404(
        CaseRun.objects.select_related("run"), case_check=check, position=position
    )
    if not _may_read(request, check):
        raise PermissionDenied(
            "Only the person who started this check, or an admin, may accept its output."
        )
    form = AcceptForm(request.POST)
    base = form.cleaned_data["base"] if form.is_valid() else None
    tool = check.tool
    try:
        saved = replay.accept_output(case_run, actor=Actor.from_request(request), base=base)
    except VersionConflict as conflict:
        messages.error(
            request,
            f"Not accepted: version {conflict.latest.number} of {tool.name} was saved after "
            f"version {conflict.base}, which this page showed. Look at it, then accept again.",
        )
    except (InvalidTool, ValueError, KeyError) as exc:
        messages.error(request, f"Not accepted: {_why(exc)}")
    else:
        version = saved.version
        messages.success(
            request,
            format_html(
                "Accepted the new output of case {}: saved as draft version {} of {}. "
                '<a href="{}">See its cases</a>.',
                case_run.name,
                version.number,
                tool.name,
                reverse("tool_cases", args=[tool.name, version.number]),
            ),
        )
    return redirect("check", check_id=check.pk)


@require_POST
@role_required(ADMIN)
def check_override(request: HttpRequest, check_id: uuid.UUID) -> HttpResponse:
    check = _check_or_404(check_id)
    form = OverrideForm(request.POST)
    if not form.is_valid():
        context = check_context(request, check)
        context["override_form"] = form
        return render(request, "cases/check.html", context, status=400)
    try:
        gate.override(check, actor=Actor.from_request(request), reason=form.cleaned_data["reason"])
    except (ValueError, InvalidTool, SigningKeyMissing) as exc:
        messages.error(request, f"Not published: {_why(exc)}")
    else:
        messages.success(
            request,
            f"Published version {check.version.number} of {check.tool.name} with failing "
            "cases; the version is marked so, with your reason.",
        )
    return redirect("check", check_id=check.pk)


def _why(exc: Exception) -> str:
    if isinstance(exc, InvalidTool):
        return "; ".join(str(p) for p in exc.problems[:5])
    if isinstance(exc, KeyError):
        return f"the case {exc.args[0] if exc.args else ''} is not in the latest version"
    return str(exc)


# --------------------------------------------------------------------------------------
# Helpers shared with the other tool pages


def _version_or_404(tool: Tool, number: int) -> ToolVersion:
    if not 1 <= number <= manifest_limits.MAX_VERSION:
        raise Http404("No such version.")
    return get_object_or_404(ToolVersion, tool=tool, number=number)
