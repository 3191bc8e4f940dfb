"""Integration pages. Admins manage; viewers and developers see names, types, which fields
are set and which tools use each integration, never values.

Secrets are write-only: no view renders one, POST parameters are marked sensitive for
Django's error reports, and responses are not cached."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters, sensitive_variables
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from tools_app.audit import Actor
from tools_app.forms.integrations import DeleteForm, IntegrationForm, TestRunsForm
from tools_app.integrations import oauth
from tools_app.integrations.connection import connection_test
from tools_app.integrations.environment import env_preview
from tools_app.integrations.errors import (
    Conflict,
    InUse,
    InvalidIntegration,
    SecretsUnavailable,
    UnknownIntegration,
    UnknownType,
)
from tools_app.integrations.fields import type_of
from tools_app.integrations.policy import set_allow_test_runs
from tools_app.integrations.service import (
    create_integration,
    delete_integration,
    field_states,
    published_tools_using,
    set_enabled,
    tools_using,
    update_integration,
)
from tools_app.integrations.types import IntegrationType, get_type, integration_types
from tools_app.integrations.validation import slug_problem
from tools_app.manifest.toolmd import NAME_RE
from tools_app.models import AuditEvent, Integration, SecretUse, Tool
from tools_app.roles import ADMIN, VIEWER, can_audit, has_role, role_required
from tools_app.views.htmx import HtmxHttpRequest


def _type_or_404(type_slug: str) -> IntegrationType:
    from django.http import Http404

    try:
        return get_type(type_slug)
    except UnknownType as exc:
        raise Http404(str(exc)) from None


def _type_for(integration: Integration) -> IntegrationType:
    """The integration's type; a stand-in when its type file is gone, so the page still
    shows (and lets admins delete) it."""
    itype = type_of(integration)
    if itype is not None:
        return itype
    return IntegrationType(
        slug=integration.type_slug,
        label=f"{integration.type_slug} (type not installed)",
        description="",
        custom=bool(integration.custom_fields),
    )


@require_GET
@role_required(VIEWER)
@never_cache
def integration_list(request: HtmxHttpRequest) -> HttpResponse:
    integrations = Integration.objects.prefetch_related("secrets").select_related("updated_by")
    types = integration_types()
    oauth_states = {e.integration.slug: e.health for e in oauth.healths()}
    rows = []
    for integration in integrations:
        rows.append(
            {
                "integration": integration,
                "type": types.get(integration.type_slug),
                "states": field_states(integration),
                "tools": tools_using(integration.slug),
                "oauth": oauth_states.get(integration.slug),
            }
        )
    return render(
        request,
        "integrations/list.html",
        {"rows": rows, "types": sorted(types.values(), key=lambda t: t.label.lower())},
    )


@require_GET
@role_required(ADMIN)
def integration_new(request: HtmxHttpRequest) -> HttpResponse:
    types = sorted(integration_types().values(), key=lambda t: t.label.lower())
    existing = set(Integration.objects.values_list("slug", flat=True))
    return render(request, "integrations/new.html", {"types": types, "existing": existing})


@sensitive_post_parameters()
@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
@never_cache
@sensitive_variables()
def integration_create(request: HtmxHttpRequest, type_slug: str) -> HttpResponse:
    itype = _type_or_404(type_slug)
    if request.method == "POST":
        form = IntegrationForm(request.POST, itype=itype)
        if "_refresh" not in request.POST and form.is_valid():
            try:
                integration = create_integration(
                    form.cleaned_data["slug"],
                    itype.slug,
                    actor=Actor.from_request(request),
                    label=form.cleaned_data["label"],
                    values=form.values(),
                    secrets=form.secrets(),
                    custom_fields=form.cleaned_data.get("custom_fields") if itype.custom else None,
                    enabled=form.cleaned_data["enabled"],
                )
            except InvalidIntegration as exc:
                form.add_domain_errors(exc.errors)
            except SecretsUnavailable as exc:
                form.add_error(None, str(exc))
                return _form_page(request, form, itype, None, status=503)
            else:
                messages.success(request, f"Integration {integration.slug} created.")
                return redirect("integration", slug=integration.slug)
        status = 200 if "_refresh" in request.POST else 400
    else:
        form = IntegrationForm(itype=itype, initial={"enabled": True})
        status = 200
    return _form_page(request, form, itype, None, status=status)


def _form_page(
    request: HtmxHttpRequest,
    form: IntegrationForm,
    itype: IntegrationType,
    integration: Integration | None,
    *,
    status: int,
) -> HttpResponse:
    test_url = (
        reverse("integration_test", args=[integration.slug])
        if integration is not None
        else reverse("integration_test_new", args=[itype.slug])
    )
    return render(
        request,
        "integrations/form.html",
        {
            "form": form,
            "itype": itype,
            "integration": integration,
            "test_url": test_url,
            "redirect_uri": oauth.redirect_uri(),
        },
        status=status,
    )


@require_GET
@role_required(VIEWER)
@never_cache
def integration_detail(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    integration = get_object_or_404(Integration.objects.select_related("updated_by"), slug=slug)
    tools = tools_using(slug)
    published = {t.pk for t in published_tools_using(slug)}
    events = AuditEvent.objects.filter(target_type="integration", target_id=str(integration.pk))[
        :10
    ]
    response = render(
        request,
        "integrations/detail.html",
        {
            "integration": integration,
            "itype": _type_for(integration),
            "states": field_states(integration),
            "tools": [{"tool": t, "published": t.pk in published} for t in tools],
            "events": events,
            # The secret-usage ledger's latest rows, for those who read the audit log.
            "uses": SecretUse.objects.filter(integration=slug)[:10]
            if can_audit(request.user)
            else None,
            "preview": env_preview([slug])[0],
            "oauth": oauth.health(integration),
            "redirect_uri": oauth.redirect_uri(),
        },
    )
    if origin := oauth.authorize_origin(integration):
        # Connect's form redirects to the provider: browsers hold redirects after a form
        # submission to form-action too, so the provider's origin is allowed on this page.
        response._csp_update = {"form-action": [origin]}  # type: ignore[attr-defined]
    return response


@sensitive_post_parameters()
@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
@never_cache
@sensitive_variables()
def integration_edit(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    integration = get_object_or_404(Integration, slug=slug)
    itype = _type_for(integration)
    status = 200
    if request.method == "POST":
        form = IntegrationForm(request.POST, itype=itype, integration=integration)
        if "_refresh" not in request.POST and form.is_valid():
            try:
                integration = update_integration(
                    integration,
                    actor=Actor.from_request(request),
                    revision=form.cleaned_data.get("revision"),
                    label=form.cleaned_data["label"],
                    values=form.values(),
                    secrets=form.secrets(),
                    clear=form.cleared(),
                    custom_fields=form.cleaned_data.get("custom_fields") if itype.custom else None,
                    enabled=form.cleaned_data["enabled"],
                )
            except Conflict as exc:
                form.add_error(None, str(exc))
                status = 409
            except InvalidIntegration as exc:
                form.add_domain_errors(exc.errors)
                status = 400
            except SecretsUnavailable as exc:
                form.add_error(None, str(exc))
                status = 503
            except UnknownIntegration as exc:
                messages.error(request, str(exc))
                return redirect("integrations")
            else:
                messages.success(request, f"Integration {integration.slug} saved.")
                return redirect("integration", slug=integration.slug)
        elif "_refresh" not in request.POST:
            status = 400
    else:
        form = IntegrationForm(itype=itype, integration=integration)
    return _form_page(request, form, itype, integration, status=status)


@sensitive_variables()
def _run_test(
    request: HtmxHttpRequest, itype: IntegrationType, integration: Integration | None
) -> HttpResponse:
    form = IntegrationForm(request.POST, itype=itype, integration=integration)
    values, secrets, cleared = form.raw_values()
    # The slug being typed only labels the test (audit, redaction): one that could never be
    # saved (a NUL byte, which PostgreSQL refuses in the audit log) gives way to the type's.
    slug = str(request.POST.get("slug", "")).strip()
    outcome = connection_test(
        itype,
        actor=Actor.from_request(request),
        values=values,
        secrets=secrets,
        clear=cleared,
        integration=integration,
        slug="" if slug_problem(slug) else slug,
    )
    template = "integrations/form.html#test-result" if request.htmx else "integrations/test.html"
    return render(
        request, template, {"outcome": outcome, "itype": itype, "integration": integration}
    )


@sensitive_post_parameters()
@require_POST
@role_required(ADMIN)
@never_cache
def integration_test(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    integration = get_object_or_404(Integration, slug=slug)
    return _run_test(request, _type_for(integration), integration)


@sensitive_post_parameters()
@require_POST
@role_required(ADMIN)
@never_cache
def integration_test_new(request: HtmxHttpRequest, type_slug: str) -> HttpResponse:
    return _run_test(request, _type_or_404(type_slug), None)


# Enable, disable and the test-runs switch change what runs receive: a GET shows a confirm
# page (it works without JavaScript), only a POST acts.


def _confirm(
    request: HtmxHttpRequest, integration: Integration, *, question: str, detail: str,
    button: str, danger: bool = False, hidden: dict[str, str] | None = None,
) -> HttpResponse:  # fmt: skip
    back = reverse("integration", args=[integration.slug])
    context = {
        "question": question, "detail": detail, "button": button, "danger": danger,
        "next": back, "hidden": sorted((hidden or {}).items()),
        "crumbs": [("Integrations", reverse("integrations")), (integration.slug, back)],
    }  # fmt: skip
    return render(request, "confirm.html", context)


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def integration_disable(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    integration = get_object_or_404(Integration, slug=slug)
    if request.method == "GET":
        users = [t.name for t in published_tools_using(slug)]
        detail = "Runs stop receiving its values until it is enabled again; nothing is deleted."
        if users:
            detail += f" Published tools that declare it fail: {', '.join(users)}."
        return _confirm(
            request, integration, question=f"Disable integration {slug}?", detail=detail,
            button="Disable", danger=True,
        )  # fmt: skip
    set_enabled(integration, False, actor=Actor.from_request(request))
    messages.success(
        request, f"Integration {slug} disabled: tools that need it fail until enabled."
    )
    return _back(request, slug)


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def integration_enable(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    integration = get_object_or_404(Integration, slug=slug)
    if request.method == "GET":
        return _confirm(
            request, integration, question=f"Enable integration {slug}?",
            detail="Runs of tools that declare it receive its values again.", button="Enable",
        )  # fmt: skip
    set_enabled(integration, True, actor=Actor.from_request(request))
    messages.success(request, f"Integration {slug} enabled.")
    return _back(request, slug)


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def integration_test_runs(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Switch "allow test runs": whether runs of draft versions started by developers
    receive this integration's values (tools_app/integrations/policy.py)."""
    integration = get_object_or_404(Integration, slug=slug)
    if request.method == "GET":
        form = TestRunsForm(request.GET)
        allow = form.is_valid() and form.cleaned_data["allow"]
        if allow:
            return _confirm(
                request, integration, question=f"Allow test runs with {slug}?",
                detail="Runs of draft versions, started by developers, receive its values "
                "(secrets included): code nobody has published yet can use them.",
                button="Allow test runs", danger=True, hidden={"allow": "on"},
            )  # fmt: skip
        return _confirm(
            request, integration, question=f"Stop test runs with {slug}?",
            detail="Runs of draft versions receive its values only when an admin starts them.",
            button="Stop allowing test runs",
        )  # fmt: skip
    form = TestRunsForm(request.POST)
    if not form.is_valid():  # a BooleanField(required=False) takes any value: unreachable
        messages.error(request, "The switch could not be read; nothing changed.")
        return _back(request, slug)
    allowed = form.cleaned_data["allow"]
    set_allow_test_runs(integration, allowed, actor=Actor.from_request(request))
    if allowed:
        messages.success(request, f"Test runs allowed: runs of draft versions now receive {slug}.")
    else:
        messages.success(
            request,
            f"Test runs stopped: runs of draft versions receive {slug} only when an admin "
            "starts them.",
        )
    return _back(request, slug)


