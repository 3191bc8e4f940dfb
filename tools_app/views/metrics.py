"""GET /metrics: the Prometheus text format (tools_app/ops/metrics.py) for an agent token
with the `metrics:read` scope, or for anyone when CONSOLE_METRICS_PUBLIC is on (a scrape
network nobody else reaches). Refusals are the agent API's JSON errors."""

from __future__ import annotations

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST

from tools_app.api.auth import active_token, touch
from tools_app.api.errors import error_response
from tools_app.models.tokens import Scope
from tools_app.ops import metrics as console_metrics

REALM = 'Bearer realm="tool-console", scope="metrics:read"'


@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    if not settings.METRICS_PUBLIC:
        refused = _refusal(request)
        if refused is not None:
            return refused
    try:
        body = console_metrics.render()
    except DatabaseError:
        # A scraper sees the console down (and its alert fires) instead of a 500 page.
        return error_response(503, "database unavailable", "the metrics could not be read")
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


def _refusal(request: HttpRequest) -> HttpResponse | None:
    header = request.headers.get("Authorization", "").strip()
    scheme, _, raw = header.partition(" ")
    if not header or scheme.lower() != "bearer" or not raw.strip():
        return _unauthorized("missing token", "send 'Authorization: Bearer <agent token>'")
    token = active_token(raw.strip())
    if token is None:
        return _unauthorized("invalid token", "the token is unknown, was revoked or has expired")
    if not token.has_scope(Scope.METRICS_READ):
        return error_response(403, "missing scope", "this token lacks the 'metrics:read' scope")
    touch(token)
    return None


def _unauthorized(error: str, detail: str) -> HttpResponse:
    response = error_response(401, error, detail)
    response["WWW-Authenticate"] = REALM
    return response
