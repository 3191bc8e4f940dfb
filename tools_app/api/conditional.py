"""ETags, `If-None-Match` and cached JSON bodies (RFC 9110 sections 8.8.3 and 13.1.2).

Answers that list many tools are keyed by a cheap revision of the tool table: the ETag is
derived from it, a 304 needs no serialisation at all, and the full body is serialised once
per revision and format and then served from Django's cache."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

from django.core.cache import cache
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Count, Max, Sum
from django.http import HttpRequest, HttpResponse, HttpResponseNotModified

from tools_app.models import Tool

# Bump when the shape of a cached answer changes, so old ETags and bodies stop matching.
ANSWER_REVISION = "1"
# Old revisions are never asked for again; let them expire instead of piling up.
BODY_CACHE_SECONDS = 600
# A longer If-None-Match is not something a real client sends: ignore it, do not parse it.
MAX_IF_NONE_MATCH = 8 * 1024

# One list element: optional whitespace, an optional entity-tag, whitespace, then a comma
# or the end. Empty elements are allowed (RFC 9110 section 5.6.1).
_ELEMENT = re.compile(r'[ \t]*(?:(W/)?"([\x21\x23-\x7e\x80-\xff]*)")?[ \t]*(?:,|\Z)')


def parse_if_none_match(header: str) -> list[str] | None:
    """The opaque tags of an If-None-Match value, ["*"], or None when malformed."""
    if len(header) > MAX_IF_NONE_MATCH:
        return None
    if header.strip(" \t") == "*":
        return ["*"]
    tags: list[str] = []
    pos = 0
    while pos < len(header):
        match = _ELEMENT.match(header, pos)
        if match is None or match.end() == pos:
            return None
        if match.group(2) is not None:
            tags.append(match.group(2))
        pos = match.end()
    return tags


def none_match_hit(request: HttpRequest, etag: str) -> bool:
    """True when If-None-Match matches `etag` (weak comparison), so a 304 is due.

    A malformed header is ignored (the client gets the full answer), never an error."""
    header = request.headers.get("If-None-Match")
    if header is None:
        return False
    tags = parse_if_none_match(header)
    return bool(tags) and (tags == ["*"] or etag in tags)


def published_revision() -> str:
    """Changes whenever the set of published, enabled tools or any of them changes.

    Every state change of a tool saves `updated_at`; the count and the sum of published
    version ids also catch changes that bypass save() (queryset updates, deletions)."""
    agg = Tool.objects.published().aggregate(
        n=Count("id"), latest=Max("updated_at"), versions=Sum("published_version_id")
    )
    latest = agg["latest"].isoformat() if agg["latest"] else "-"
    return f"{agg['n']}.{agg['versions'] or 0}.{latest}"


def make_etag(*parts: str) -> str:
    key = ":".join((ANSWER_REVISION, *parts))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def dumps(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), cls=DjangoJSONEncoder).encode("utf-8")


def cached_json(request: HttpRequest, etag: str, build: Callable[[], Any]) -> HttpResponse:
    """A 304 when the client has `etag`; else the body for `etag`, built at most once."""
    response: HttpResponse
    if none_match_hit(request, etag):
        response = HttpResponseNotModified()
    else:
        key = f"api:body:{etag}"
        body = cache.get(key)
        if body is None:
            body = dumps(build())
            cache.set(key, body, BODY_CACHE_SECONDS)
        response = HttpResponse(body, content_type="application/json")
    return with_validator(response, etag)


def with_validator(response: HttpResponse, etag: str) -> HttpResponse:
    response["ETag"] = f'"{etag}"'
    # Agents may keep the answer but must revalidate it; it is theirs alone (a token's).
    response["Cache-Control"] = "private, no-cache"
    return response
