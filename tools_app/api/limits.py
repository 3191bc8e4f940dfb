"""Size limits of the agent API's request bodies.

The one body that matters is invoke's `{"params": ...}`: params are capped at 1 MiB of
JSON like the run form's raw JSON (tools_app/forms/runs.py). A body can exceed that only
by its envelope, so `capped_body` refuses anything over MAX_BODY_BYTES from its
Content-Length, before Django reads it into memory or anything parses it (ninja reads
the body before any handler could object); invoke then checks the params themselves.

Nesting: `NestingParser` parses every body with the console's one nesting cap
(tools_app/lib/nesting.py), so a body nested too deep is a 400 naming the path, like any body
ninja cannot parse, never a RecursionError further on."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja.parser import Parser

from tools_app.api.errors import ApiError, error_response
from tools_app.forms.runs import MAX_RAW_PARAMS
from tools_app.lib import nesting
from tools_app.manifest import input_files
from tools_app.manifest.toolmd import Manifest

MAX_PARAMS_BYTES = MAX_RAW_PARAMS
# Room for the envelope: {"params": ..., "version": N} and some whitespace.
MAX_BODY_BYTES = MAX_PARAMS_BYTES + 4096
# `file` inputs travel base64 inside params (tools_app/manifest/input_files.py, 10 MiB each): their
# `data` does not count towards MAX_PARAMS_BYTES, and a body up to this size is read, but
# only for a request whose token is valid (an anonymous one is refused unread as before).
# Below DATA_UPLOAD_MAX_MEMORY_SIZE (25 MiB), which Django enforces when it reads a body.
MAX_FILES_BODY_BYTES = 24 * 1024 * 1024
TOO_LARGE = "request too large"


class NestingParser(Parser):
    """Ninja's JSON parser with the nesting cap; a TooDeep becomes ninja's 400 "Cannot
    parse request body", and errors.py puts its path in the detail."""

    def parse_body(self, request: HttpRequest) -> dict:
        # Level 0: the {"params": ...} envelope does not count, so params are refused at
        # exactly the depth the run form refuses them, with the same path.
        return nesting.loads(request.body, root="", level=0)


def params_size(manifest: Manifest, params: Any) -> int:
    """The bytes of `params` as JSON counted against MAX_PARAMS_BYTES: file bytes are
    judged per file (10 MiB each) by validation, not by this cap. REST and MCP both
    count this way. `params` must have passed the nesting cap (json.dumps recurses)."""
    counted = input_files.without_data(manifest, params)
    text = json.dumps(counted, ensure_ascii=False, separators=(",", ":"))
    # surrogatepass: a lone surrogate (\ud800) is still counted; validation judges it.
    return len(text.encode("utf-8", "surrogatepass"))


def too_large(what: str, size: int, limit: int) -> ApiError:
    return ApiError(413, TOO_LARGE, f"{what} is {size} bytes; the limit is {limit} bytes")


def declared_length(request: HttpRequest) -> int:
    try:
        return max(int(request.META.get("CONTENT_LENGTH") or 0), 0)
    except ValueError:
        return 0


def capped_body(view: Callable) -> Callable:
    """For ninja's decorate_view: a 413 for a body over MAX_BODY_BYTES, unread."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        size = declared_length(request)
        if size > MAX_BODY_BYTES:
            limit = MAX_FILES_BODY_BYTES if _valid_token(request) else MAX_BODY_BYTES
            if size > limit:
                exc = too_large("the request body", size, limit)
                return error_response(413, TOO_LARGE, exc.detail)
        return view(request, *args, **kwargs)

    return wrapped


def _valid_token(request: HttpRequest) -> bool:
    from tools_app.models import AgentToken

    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and AgentToken.authenticate(raw.strip()) is not None
