"""ETags, `If-None-Match` and cached JSON bodies (RFC 9110 sections 8.8.3 and 13.1.2).

Answers that list many tools are keyed by a cheap revision of the tool table: the ETag is
derived from it, a 304 needs no serialisation at all, and the full body is serialised once
per revision and format, then served from memory (each process keeps the bodies it serves
most; Django's cache shares them between processes when it is shared).

If-None-Match is parsed by Django (parse_etags) and bodies are gzipped by Django
(compress_string). Django's get_conditional_response() and @condition are not used: they
compare one ETag, where either representation's (plain or gzip) earns a 304 here, and they
also answer 412 to a GET's If-Match or If-Unmodified-Since, which these read-only answers
ignore."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.cache import cache, caches
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import Count, Max, Subquery, Sum
from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.utils.http import parse_etags, quote_etag
from django.utils.text import compress_string

from tools_app.catalog import integrity
from tools_app.models import KeysDocument, Tool

# Bump when the shape of a cached answer changes, so old ETags and bodies stop matching.
ANSWER_REVISION = "1"
# Old revisions are never asked for again; let them expire instead of piling up.
BODY_CACHE_SECONDS = 600
# How long a process may answer from a cached revision after another process changed a
# tool (settings.CONSOLE_REGISTRY_REVISION_TTL overrides it).
REVISION_TTL = 1.0
# The revision is remembered in this process's cache (settings.CACHES["local"]).
REVISION_KEY = "api:revision"
# Bodies kept in each process, most recently used last. Keys hold a revision, so a body is
# never stale, only unused; 64 bounds the memory to a few registries' worth. A dict rather
# than the "local" cache: that one pickles, a copy of a megabyte per full registry answer.
MAX_LOCAL_BODIES = 64
_bodies: OrderedDict[str, bytes] = OrderedDict()
_bodies_lock = threading.Lock()
# The gzip representation's ETag: the same revision, another entity.
GZIP_SUFFIX = "-gzip"
MAX_ACCEPT_ENCODING = 1024
# A longer If-None-Match is not something a real client sends: ignore it, do not parse it.
MAX_IF_NONE_MATCH = 8 * 1024


def none_match_hit(request: HttpRequest, *etags: str) -> bool:
    """True when If-None-Match matches one of `etags` (weak comparison, RFC 9110 section
    13.1.2): a 304 is due. Malformed tags in the header are skipped, never an error."""
    header = request.headers.get("If-None-Match", "")
    if not header or len(header) > MAX_IF_NONE_MATCH:
        return False
    tags = parse_etags(header)
    if tags == ["*"]:
        return True
    # Our tags are hex digests: quoting them needs no quote_etag() (a regex per call).
    ours = {f'"{etag}"' for etag in etags}
    return any(tag.removeprefix("W/") in ours for tag in tags)


def published_revision() -> str:
    """A short string that changes whenever what agents see of the tools changes.

    Remembered in this process for REVISION_TTL seconds: the aggregate scans the tool
    table, which would be most of a 304's cost. Saving or deleting a Tool forgets it at
    once in the process that does it; other processes notice within REVISION_TTL."""
    local = caches["local"]
    revision = local.get(REVISION_KEY)
    if revision is not None:
        return revision
    revision = _published_revision()
    ttl = float(getattr(settings, "CONSOLE_REGISTRY_REVISION_TTL", REVISION_TTL))
    if ttl > 0:
        local.set(REVISION_KEY, revision, ttl)
    return revision


def _published_revision() -> str:
    # Every state change of a tool saves `updated_at`; the count and the sum of published
    # version ids also catch changes that bypass save() (queryset updates, deletions).
    # Signatures count too: every signature bumps its tool's signing serial (a re-signature
    # after a key rotation changes no file), and a new keys.json (a key retired) is served
    # beside them. One query still: the keys.json serial is a subquery.
    keys = KeysDocument.objects.order_by("-serial").values("serial")[:1]
    agg = Tool.objects.published().aggregate(
        n=Count("id"),
        latest=Max("updated_at"),
        versions=Sum("published_version_id"),
        signed=Sum("signing_serial"),
        keys=Max(Subquery(keys)),
    )
    latest = agg["latest"].isoformat() if agg["latest"] else "-"
    signed = f"{agg['signed'] or 0}.{agg['keys'] or 0}"
    return f"{agg['n']}.{agg['versions'] or 0}.{latest}.{signed}"


def forget_revision() -> None:
    """After a Tool is saved or deleted (tools_app/signals.py)."""
    reset_revision()
    # Again after the commit: a request that read the revision between the save and the
    # commit would otherwise keep the old one.
    transaction.on_commit(reset_revision)


def reset_revision() -> None:
    caches["local"].delete(REVISION_KEY)


def make_etag(*parts: str) -> str:
    key = ":".join((ANSWER_REVISION, *parts))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def dumps(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), cls=DjangoJSONEncoder).encode("utf-8")


def cached_json(request: HttpRequest, etag: str, build: Callable[[], Any]) -> HttpResponse:
    """A 304 when the client has `etag`; else the body for `etag`, built at most once.

    Clients that accept gzip get the body compressed (also once per revision): a registry
    of 1,000 tools is about 1 MB of JSON and a twentieth of that gzipped."""
    gzipped = accepts_gzip(request.headers.get("Accept-Encoding", ""))
    tag = f"{etag}{GZIP_SUFFIX}" if gzipped else etag
    response: HttpResponse
    # Either representation's tag names the same revision, so both earn a 304.
    if none_match_hit(request, etag, f"{etag}{GZIP_SUFFIX}"):
        response = HttpResponseNotModified()
    else:
        response = HttpResponse(_answer(etag, build, gzipped), content_type="application/json")
        if gzipped:
            response["Content-Encoding"] = "gzip"
    response["Vary"] = "Accept-Encoding"
    return with_validator(response, tag)


def _answer(etag: str, build: Callable[[], Any], gzipped: bool) -> bytes:
    def plain() -> bytes:
        return _body(etag, lambda: dumps(build()))

    if gzipped:
        return _body(f"{etag}:gzip", lambda: compress_string(plain()))
    return plain()


def _body(key: str, make: Callable[[], bytes]) -> bytes:
    """A body by key: from this process's memory, else Django's cache, else made (once).

    The process-local layer skips the cache's unpickling, a copy of a megabyte per full
    registry answer; Django's cache lets processes share the work when it is shared."""
    with _bodies_lock:
        body = _bodies.get(key)
        if body is not None:
            _bodies.move_to_end(key)
            return body
    cache_key = f"api:body:{key}"
    body = cache.get(cache_key)
    if body is None:
        body = make()
        cache.set(cache_key, body, BODY_CACHE_SECONDS)
    with _bodies_lock:
        _bodies[key] = body
        while len(_bodies) > MAX_LOCAL_BODIES:
            _bodies.popitem(last=False)
    return body


def reset_local_caches() -> None:
    """Forget what this process remembers (tests share one process)."""
    reset_revision()
    integrity.reset()
    with _bodies_lock:
        _bodies.clear()


def accepts_gzip(header: str) -> bool:
    """True when Accept-Encoding allows gzip (RFC 9110 section 12.5.3), q=0 meaning no."""
    if not header or len(header) > MAX_ACCEPT_ENCODING:
        return False
    weights: dict[str, float] = {}
    for item in header.split(","):
        coding, _, params = item.strip().partition(";")
        weight = 1.0
        name, _, value = params.strip().partition("=")
        if name.strip().lower() == "q":
            try:
                weight = float(value)
            except ValueError:
                weight = 0.0
        weights[coding.strip().lower()] = weight
    return weights.get("gzip", weights.get("x-gzip", weights.get("*", 0.0))) > 0


def with_validator(response: HttpResponse, etag: str) -> HttpResponse:
    response["ETag"] = quote_etag(etag)
    # Agents may keep the answer but must revalidate it; it is theirs alone (a token's).
    response["Cache-Control"] = "private, no-cache"
    return response
