"""Changing tools in the browser: create, edit with live validation, versions, diff, roll
back, publish/unpublish/disable/enable, import and export.

Every state change goes through tools_app.catalog.versions (or importer, which uses it), so it is
validated, atomic and audited the same way as from commands and the API. Views only turn
requests into those calls and their outcomes into pages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from django.contrib import messages
from django.core.paginator import Paginator
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST, require_safe
from django_htmx.http import trigger_client_event

from tools_app.audit import Actor, record
from tools_app.catalog import bundle, diff, importer, presets, rendering, tool_templates
from tools_app.catalog.versions import (
    InvalidTool,
    VersionConflict,
    rollback,
    save_version,
    set_enabled,
    unpublish,
)
from tools_app.checks import check_version
from tools_app.forms.editor import (
    BaseVersionForm,
    DiffForm,
    ImportForm,
    NewToolForm,
    ToolEditForm,
    ToolFileFormSet,
    collect_files,
    initial_files,
)
from tools_app.forms.runs import RunForm
from tools_app.http_tools.context import validation_context
from tools_app.integrations.environment import integration_env
from tools_app.integrations.policy import secret_access
from tools_app.lib import strictyaml
from tools_app.manifest import limits as manifest_limits
from tools_app.manifest import staticcheck
from tools_app.manifest.folder import validate_files
from tools_app.models import Tool, ToolVersion
from tools_app.models.runs import RunVia
from tools_app.roles import ADMIN, DEVELOPER, VIEWER, has_role, role_required
from tools_app.runs import gate, replay, setup
from tools_app.signing.keyring import SigningKeyMissing
from tools_app.views.htmx import HtmxHttpRequest
from tools_app.views.runs import last_params, live_context, start_from_form
from tools_app.views.tools import get_tool_or_404, tool_header

FILES_PREFIX = "files"
# The run panel's inputs are posted with the editor's form: the prefix keeps a tool input
# named "note" or "base" apart from the editor's own fields (input names have no hyphen).
RUN_PREFIX = "run"
RUN_NOTE = "saved to run it from the editor"
VERSIONS_PER_PAGE = 50


# --- Create -------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@role_required(DEVELOPER)
def tool_new(request: HttpRequest) -> HttpResponse:
    """Create a tool from a language template as its first draft, then open the editor."""
    form = NewToolForm(request.POST or None, initial={"language": request.GET.get("language")})
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        files = tool_templates.render(
            data["language"], data["name"], data["label"], data["description"]
        )
        try:
            saved = save_version(
                data["name"],
                files,
                actor=Actor.from_request(request),
                note=f"created from the {data['language']} template",
                base=0,  # no version may exist yet: someone else creating it is a conflict
            )
        except VersionConflict:
            form.add_error(
                "name", f"A tool named {data['name']!r} was just created by someone else."
            )
        except (InvalidTool, ValueError) as exc:  # a label or description YAML refuses
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Created {saved.version.tool.name} as a draft (version 1).")
            return redirect("tool_edit", name=data["name"])
    status = 422 if form.is_bound else 200
    return render(request, "editor/new.html", {"form": form}, status=status)


# --- Edit ---------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@role_required(DEVELOPER)
def tool_edit(request: HttpRequest, name: str) -> HttpResponse:
    tool = get_tool_or_404(name)
    latest = _latest(tool)
    can_publish = has_role(request.user, ADMIN)
    if request.method == "POST":
        return _save(request, tool, latest, can_publish)

    form_initial, file_rows = initial_files(latest.file_bytes(), latest.entry)
    form = ToolEditForm(initial={**form_initial, "base": latest.number}, can_publish=can_publish)
    formset = ToolFileFormSet(initial=file_rows, prefix=FILES_PREFIX)
    # What was saved last: its static-check warnings (never blocking).
    problems = check_version(latest)
    return _editor(request, tool, latest, form, formset, problems)


def _save(request: HttpRequest, tool: Tool, latest: ToolVersion, can_publish: bool) -> HttpResponse:
    if "add_file" in request.POST:
        # Without JavaScript too: the same page again, with one more empty file.
        data = request.POST.copy()
        total = _int(data.get(f"{FILES_PREFIX}-TOTAL_FORMS"))
        data[f"{FILES_PREFIX}-TOTAL_FORMS"] = str(total + 1)
        form = ToolEditForm(data, can_publish=can_publish)
        formset = ToolFileFormSet(data, prefix=FILES_PREFIX)
        return _editor(request, tool, latest, form, formset, [], show_errors=False)

    form = ToolEditForm(request.POST, can_publish=can_publish)
    formset = ToolFileFormSet(request.POST, prefix=FILES_PREFIX)
    if not (form.is_valid() and formset.is_valid()):
        notes = _form_errors(form, formset)
        return _editor(request, tool, latest, form, formset, [], status=422, notes=notes)
    data = form.cleaned_data
    base = tool.versions.filter(number=data["base"]).first()
    try:
        files = collect_files(form, formset, base.file_bytes() if base else {})
        saved = save_version(
            tool.name,
            files,
            actor=Actor.from_request(request),
            note=data["note"],
            base=data["base"],
        )
    except VersionConflict as conflict:
        return _conflict(request, tool, conflict, form, formset, can_publish)
    except InvalidTool as exc:
        return _editor(request, tool, latest, form, formset, exc.problems, status=422)
    except bundle.BundleError as exc:
        form.add_error(None, str(exc))
        return _editor(request, tool, latest, form, formset, [], status=422, notes=[str(exc)])

    version = saved.version
    if not saved.created:
        messages.info(request, f"Nothing changed: version {version.number} is still the latest.")
    if data.get("publish") and version.pk != tool.published_version_id:
        # "Save and publish" goes through the publish gate: the cases run first.
        if saved.created:
            messages.success(request, f"Saved version {version.number}.")
        return _request_publish(request, version, reverse("tool_edit", args=[tool.name]))
    if saved.created:
        messages.success(request, f"Saved version {version.number}.")
    return redirect("tool_edit", name=tool.name)


def _editor(
    request: HttpRequest,
    tool: Tool,
    latest: ToolVersion,
    form: ToolEditForm,
    formset,
    problems: list[strictyaml.Problem],
    *,
    status: int = 200,
    show_errors: bool = True,
    notes: list[str] | None = None,
    panel: dict | None = None,
) -> HttpResponse:
    context = {
        "tool": tool,
        "latest": latest,
        "form": form,
        "formset": formset,
        "show_errors": show_errors,
        **_problems_context(tool, problems, notes),
        "run_url": _run_url(tool, latest.number),
        **(panel or _panel_context(request, latest)),
    }
    return render(request, "editor/edit.html", context, status=status)


# --- The run panel: save the draft, run exactly that version, watch it live -----------------


@require_POST
@role_required(DEVELOPER)
def tool_edit_run(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """ "Save and run" in the editor's run panel: what is in the editor is saved as a new
    draft version (or, unchanged, the latest version is taken as it is), then exactly that
    version runs with the panel's inputs, and the panel shows the run live.

    A run must be reproducible, so it always points at a saved version: unsaved text never
    runs. Who may: developers, as for the run page; the run is an ordinary browser run of
    a version that is not the published one, so integrations.policy and presets.for_run
    give it what any test run of a draft gets (nothing more). It never publishes (the
    Publish box belongs to Save version). Inputs that do not fit the saved version undo the
    save: nothing is saved, nothing runs, the panel says why. Someone's newer save is a
    conflict, as for Save version."""
    tool = get_tool_or_404(name)
    latest = _latest(tool)
    can_publish = has_role(request.user, ADMIN)
    form = ToolEditForm(request.POST, can_publish=can_publish)
    formset = ToolFileFormSet(request.POST, prefix=FILES_PREFIX)

    def refused(
        status: int,
        message: str,
        problems: Sequence[strictyaml.Problem] = (),
        notes: Sequence[str] = (),
    ) -> HttpResponse:
        panel = _panel_context(request, latest, message=message)
        if not request.htmx:
            return _editor(
                request, tool, latest, form, formset, list(problems), status=status,
                notes=list(notes), panel=panel,
            )  # fmt: skip
        context = {
            "tool": tool,
            "latest": latest,
            **panel,
            **_problems_context(tool, list(problems), list(notes)),
            "oob": True,
        }
        return render(request, "editor/edit.html#panel_refused", context, status=status)

    if not (form.is_valid() and formset.is_valid()):
        notes = _form_errors(form, formset)
        return refused(422, _not_saved(len(notes)), notes=notes)
    data = form.cleaned_data
    base = tool.versions.filter(number=data["base"]).first()
    try:
        with transaction.atomic():
            files = collect_files(form, formset, base.file_bytes() if base else {})
            saved = save_version(
                tool.name,
                files,
                actor=Actor.from_request(request),
                note=data["note"] or RUN_NOTE,
                base=data["base"],
            )
            version = saved.version
            panel = _panel_context(request, version, bound=True)
            run = start_from_form(request, version, panel["run_form"])
            if run is None:
                # The inputs do not fit: keep nothing of this click, the save included.
                transaction.set_rollback(True)
    except VersionConflict as conflict:
        if not request.htmx:
            return _conflict(request, tool, conflict, form, formset, can_publish)
        return refused(409, _conflict_message(conflict))
    except InvalidTool as exc:
        errors = sum(1 for p in exc.problems if p.severity == strictyaml.ERROR)
        return refused(422, _not_saved(errors), problems=exc.problems)
    except bundle.BundleError as exc:
        return refused(422, _not_saved(1), notes=[str(exc)])

    if run is None:
        panel["panel_message"] = (
            "Not saved and not run: the inputs below do not fit "
            f"{'the edited draft' if saved.created else f'version {version.number}'}."
        )
        if not request.htmx:
            return _editor(request, tool, latest, form, formset, [], status=400, panel=panel)
        context = {"tool": tool, "latest": latest, **panel}
        return render(request, "editor/edit.html#run_panel", context, status=400)

    if not request.htmx:  # without JavaScript: the run's own page shows it live
        return redirect("run", run_id=run.pk)
    context = {
        "tool": tool,
        "latest": version,
        "run_url": _run_url(tool, version.number),
        **panel,
        **live_context(request, run, []),
        "saved": saved,
        "oob": True,
    }
    response = render(request, "editor/edit.html#panel_ran", context)
    # static/js/unsaved.js: what was in the editor is saved now (typing since is not).
    trigger_client_event(response, "tool-saved", {"version": version.number})
    return response


def _panel_context(
    request: HttpRequest, version: ToolVersion, *, bound: bool = False, message: str = ""
) -> dict:
    """The run panel for `version`: its inputs as a form, what a run of it by this person
    receives of integrations and sensitive presets (the run's own decision), a message.

    Unbound, `version` is the latest one, and what the panel announces is for the draft
    that Save and run makes of it: while it is the published version, the decision is
    taken for its successor, which is not (it gets less, never more)."""
    if not bound:
        version = _next_draft(version)
    manifest = setup.manifest_of(version)
    preset_access = presets.access(version, manifest, user=request.user, via=RunVia.BROWSER)
    withheld = frozenset(w.name for w in preset_access.withheld)
    kwargs = {"manifest": manifest, "preset": preset_access.filled, "withheld": withheld}
    if bound:
        run_form = RunForm(request.POST, request.FILES, prefix=RUN_PREFIX, **kwargs)
    else:
        last = last_params(version.tool, request.user)
        run_form = RunForm(last=last, prefix=RUN_PREFIX, **kwargs)
    run_form.use_required_attribute = False  # Save version must not wait for run inputs
    for field in run_form.fields.values():
        # The inputs belong to the editor's form, so Save and run posts the text with them
        # (also without JavaScript), while the panel sits outside it: the run's Cancel
        # form lives in the panel, and forms cannot nest.
        field.widget.attrs["form"] = "tool-form"
    return {
        "panel_version": version,
        "run_form": run_form,
        "run_access": secret_access(
            version, manifest.integrations, user=request.user, via=RunVia.BROWSER
        ),
        "run_preset_access": preset_access,
        "panel_message": message,
        "run": None,  # the run it started, with the run page's live context
    }


def _next_draft(latest: ToolVersion) -> ToolVersion:
    """`latest`, or while it is the published version, an unsaved stand-in for the next
    version (same content): a draft, so the secret policy treats it as one."""
    if latest.tool.published_version_id != latest.pk:
        return latest
    return ToolVersion(
        tool=latest.tool, number=latest.number + 1, manifest=latest.manifest, files=latest.files
    )


def _not_saved(errors: int) -> str:
    return (
        f"Not saved and not run: the editor has {errors} error{'s' if errors != 1 else ''} "
        "(see Problems). Fix them, then Save and run again."
    )


def _conflict_message(conflict: VersionConflict) -> str:
    latest = conflict.latest
    who = f" by {latest.author.username}" if latest.author else ""
    return (
        f"Not saved and not run: version {latest.number} was saved{who} after version "
        f"{conflict.base}, which this editor started from. Nothing you typed is lost: "
        "Save version shows both texts and a diff."
    )


@require_POST
@role_required(DEVELOPER)
def tool_validate(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """Live validation while typing: the problems partial for the text in the form.

    The same checks as saving and `validate_tools` (plus the static checks' warnings);
    nothing is stored."""
    tool = get_tool_or_404(name)
    form = ToolEditForm(request.POST)
    formset = ToolFileFormSet(request.POST, prefix=FILES_PREFIX)
    problems: list[strictyaml.Problem] = []
    notes: list[str] = []
    if form.is_valid() and formset.is_valid():
        base = tool.versions.filter(number=form.cleaned_data["base"]).first()
        try:
            files = collect_files(form, formset, base.file_bytes() if base else {})
        except bundle.BundleError as exc:
            notes.append(str(exc))
        else:
            problems = _all_problems(tool.name, files)
    else:
        notes = _form_errors(form, formset)
    context = {"tool": tool, **_problems_context(tool, problems, notes)}
    return render(request, "editor/edit.html#problems", context)


def _all_problems(name: str, files: Mapping[str, bytes]) -> list[strictyaml.Problem]:
    result = validate_files(files, f"{name}/TOOL.md", context=validation_context())
    problems = list(result.problems)
    if result.manifest is not None:
        env = integration_env(result.manifest.integrations)
        problems += staticcheck.check_tool(name, files, result.manifest, env=env)
    return problems


def _problems_context(
    tool: Tool, problems: list[strictyaml.Problem], notes: list[str] | None = None
) -> dict:
    prefix = f"{tool.name}/"
    rows = [
        {
            "file": p.path.removeprefix(prefix),
            "line": p.line,
            "key": p.key,
            "severity": p.severity,
            "message": str(p),
        }
        for p in problems
    ]
    errors = [row for row in rows if row["severity"] == strictyaml.ERROR]
    return {
        "problems": rows,
        "problem_errors": len(errors) + len(notes or []),
        "problem_warnings": len(rows) - len(errors),
        "problem_notes": notes or [],
    }


def _form_errors(form: ToolEditForm, formset) -> list[str]:
    notes = [
        f"{form.fields[key].label or key}: {' '.join(errs)}"
        for key, errs in form.errors.items()
        if key in form.fields
    ]
    notes += [str(e) for e in form.non_field_errors()]
    for index, errors in enumerate(formset.errors):
        for key, errs in errors.items():
            notes.append(f"file {index + 1} {key}: {' '.join(errs)}")
    notes += [str(e) for e in formset.non_form_errors()]
    return notes


def _conflict(
    request: HttpRequest,
    tool: Tool,
    conflict: VersionConflict,
    form: ToolEditForm,
    formset,
    can_publish: bool,
) -> HttpResponse:
    """Someone saved since this editor opened: show both texts and a diff, save nothing.

    The page carries the typed text in a form based on the newer version, so saving it is
    a deliberate second step, never an overwrite."""
    latest = conflict.latest
    base = tool.versions.filter(number=conflict.base).first()
    base_files = base.file_bytes() if base else {}
    try:
        mine = collect_files(form, formset, base_files)
    except bundle.BundleError:
        mine = {"TOOL.md": form.toolmd_bytes()}
    data = request.POST.copy()
    data["base"] = str(latest.number)
    retry_form = ToolEditForm(data, can_publish=can_publish)
    retry_formset = ToolFileFormSet(data, prefix=FILES_PREFIX)
    sections = diff.diff_files(latest.file_bytes(), mine)
    context = {
        "tool": tool,
        "latest": latest,
        "base_number": conflict.base,
        "newer": tool.versions.filter(number__gt=conflict.base or 0).select_related("author"),
        "form": retry_form,
        "formset": retry_formset,
        "show_errors": False,
        "sections": sections,
        "summary": diff.summary(sections),
        "theirs": _text_files(latest.file_bytes()),
        "highlight_css_version": rendering.pygments_css_hash(),
        **_problems_context(tool, []),
    }
    return render(request, "editor/conflict.html", context, status=409)


def _text_files(files: Mapping[str, bytes]) -> list[tuple[str, str | None]]:
    shown = []
    for path in sorted(files, key=lambda p: (p != "TOOL.md", p)):
        try:
            shown.append((path, files[path].decode("utf-8")))
        except UnicodeDecodeError:
            shown.append((path, None))
    return shown


# --- History, diff, roll back, download ---------------------------------------------------


@require_safe
@role_required(VIEWER)
def tool_versions(request: HttpRequest, name: str) -> HttpResponse:
    """The tool page's Versions tab: every version, with diff, roll back and publish."""
    tool = get_tool_or_404(name)
    versions = tool.versions.select_related("author").defer("files", "toolmd", "manifest")
    page = Paginator(versions.order_by("-number"), VERSIONS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    for version in page:
        version.state = tool.version_state(version)
        version.run_url = _run_url(tool, version.number)
    numbers = list(tool.versions.order_by("-number").values_list("number", flat=True))
    context = {
        **tool_header(tool, _latest(tool), "tool_versions"),
        "page": page,
        "numbers": numbers,
        "diff_a": numbers[1] if len(numbers) > 1 else tool.latest_number,
        "diff_b": tool.latest_number,
    }
    return render(request, "editor/versions.html", context)


@require_safe
@role_required(VIEWER)
def tool_diff(request: HttpRequest, name: str) -> HttpResponse:
    tool = get_tool_or_404(name)
    default_a = max(1, tool.latest_number - 1)
    form = DiffForm(
        {"a": request.GET.get("a") or default_a, "b": request.GET.get("b") or tool.latest_number}
    )
    numbers = list(tool.versions.order_by("-number").values_list("number", flat=True))
    if not form.is_valid():
        context = {
            "tool": tool,
            "form": form,
            "numbers": numbers,
            "highlight_css_version": rendering.pygments_css_hash(),
        }
        return render(request, "editor/diff.html", context, status=400)
    a = get_object_or_404(ToolVersion, tool=tool, number=form.cleaned_data["a"])
    b = get_object_or_404(ToolVersion, tool=tool, number=form.cleaned_data["b"])
    sections = diff.diff_files(a.file_bytes(), b.file_bytes())
    context = {
        "tool": tool,
        "form": form,
        "numbers": numbers,
        "a": a,
        "b": b,
        "sections": sections,
        "summary": diff.summary(sections),
        "highlight_css_version": rendering.pygments_css_hash(),
    }
    return render(request, "editor/diff.html", context)


@require_http_methods(["GET", "POST"])
@role_required(DEVELOPER)
def tool_rollback(request: HttpRequest, name: str, number: int) -> HttpResponse:
    tool = get_tool_or_404(name)
    target = _version_or_404(tool, number)
    form = BaseVersionForm(request.POST if request.method == "POST" else request.GET)
    base = form.cleaned_data["base"] if form.is_valid() else None
    if request.method == "GET":
        # The confirm page carries the latest version the person saw, so a save made
        # meanwhile is still a conflict when they confirm.
        return _confirm(
            request, tool, question=f"Roll {tool.name} back to version {number}?",
            button="Roll back",
            detail=f"Version {tool.latest_number + 1} is created with the content of version "
            f"{number}, as a draft: what agents get does not change until it is published.",
            hidden={"base": base} if base is not None else {},
            default_next=reverse("tool_versions", args=[tool.name]),
        )  # fmt: skip
    try:
        saved = rollback(tool, target.number, actor=Actor.from_request(request), base=base)
    except VersionConflict as exc:
        messages.error(
            request,
            f"Not rolled back: version {exc.latest.number} was saved meanwhile. "
            "Look at it first, then roll back again if you still want to.",
        )
    except InvalidTool as exc:  # stored under older, looser rules
        messages.error(request, f"Version {number} is not valid any more: {exc}")
    else:
        if saved.created:
            messages.success(
                request,
                f"Rolled back: version {saved.version.number} has the content of version {number}.",
            )
        else:
            messages.info(request, f"Version {number} has the same content as the latest version.")
    return _redirect_back(request, reverse("tool_versions", args=[tool.name]))


@require_safe
@role_required(VIEWER)
def tool_download(request: HttpRequest, name: str, number: int) -> HttpResponse:
    """A version as a zip of its folder, the format the import page and command read."""
    tool = get_tool_or_404(name)
    version = _version_or_404(tool, number)
    data = bundle.zip_bytes(tool.name, version.file_bytes())
    record(
        Actor.from_request(request),
        "tool.export",
        tool,
        f"{tool.name} v{version.number} downloaded as a zip",
        {"version": version.number, "sha256": version.sha256},
    )
    response = HttpResponse(data, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{tool.name}-v{version.number}.zip"'
    response["Cache-Control"] = "private, no-store"  # an audited download, every time
    return response


# --- Publish, unpublish, disable, enable (admins) -----------------------------------------


# A GET shows a confirm page (it works without JavaScript); only the POST from that page, or
# from any client that means it, acts. Roll back (above) works the same way.


def _confirm(
    request: HttpRequest, tool: Tool, *, question: str, button: str, danger: bool = False,
    detail: str = "", hidden: Mapping[str, object] | None = None, default_next: str = "",
) -> HttpResponse:  # fmt: skip
    back = (
        _safe_next(request.GET.get("next"), request)
        or default_next
        or reverse("tool", args=[tool.name])
    )
    context = {
        "tool": tool, "question": question, "button": button, "danger": danger,
        "detail": detail, "next": back, "hidden": sorted((hidden or {}).items()),
        "crumbs": [("Tools", reverse("tools")), (tool.name, reverse("tool", args=[tool.name]))],
    }  # fmt: skip
    return render(request, "confirm.html", context)


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def tool_publish(request: HttpRequest, name: str, number: int) -> HttpResponse:
    tool = get_tool_or_404(name)
    version = _version_or_404(tool, number)
    if request.method == "GET":
        current = tool.published_version
        detail = (
            f"Agents get version {current.number} now; they will get version {version.number}."
            if current
            else f"{tool.name} is not published yet: agents will get version {version.number}."
        )
        return _confirm(
            request, tool, question=f"Publish version {version.number} of {tool.name}?",
            button="Publish", detail=f"{detail} {publish_cases_note(version)}",
        )  # fmt: skip
    default = _safe_next(request.POST.get("next"), request) or reverse(
        "tool_versions", args=[tool.name]
    )
    return _request_publish(request, version, default)


def publish_cases_note(version: ToolVersion) -> str:
    """What the publish confirm says of the version's cases: the gate runs them first."""
    if not replay.has_cases(version):
        return (
            f"Version {version.number} has no cases: it is published at once, untested "
            "(save a run as a case to add one)."
        )
    result = replay.cases_of_version(version)
    if result.problems:
        return (
            f"The cases.yaml of version {version.number} has problems: its check reports "
            "them as an error, so it is not published until they are fixed."
        )
    count = len(result.cases)
    cases = f"{count} case{'s' if count != 1 else ''}"
    return (
        f"Version {version.number} has {cases}: they run first, and it is published only "
        "when every one passes."
    )


def _request_publish(request: HttpRequest, version: ToolVersion, back: str) -> HttpResponse:
    """Publish `version` through the gate: at once when it has no cases (back to `back`),
    else once its cases pass (to the check's page, which follows them)."""
    tool = version.tool
    try:
        asked = gate.request_publish(version, actor=Actor.from_request(request), via=RunVia.BROWSER)
    except InvalidTool as exc:
        problems = "; ".join(str(p) for p in exc.problems[:5])
        messages.error(request, f"Version {version.number} cannot be published: {problems}")
        return redirect(back)
    except SigningKeyMissing as exc:
        messages.error(request, f"Version {version.number} cannot be published: {exc}")
        return redirect(back)
    if asked.published:
        tool.refresh_from_db(fields=["enabled"])
        note = "" if tool.enabled else " The tool is disabled: enable it to serve it to agents."
        untested = (
            " This version has no cases: it was published untested." if asked.no_cases else ""
        )
        messages.success(request, f"Published version {version.number}.{untested}{note}")
        return redirect(back)
    messages.info(
        request,
        f"Running the cases of version {version.number}: it is published when every one passes.",
    )
    return redirect("check", check_id=asked.check.pk)


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def tool_unpublish(request: HttpRequest, name: str) -> HttpResponse:
    tool = get_tool_or_404(name)
    if request.method == "GET":
        return _confirm(
            request, tool, question=f"Unpublish {tool.name}?", button="Unpublish", danger=True,
            detail="Agents stop getting it; its versions stay and can be published again.",
        )  # fmt: skip
    if tool.published_version_id is None:
        messages.info(request, f"{tool.name} is not published.")
    else:
        unpublish(tool, actor=Actor.from_request(request))
        messages.success(request, f"Unpublished {tool.name}: agents no longer get it.")
    return _redirect_back(request, reverse("tool_versions", args=[tool.name]))


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def tool_disable(request: HttpRequest, name: str) -> HttpResponse:
    tool = get_tool_or_404(name)
    if request.method == "GET":
        return _confirm(
            request, tool, question=f"Disable {tool.name}?", button="Disable", danger=True,
            detail="It is removed from the registry and DATA_PATH/tools until enabled again.",
        )  # fmt: skip
    set_enabled(tool, False, actor=Actor.from_request(request))
    messages.success(request, f"Disabled {tool.name}: removed from the registry and DATA_PATH.")
    return _redirect_back(request, reverse("tool_versions", args=[tool.name]))


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def tool_enable(request: HttpRequest, name: str) -> HttpResponse:
    tool = get_tool_or_404(name)
    if request.method == "GET":
        serves = (
            f"Agents get version {tool.published_version.number} again"
            if tool.published_version
            else "It is not published: agents get nothing until a version is"
        )
        return _confirm(
            request, tool, question=f"Enable {tool.name}?", button="Enable",
            detail=f"{serves}; it is written back to DATA_PATH/tools.",
        )  # fmt: skip
    set_enabled(tool, True, actor=Actor.from_request(request))
    messages.success(request, f"Enabled {tool.name}.")
    return _redirect_back(request, reverse("tool_versions", args=[tool.name]))


# --- Import -------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@role_required(DEVELOPER)
def tool_import(request: HttpRequest) -> HttpResponse:
    can_publish = has_role(request.user, ADMIN)
    form = ImportForm(request.POST or None, request.FILES or None, can_publish=can_publish)
    context: dict = {"form": form}
    if request.method != "POST":
        return render(request, "editor/import.html", context)
    if not form.is_valid():
        return render(request, "editor/import.html", context, status=400)
    upload = form.cleaned_data["file"]
    publish = bool(form.cleaned_data.get("publish"))
    try:
        tools = importer.read_zip(upload)
        # Imported as drafts; publishing goes through the gate below, tool by tool.
        lines = importer.import_tools(tools, actor=Actor.from_request(request), origin=upload.name)
    except importer.ZipRefused as exc:
        form.add_error("file", f"Refused, nothing imported: {exc}.")
        return render(request, "editor/import.html", context, status=400)
    except importer.ImportRefused as exc:
        context["refused"] = exc.lines
        return render(request, "editor/import.html", context, status=422)
    context["lines"] = [
        _publish_imported(request, line) if publish else ImportedTool(line) for line in lines
    ]
    context["form"] = ImportForm(can_publish=can_publish)
    return render(request, "editor/import.html", context)


@dataclass(frozen=True)
class ImportedTool:
    """One line of the import's result, and what publishing it did."""

    line: importer.ImportLine
    published: bool = False
    no_cases: bool = False
    check_id: object = None  # the check that publishes it once its cases pass
    error: str = ""


def _publish_imported(request: HttpRequest, line: importer.ImportLine) -> ImportedTool:
    version = ToolVersion.objects.select_related("tool").get(
        tool__name=line.name, number=line.version
    )
    if version.pk == version.tool.published_version_id:
        return ImportedTool(line, published=True)
    try:
        asked = gate.request_publish(version, actor=Actor.from_request(request), via=RunVia.BROWSER)
    except InvalidTool as exc:
        return ImportedTool(line, error="; ".join(str(p) for p in exc.problems[:5]))
    except SigningKeyMissing as exc:
        return ImportedTool(line, error=str(exc))
    return ImportedTool(
        line,
        published=asked.published,
        no_cases=asked.no_cases,
        check_id=asked.check.pk if asked.check is not None else None,
    )


# --- Helpers ------------------------------------------------------------------------------


def _latest(tool: Tool) -> ToolVersion:
    return get_object_or_404(ToolVersion, tool=tool, number=tool.latest_number)


def _version_or_404(tool: Tool, number: int) -> ToolVersion:
    if not 1 <= number <= manifest_limits.MAX_VERSION:  # out of the column's range: no such version
        raise Http404("No such version.")
    return get_object_or_404(ToolVersion, tool=tool, number=number)


def _run_url(tool: Tool, number: int) -> str | None:
    """The runner's page for a version, once the runner's URLs exist."""
    try:
        return reverse("tool_run", args=[tool.name]) + f"?version={number}"
    except NoReverseMatch:
        return None


def _safe_next(target: str | None, request: HttpRequest) -> str:
    target = target or ""
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return ""
    return target


def _redirect_back(request: HttpRequest, default: str) -> HttpResponse:
    return redirect(_safe_next(request.POST.get("next"), request) or default)


def _int(value: str | None) -> int:
    try:
        return max(0, int(value or 0))
    except ValueError:
        return 0
