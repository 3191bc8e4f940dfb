"""Who a log line is about: the request id and run id that follow a run from the web request
through the queue to the worker (docs/operations.md, "Logs"), and the JSON format.

Context variables, so every thread (gunicorn's Django thread pool, a Celery pool process)
and asyncio task sees its own; no Django here, so the logging config can name these classes
before Django is set up."""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import re
import time
import uuid
from collections.abc import Iterator

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")
run_id: contextvars.ContextVar[str] = contextvars.ContextVar("run_id", default="")

# An incoming X-Request-ID is kept only when it is this tame: it lands in every log line
# and in the run row, so no spaces, quotes, newlines or control characters, and a bound.
REQUEST_ID_RE = re.compile(r"[A-Za-z0-9._:-]{8,64}")


def sane_request_id(raw: str | None) -> str:
    """`raw` when it is a usable request id, else ""."""
    if raw and REQUEST_ID_RE.fullmatch(raw):
        return raw
    return ""


def new_request_id() -> str:
    return uuid.uuid4().hex


@contextlib.contextmanager
def bound(*, request: str | None = None, run: str | None = None) -> Iterator[None]:
    """Log lines inside carry these ids (None: keep the current one)."""
    tokens = []
    if request is not None:
        tokens.append((request_id, request_id.set(request)))
    if run is not None:
        tokens.append((run_id, run_id.set(run)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def bind(*, request: str | None = None, run: str | None = None) -> None:
    """Set the ids until clear() (Celery's task_prerun/postrun signals come in two calls)."""
    if request is not None:
        request_id.set(request)
    if run is not None:
        run_id.set(run)


def clear() -> None:
    request_id.set("")
    run_id.set("")


class ContextFilter(logging.Filter):
    """Adds `request_id` and `run_id` to each record (an `extra=` of the caller wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", ""):
            record.request_id = request_id.get()
        if not getattr(record, "run_id", ""):
            record.run_id = run_id.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC, ISO 8601), level, logger, message, request_id,
    run_id and, for an exception, its traceback as `exc`. `jq 'select(.run_id == "…")'`
    picks a run's lines."""

    def format(self, record: logging.LogRecord) -> str:
        seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        line = {
            "time": f"{seconds}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            # The filter sets these on a handler that has it; the context otherwise.
            "request_id": getattr(record, "request_id", "") or request_id.get(),
            "run_id": getattr(record, "run_id", "") or run_id.get(),
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)
