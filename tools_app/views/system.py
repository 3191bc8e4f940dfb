"""The System page (admins only): the health report people read (tools_app/ops/health.py)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.templatetags.static import static
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST, require_safe

from tools_app.audit import Actor, record
from tools_app.egress import config as egress_config
from tools_app.egress import policy as egress_policy
from tools_app.forms.egress import EgressExceptionForm
from tools_app.integrations import oauth
from tools_app.models import EgressException
from tools_app.ops import health
from tools_app.roles import ADMIN, role_required


@never_cache
@require_safe
@role_required(ADMIN)
def system(request: HttpRequest) -> HttpResponse:
    return _system_page(request, EgressExceptionForm())


def _system_page(request: HttpRequest, form: EgressExceptionForm, status: int = 200):
    report = health.report()
    try:
        policy = egress_config.console_policy().summary()
    except egress_policy.PolicyError as exc:
        policy = f"The egress policy is invalid: {exc}"
    context = {
        "report": report,
        "checks": report.as_dict(),
        "egress_form": form,
        "egress_exceptions": EgressException.objects.select_related("created_by"),
        "egress_policy": policy,
        "allow_setting": settings.TOOL_NETWORK_ALLOW,
        "oauth_states": oauth.healths(),
    }
    return render(request, "system/system.html", context, status=status)


@require_POST
@role_required(ADMIN)
def egress_allow(request: HttpRequest) -> HttpResponse:
    """Add an exception: tools and console-side requests reach it from the next run or
    request on, without a restart."""
    form = EgressExceptionForm(request.POST)
    if not form.is_valid():
        return _system_page(request, form, status=400)
    exception = EgressException.objects.create(
        entry=form.cleaned_data["entry"], note=form.cleaned_data["note"], created_by=request.user
    )
    record(
        Actor.from_request(request),
        "egress.allow",
        exception,
        f"{exception.entry}" + (f" ({exception.note})" if exception.note else ""),
        {"entry": exception.entry, "note": exception.note},
    )
    messages.success(request, f"Tools may now reach {exception.entry}.")
    return redirect(reverse("system") + "#egress")


@require_POST
@role_required(ADMIN)
def egress_remove(request: HttpRequest, pk: int) -> HttpResponse:
    exception = get_object_or_404(EgressException, pk=pk)
    record(
        Actor.from_request(request),
        "egress.remove",
        exception,
        exception.entry,
        {"entry": exception.entry},
    )
    exception.delete()
    messages.success(request, f"{exception.entry} is refused again from the next run on.")
    return redirect(reverse("system") + "#egress")


@require_safe
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers fetch /favicon.ico whatever the page's <link rel=icon> says: send them to
    the static icon (resolved per request, so a hashed static name works too)."""
    return redirect(static("favicon.svg"))


# The session key that hides the configuration banners (e.g. the development key) until
# the next login: a person who has read one need not see it on every page.
WARNINGS_DISMISSED = "console_warnings_dismissed"


@require_POST
@login_required
def dismiss_warnings(request: HttpRequest) -> HttpResponse:
    request.session[WARNINGS_DISMISSED] = True
    target = request.POST.get("next") or ""
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        target = "/"
    return redirect(target)
