"""JSON errors for the agent API: every failure is `{"error": "...", "detail": ...}`.

Ninja's own answers (validation errors, auth failures, 404s, 405s) are rewritten into this
shape by the handlers installed here, so an agent never has to parse HTML or a second
error format."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import SuspiciousOperation
from django.core.signals import got_request_exception
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, AuthorizationError, HttpError, ValidationError

from tools_app.lib import nesting

logger = logging.getLogger("tools_app.api")


class ApiError(HttpError):
    """An answer with a status, a short error and an optional detail."""

    def __init__(self, status: int, error: str, detail: Any = None) -> None:
        super().__init__(status, error)
        self.detail = detail


class Unauthorized(AuthenticationError):
    def __init__(self, error: str, detail: Any = None) -> None:
        super().__init__(401, error)
        self.detail = detail


class Forbidden(AuthorizationError):
    def __init__(self, error: str, detail: Any = None, scope: str = "") -> None:
        super().__init__(403, error)
        self.detail = detail
        self.scope = scope


def error_response(status: int, error: str, detail: Any = None) -> JsonResponse:
    return JsonResponse({"error": error, "detail": detail}, status=status)


def shown(value: str, limit: int = 80) -> str:
    """A name from the request, safe to echo: quoted, escaped and short."""
    text = repr(value[:limit])
    return text + "…" if len(value) > limit else text


def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    detail = getattr(exc, "detail", None)
    if isinstance(exc.__cause__, nesting.TooDeep):  # ninja's 400 for an unparsable body
        detail = [str(exc.__cause__)]
    response = error_response(exc.status_code, exc.message, detail)
    if exc.status_code == 401:
        response["WWW-Authenticate"] = 'Bearer realm="tool-console"'
    elif exc.status_code == 403 and getattr(exc, "scope", ""):
        # RFC 6750 section 3.1: tell the client which scope it lacks.
        response["WWW-Authenticate"] = (
            f'Bearer realm="tool-console", error="insufficient_scope", scope="{exc.scope}"'
        )
    return response


def _validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    # Ninja already drops the offending input from each error, so nothing huge is echoed.
    return error_response(422, "invalid request", exc.errors)


def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return error_response(404, "not found", None)


def _suspicious(request: HttpRequest, exc: SuspiciousOperation) -> HttpResponse:
    # Too many query fields, a disallowed host and the like: the client's fault.
    return error_response(400, "bad request", type(exc).__name__)


def _unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    # A bug on our side. Log it and signal it like Django does (the test client re-raises
    # it), but still answer in the API's error format.
    logger.error("API error on %s", request.path, exc_info=exc)
    got_request_exception.send(sender=None, request=request)
    return error_response(500, "internal error", None)


def install(api: NinjaAPI) -> None:
    api.add_exception_handler(HttpError, _http_error)
    api.add_exception_handler(ValidationError, _validation_error)
    api.add_exception_handler(Http404, _not_found)
    api.add_exception_handler(SuspiciousOperation, _suspicious)
    api.add_exception_handler(Exception, _unexpected)
