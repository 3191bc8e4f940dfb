"""A page that says the database is down, instead of a 500 (issue 10).

Every signed-in page reads the session and the user from the database, so when it does not
answer each page failed with "Something went wrong". The exception is caught where Django
hands view exceptions to middleware; the database is then asked once more, and only when it
really does not answer is the 503 page sent (any other database error stays a logged 500)."""

from __future__ import annotations

from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

from tools_app.ops import health

RETRY_AFTER_SECONDS = 30


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
