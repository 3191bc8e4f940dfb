"""Readiness for operators and agents: GET /api/v1/health (tools_app/ops/health.py decides).

Any agent token may ask, whatever its scopes, and so may an admin's browser session;
anyone else gets 401 (or 403 for a signed-in person who is not an admin)."""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError
from django.http import HttpRequest
from ninja import Router, Schema, Status

from tools_app.api.auth import active_token, touch
from tools_app.api.errors import Forbidden, Unauthorized
from tools_app.api.schemas import ErrorOut
from tools_app.ops import health
from tools_app.roles import ADMIN, has_role

router = Router(tags=["health"])


class HealthOut(Schema):
    ready: bool
    database: dict[str, Any]
    # Absent only when the database is down and the caller could not be checked.
    broker: dict[str, Any] | None = None
    workers: dict[str, Any] | None = None
    isolation: dict[str, Any] | None = None
    encryption: dict[str, Any] | None = None
    queue: dict[str, Any] | None = None
    problems: list[str]


def allowed(request: HttpRequest) -> None:
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, raw = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not raw.strip():
            raise Unauthorized("malformed Authorization header", "expected 'Bearer <token>'")
        token = active_token(raw.strip())
        if token is None:
            raise Unauthorized("invalid token", "the token is unknown, was revoked or has expired")
        touch(token)
        return
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        raise Unauthorized(
            "missing token", "send 'Authorization: Bearer <agent token>' or sign in as an admin"
        )
    if not has_role(user, ADMIN):
        raise Forbidden("admins only", "the health report is for admins and agent tokens")


@router.get(
    "/health",
    auth=None,
    response={200: HealthOut, 503: HealthOut, 401: ErrorOut, 403: ErrorOut},
    url_name="health",
    summary="Readiness: database, broker, workers, isolation, keys, queue",
)
def health_report(request: HttpRequest):
    """200 when the console can run tools; 503 when the database or the broker does not
    answer, or no worker beat its heartbeat lately. `problems` says what to fix."""
    try:
        allowed(request)
    except DatabaseError:
        # Neither a token nor a session can be checked: say only that the database is down.
        report = health.Report((health.database(),))
        body = {"ready": False, "database": report.checks[0].as_dict()}
        return Status(503, {**body, "problems": report.problems})
    report = health.report()
    return Status(200 if report.ready else 503, report.as_dict())
