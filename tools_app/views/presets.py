"""A tool's presets for its user-only inputs (admins) and its response samples
(developers): keeping a run's response, or pasting a documented one (docs/http-tools.md, "Samples").
State changes go through tools_app.catalog.presets and tools_app.catalog.versions."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from tools_app.audit import Actor
from tools_app.catalog import presets
from tools_app.catalog.versions import InvalidTool, VersionConflict, add_sample
from tools_app.forms.presets import (
    ClearPresetForm,
    DocumentedSampleForm,
    PresetForm,
    PresetTestRunsForm,
)
from tools_app.http_tools.checks import read_samples
from tools_app.models import Run, Tool, ToolPreset, ToolVersion
from tools_app.models.runs import RunStatus
from tools_app.roles import ADMIN, DEVELOPER, role_required
from tools_app.runs import setup
from tools_app.views.tools import get_tool_or_404


def _latest(tool: Tool) -> ToolVersion:
    return get_object_or_404(ToolVersion, tool=tool, number=tool.latest_number)


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def tool_presets(request: HttpRequest, name: str) -> HttpResponse:
    tool = get_tool_or_404(name)
    manifest = setup.manifest_of(_latest(tool))
    inputs = presets.presettable(manifest)
    form = PresetForm(request.POST or None, inputs=inputs)
    if request.method == "POST" and form.is_valid():
        spec = inputs[form.cleaned_data["input"]]
        try:
            presets.set_preset(
                tool,
                spec,
                form.cleaned_data["typed"],
                sensitive=form.cleaned_data["sensitive"],
                actor=Actor.from_request(request),
            )
        except presets.PresetError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Preset for {spec.name} saved.")
            return redirect("tool_presets", name=tool.name)
    stored = {p.input: p for p in ToolPreset.objects.of(tool).select_related("set_by")}
    context = {
        "tool": tool,
        "rows": [(name, spec, stored.get(name)) for name, spec in inputs.items()],
        "form": form,
    }
    status = 400 if request.method == "POST" else 200
    return render(request, "tools/presets.html", context, status=status)


@require_POST
@role_required(ADMIN)
def tool_preset_clear(request: HttpRequest, name: str) -> HttpResponse:
    tool = get_tool_or_404(name)
    form = ClearPresetForm(request.POST)
    if form.is_valid() and presets.clear_preset(
        tool, form.cleaned_data["input"], actor=Actor.from_request(request)
    ):
        messages.success(request, f"Preset for {form.cleaned_data['input']} removed.")
    else:
        messages.error(request, "There was no such preset.")
    return redirect("tool_presets", name=tool.name)


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def tool_preset_test_runs(request: HttpRequest, name: str) -> HttpResponse:
    """Switch "allow test runs with sensitive presets" (tools_app/catalog/presets.py): GET asks
    (?allow=on to allow), the confirm page's POST acts."""
    tool = get_tool_or_404(name)
    back = reverse("tool_presets", args=[tool.name])
    if request.method == "GET":
        form = PresetTestRunsForm(request.GET)
        allow = form.is_valid() and form.cleaned_data["allow"]
        if allow:
            question = f"Allow test runs with the sensitive presets of {tool.name}?"
            detail = (
                "Runs of versions other than the published one (drafts, older versions), "
                "started by developers, receive its sensitive presets: code nobody has "
                "published yet can use them."
            )
            button = "Allow test runs"
        else:
            question = f"Stop test runs with the sensitive presets of {tool.name}?"
            detail = (
                "Runs of versions other than the published one receive its sensitive "
                "presets only when an admin starts them."
            )
            button = "Stop allowing test runs"
        context = {
            "question": question, "detail": detail, "button": button, "danger": allow,
            "next": back, "hidden": [("allow", "on")] if allow else [],
            "crumbs": [("Tools", reverse("tools")), (tool.name, reverse("tool", args=[tool.name])),
                       ("Presets", back)],
        }  # fmt: skip
        return render(request, "confirm.html", context)
    form = PresetTestRunsForm(request.POST)
    if not form.is_valid():  # a BooleanField(required=False) takes any value: unreachable
        messages.error(request, "The switch could not be read; nothing changed.")
        return redirect(back)
    allowed = form.cleaned_data["allow"]
    presets.set_allow_test_runs(tool, allowed, actor=Actor.from_request(request))
    if allowed:
        messages.success(
            request,
            "Test runs allowed: runs of other versions than the published one, started by "
            "developers, now receive the sensitive presets.",
        )
    else:
        messages.success(
            request,
            "Test runs stopped: only the published version and runs started by an admin "
            "receive the sensitive presets.",
        )
    return redirect(back)


@require_http_methods(["GET", "POST"])
@role_required(DEVELOPER)
def tool_samples(request: HttpRequest, name: str) -> HttpResponse:
    """The samples of the latest version, and a form to paste a documented response."""
    tool = get_tool_or_404(name)
    latest = _latest(tool)
    form = DocumentedSampleForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            saved = add_sample(
                tool,
                data["name"],
                source=data["source"],
                status=data["status"],
                body=data["body"],
                actor=Actor.from_request(request),
                base=latest.number,
            )
        except (InvalidTool, VersionConflict, ValueError) as exc:
            form.add_error(None, _why(exc))
        else:
            messages.success(
                request, f"Saved samples/{data['name']}.json as version {saved.version.number}."
            )
            return redirect("tool_samples", name=tool.name)
    samples, _problems = read_samples(latest.file_bytes(), "")
    context = {"tool": tool, "version": latest, "samples": samples, "form": form}
    status = 400 if request.method == "POST" else 200
    return render(request, "tools/samples.html", context, status=status)


def _why(exc: Exception) -> str:
    if isinstance(exc, InvalidTool):
        return "The sample cannot be saved: " + "; ".join(str(p) for p in exc.problems[:5])
    if isinstance(exc, VersionConflict):
        return f"Version {exc.latest.number} was saved meanwhile; reload the page and try again."
    return str(exc)


@require_POST
@role_required(DEVELOPER)
def run_save_sample(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """Keep a successful http run's (already redacted) response as a sample of its tool,
    in a new draft version, with the run id as its source."""
    run = get_object_or_404(Run.objects.select_related("tool"), pk=run_id)
    if not run.can_download(Actor.from_request(request)):
        # The response is the run's output: its starter's and admins' only, like artifacts.
        raise PermissionDenied("Only the person who started this run, or an admin, may.")
    if run.status != RunStatus.SUCCEEDED or not isinstance(run.response, dict):
        raise Http404("This run kept no response to save.")
    try:
        saved = add_sample(
            run.tool,
            f"run-{run.pk.hex[:12]}",
            source=str(run.pk),
            status=run.response.get("status", 200),
            body=run.response.get("body"),
            actor=Actor.from_request(request),
        )
    except (InvalidTool, VersionConflict, ValueError) as exc:
        messages.error(request, _why(exc))
        return redirect("run", run_id=run.pk)
    if saved.created:
        messages.success(
            request,
            f"Saved the response as samples/run-{run.pk.hex[:12]}.json in draft version "
            f"{saved.version.number} of {run.tool.name}.",
        )
    else:
        messages.info(request, "The latest version already holds this sample.")
    return redirect("tool_samples", name=run.tool.name)
