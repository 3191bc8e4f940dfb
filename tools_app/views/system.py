"""The System page (admins only): the health report people read (tools_app/health.py)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

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