def _back(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    target = reverse("integration", args=[slug])
    if request.POST.get("next") == "list":
        target = reverse("integrations")
    # Only the plain confirm page posts here (no htmx), so a plain redirect is the answer.
    return HttpResponseRedirect(target)


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def integration_delete(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    integration = get_object_or_404(Integration, slug=slug)
    in_use = published_tools_using(slug)
    status = 200
    if request.method == "POST":
        form = DeleteForm(request.POST)
        if form.is_valid():
            try:
                revoked = delete_integration(
                    integration,
                    actor=Actor.from_request(request),
                    confirm=form.cleaned_data["confirm"],
                )
            except InUse as exc:
                form.add_error("confirm", str(exc))
                status = 409
            else:
                # An OAuth integration: whether the provider revoked its tokens, failure too.
                level = messages.warning if "failed" in revoked else messages.success
                level(request, f"Integration {slug} deleted. {revoked}".strip())
                return redirect("integrations")
    else:
        form = DeleteForm()
    return render(
        request,
        "integrations/delete.html",
        {
            "integration": integration,
            "in_use": in_use,
            "other_tools": [t for t in tools_using(slug) if t not in in_use],
            "form": form,
            "oauth": oauth.health(integration),
            "revokes": oauth.revokes(integration),
        },
        status=status,
    )


@require_GET
@role_required(VIEWER)
def integration_environment(request: HtmxHttpRequest) -> HttpResponse:
    """The variable names each tool would receive from its integrations (never values)."""
    wanted = request.GET.get("tool", "").strip()
    tools = Tool.objects.select_related("published_version").exclude(integration_slugs="")
    if wanted:
        # A name no tool can have (NUL bytes, which PostgreSQL refuses) finds nothing.
        tools = tools.filter(name=wanted) if NAME_RE.fullmatch(wanted) else tools.none()
    rows = [{"tool": t, "items": env_preview(t)} for t in tools]
    return render(
        request,
        "integrations/environment.html",
        {"rows": rows, "wanted": wanted, "can_manage": has_role(request.user, ADMIN)},
    )
