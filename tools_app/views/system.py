"""The System page (admins only): the health report people read (tools_app/health.py)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
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
