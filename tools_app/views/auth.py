"""Login throttling (django-axes): the lock-out page, and an audit event when a lock starts."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from tools_app import audit


def locked_out(
    request: HttpRequest, original_response: HttpResponse | None, credentials: dict | None
) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the answer to every login attempt, right or wrong, for a
    locked-out username, on the console's login and Django admin's alike."""
    context = {
        "username": (credentials or {}).get("username") or "",
        "minutes": int(settings.AXES_COOLOFF_TIME.total_seconds() // 60),
        "failure_limit": settings.AXES_FAILURE_LIMIT,
    }
    return render(request, "registration/locked_out.html", context, status=429)


def record_lockout(sender, request: HttpRequest, username: str, ip_address: str, **kwargs) -> None:
    """axes' user_locked_out receiver. Axes sends it for every refused attempt during a
    lock; only the attempt that starts the lock is audited, so an attacker hammering a
    locked name cannot flood the audit log."""
    if getattr(request, "axes_failures_since_start", None) != settings.AXES_FAILURE_LIMIT:
        return
    audit.record(
        audit.Actor(ip=ip_address or None),
        "login.locked_out",
        summary=(
            f"login locked for {username!r} after {settings.AXES_FAILURE_LIMIT} wrong "
            f"passwords, for {settings.AXES_COOLOFF_TIME}"
        ),
        data={"username": username or ""},
    )
