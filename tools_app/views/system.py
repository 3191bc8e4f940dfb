"""The System page (admins only): the health report people read (tools_app/health.py)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST, require_safe

from tools_app import health
from tools_app.roles import ADMIN, role_required


@never_cache
@require_safe
@role_required(ADMIN)
def system(request: HttpRequest) -> HttpResponse:
    report = health.report()
    return render(request, "system/system.html", {"report": report, "checks": report.as_dict()})


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
