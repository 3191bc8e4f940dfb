"""The agent API under /api/ (console/urls.py includes this module there)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, include, path, re_path
from django.views.decorators.csrf import csrf_exempt

from tools_app.api import api
from tools_app.api.errors import error_response


def json_errors(view: Callable) -> Callable:
    """Ninja answers a wrong method with a plain-text 405, and its root view (kept for
    reverse()) raises Http404 outside its handlers; agents get JSON everywhere.

    Ninja marks its operations csrf_exempt (they take bearer tokens, not cookies), but not
    its schema, docs and root pages: a POST there met Django's HTML CSRF page. Those pages
    only read, so they answer any other method with a JSON 405 instead."""
    read_only = not getattr(view, "csrf_exempt", False)

    @csrf_exempt
    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if read_only and request.method not in ("GET", "HEAD"):
            return method_not_allowed("GET, HEAD")
        try:
            response = view(request, *args, **kwargs)
        except Http404:
            return not_found(request)
        if response.status_code == 405 and not response.get("Content-Type", "").startswith(
            "application/json"
        ):
            allowed = response.get("Allow", "")
            json_response = error_response(405, "method not allowed", f"allowed: {allowed}")
            json_response["Allow"] = allowed
            return json_response
        return response

    return wrapped


def _wrapped(patterns: list) -> list:
    for pattern in patterns:
        if isinstance(pattern, URLPattern):
            pattern.callback = json_errors(pattern.callback)
    return patterns


def method_not_allowed(allowed: str) -> JsonResponse:
    response = error_response(405, "method not allowed", f"allowed: {allowed}")
    response["Allow"] = allowed
    return response


@csrf_exempt  # changes nothing; a JSON answer to any method beats a CSRF page
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for load balancers and the benchmark's baseline: no auth, no database."""
    if request.method not in ("GET", "HEAD"):
        return method_not_allowed("GET, HEAD")
    return JsonResponse({"ok": True})


@csrf_exempt  # a JSON 404 for every method, not Django's CSRF failure page
def not_found(request: HttpRequest, rest: str = "") -> JsonResponse:
    return error_response(404, "not found", "no such API endpoint; see /api/docs")


_patterns, _app_name, _namespace = api.urls

urlpatterns = [
    path("", include((_wrapped(_patterns), _app_name), namespace=_namespace)),
    path("healthz", healthz, name="healthz"),
    # Last: anything else under /api/ is a JSON 404, not the HTML page.
    re_path(r"^(?P<rest>.*)$", not_found),
]
