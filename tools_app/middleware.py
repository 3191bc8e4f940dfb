"""The request's context (its id, its latency) and a page that says the database is down.

RequestContextMiddleware, first of all: every log line of a request carries its request id
(a tame incoming X-Request-ID, else a new one, sent back in the response's X-Request-ID)
and, on the pages and API calls of one run, that run's id (tools_app/ops/logcontext.py);
the request's latency goes to /metrics (tools_app/ops/metrics.py).

DatabaseDownMiddleware: a page that says the database is down, instead of a 500 (issue 10).

Every signed-in page reads the session and the user from the database, so when it does not
answer each page failed with "Something went wrong". The exception is caught where Django
hands view exceptions to middleware; the database is then asked once more, and only when it
really does not answer is the 503 page sent (any other database error stays a logged 500)."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

from tools_app.ops import health, logcontext, metrics

RETRY_AFTER_SECONDS = 30
REQUEST_ID_HEADER = "X-Request-ID"


class RequestContextMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        incoming = request.headers.get(REQUEST_ID_HEADER)
        request_id = logcontext.sane_request_id(incoming) or logcontext.new_request_id()
        request.request_id = request_id  # type: ignore[attr-defined]
        with logcontext.bound(request=request_id, run=""):
            response = self.get_response(request)
        response[REQUEST_ID_HEADER] = request_id
        match = getattr(request, "resolver_match", None)
        view = (match.view_name if match is not None else "") or "other"
        metrics.observe_request(
            request.method or "", view, response.status_code, time.perf_counter() - started
        )
        return response

    def process_view(
        self, request: HttpRequest, view_func: Callable, view_args: tuple, view_kwargs: dict
    ) -> None:
        # A run's page, its updates, cancel, artifacts and the API's run calls: their lines
        # carry the run id too, so one grep finds the run's whole story ("and back").
        if run_id := view_kwargs.get("run_id"):
            logcontext.bind(run=str(run_id))


class DatabaseDownMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, OperationalError | InterfaceError):
            return None
        check = health.database()
        if check.ok:
            return None
        # Rendered without the request: context processors and the nav would ask the
        # database again. Says no more than /api/v1/health tells an unchecked caller.
        page = render_to_string("503_database.html", {"detail": check.detail})
        response = HttpResponse(page, status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
