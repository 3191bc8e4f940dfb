"""Bad input gets a clear error and loses nothing: never a 500.

Every URL pattern the site resolves (console/urls.py with admin, accounts, the agent API and
tools_app/urls.py) is called with real objects and with hostile path values, by every kind
of visitor, with GET and POST and hostile bodies, query strings and htmx headers. Then the
agent API is fuzzed from its own OpenAPI document with schemathesis.

A failure lists every request that failed: method, path, visitor, variant, status and,
for a 500, the exception and the innermost frames that raised it.

Requests that start runs are only stored: the test's transaction never commits, so no
Celery task is ever sent. Outbound HTTP (integration connection tests) goes to a local
fake provider or to a closed loopback proxy, so hostile URLs and default provider
addresses never leave the machine."""

from __future__ import annotations

import html
import io
import json
import re
import traceback
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from django.apps import apps
from django.contrib.auth.models import Group, User
from django.contrib.auth.tokens import default_token_generator
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import FieldDoesNotExist
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RegexPattern
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from tests.support import integrations as support
from tools_app.audit import Actor
from tools_app.catalog.versions import set_enabled
from tools_app.models import (
    AgentToken,
    AuditEvent,
    CaseCheck,
    CaseRun,
    IntegrationSecret,
    Run,
    RunArtifact,
    RunUpdate,
    Tool,
    ToolVersion,
)
from tools_app.models.cases import CheckStatus
from tools_app.models.runs import RunStatus, RunVia
from tools_app.roles import ADMIN, ensure_groups
from tools_app.runs import start

pytestmark = pytest.mark.django_db

ALL_SCOPES = ["registry:read", "sync:read", "tools:invoke"]
# Nothing listens here: every outbound request that is not for this machine (a default
# provider address, a hostile URL) fails at once, without leaving it.
CLOSED_PROXY = "http://127.0.0.1:9"

# --------------------------------------------------------------------------------------
# The URL patterns


@dataclass(frozen=True)
class Route:
    name: str  # "namespace:name"; unnamed patterns are known by their template
    template: str  # the full route, with "{param}" for each path parameter
    converters: tuple[tuple[str, str], ...]  # (param, converter) in order

    @property
    def id(self) -> str:
        return self.template if self.name.endswith("?") else self.name

    @property
    def is_api(self) -> bool:
        return self.template.startswith("api/")

    @property
    def is_admin(self) -> bool:
        return self.template.startswith("admin/")

    def url(self, values: dict[str, str]) -> str:
        """The path with each parameter percent-encoded (the view sees it decoded)."""
        path = self.template
        for name, _ in self.converters:
            safe = "/" if name in ("object_id", "url", "rest") else ""
            path = path.replace("{" + name + "}", quote(values[name], safe=safe))
        return "/" + path


_ROUTE_PARAM = re.compile(r"<(?:(\w+):)?(\w+)>")
_REGEX_PARAM = re.compile(r"\(\?P<(\w+)>[^)]*\)")


def _template(pattern) -> tuple[str, list[tuple[str, str]]]:
    text = str(pattern)
    if isinstance(pattern, RegexPattern):
        params = [(name, "regex") for name in _REGEX_PARAM.findall(text)]
        text = _REGEX_PARAM.sub(lambda m: "{" + m.group(1) + "}", text)
        return text.replace("^", "").replace("$", ""), params
    params = [(name, conv or "str") for conv, name in _ROUTE_PARAM.findall(text)]
    return _ROUTE_PARAM.sub(lambda m: "{" + m.group(2) + "}", text), params


def walk(patterns, prefix: str = "", namespace: str = "", params=()) -> Iterator[Route]:
    for pattern in patterns:
        text, found = _template(pattern.pattern)
        if isinstance(pattern, URLResolver):
            ns = namespace + (f"{pattern.namespace}:" if pattern.namespace else "")
            yield from walk(pattern.url_patterns, prefix + text, ns, (*params, *found))
        elif isinstance(pattern, URLPattern):
            yield Route(namespace + (pattern.name or "?"), prefix + text, (*params, *found))


ROUTES = list(walk(get_resolver().url_patterns))

# Visitors without an account may see these (login, password reset, API docs, health).
PUBLIC = {
    "login",
    "logout",
    "password_reset",
    "password_reset_done",
    "password_reset_confirm",
    "password_reset_complete",
    "admin:login",
    "admin:logout",
    "api:openapi-json",
    "api:openapi-view",
    "healthz",
    "healthz_root",
    "favicon",  # a redirect to the static icon, which is public anyway
    "highlight_css",
    # Public keys only: a verifier fetches them before it trusts anything (docs/agent-api.md).
    "api:signing_keys",
    "api:signing_root",
}

# --------------------------------------------------------------------------------------
# Hostile values


HUGE = "x" * 5000
HOSTILE_VALUES = [
    "..",
    "%2e%2e",
    "\x00",
    "a\x00b",
    HUGE,
    "ünïcødé-名前-🙂",
    "-1",
    "0",
    "99999999999999999999",
    "9223372036854775808",
    "2147483648",
    "00000000-0000-0000-0000-000000000000",
    "not-a-uuid",
    "../../etc/passwd",
    "' OR 1=1 --",
]

GARBAGE_QUERY = {
    "page": "-1",
    "p": "abc",
    "version": "..",
    "compare": "-1",
    "window": "1y",
    "after": "abc",
    "again": "not-a-uuid",
    "a": "x",
    "b": "99999999999999999999",
    "format": "garbage",
    "tool": "..",
    "status": "bogus",
    "sort": "-password",
    "language": "ruby",
    "integration": "../x",
    "person": "nobody-here",
    "via": "telepathy",
    "q": "%' OR 1=1 --",
    "o": "garbage",
    "e": "1",
    "next": "//evil.example/",
}
NUL_QUERY = {key: "\x00" for key in GARBAGE_QUERY} | {"q": "a\x00b", "after": "1\x00"}
HUGE_QUERY = {key: "9" * 5000 for key in GARBAGE_QUERY} | {"q": HUGE, "page": "9" * 400}
UNICODE_QUERY = {key: "名前🙂\u202e\ud7ff" for key in GARBAGE_QUERY}
QUERIES = {"garbage": GARBAGE_QUERY, "nul": NUL_QUERY, "huge": HUGE_QUERY, "unicode": UNICODE_QUERY}

# Field names every form of the site uses, so garbage reaches each form's validation.
FORM_FIELDS = [
    "name",
    "label",
    "description",
    "language",
    "toolmd",
    "toolmd_newline",
    "note",
    "publish",
    "base",
    "files-TOTAL_FORMS",
    "files-INITIAL_FORMS",
    "files-MIN_NUM_FORMS",
    "files-MAX_NUM_FORMS",
    "files-0-path",
    "files-0-content",
    "files-0-newline",
    "files-0-binary",
    "files-0-DELETE",
    "params",
    "query",
    "limit",
    "ratio",
    "exact",
    "strict",
    "mode",
    "api_key",
    "slug",
    "enabled",
    "revision",
    "custom_fields",
    "field_url",
    "secret_token",
    "clear_token",
    "confirm",
    "scopes",
    "next",
    "after",
    "a",
    "b",
    "username",
    "password",
    "password1",
    "password2",
    "old_password",
    "new_password1",
    "new_password2",
    "email",
    "action",
    "_selected_action",
    "select_across",
    "index",
    "groups",
    "is_superuser",
]


def garbage_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("../escape/TOOL.md", "---\nname: escape\n---\n")
        archive.writestr("evil/TOOL.md", "---\nname: evil\ndescription: \x00\n---\n")
        archive.writestr("evil/index.ts", b"\xff\xfe\x00")
    return buffer.getvalue()


def form_garbage() -> dict[str, Any]:
    """Every field with a value of the wrong kind, plus a file that is no zip."""
    data: dict[str, Any] = {name: "garbage" for name in FORM_FIELDS}
    data |= {
        "name": "..",
        "base": "abc",
        "revision": "-1",
        "files-TOTAL_FORMS": "-3",
        "files-INITIAL_FORMS": "abc",
        "files-0-path": "../../etc/passwd",
        "files-0-binary": "on",
        "params": "{not json",
        "raw-json": "1",
        "limit": "1e999",
        "ratio": "nan",
        "scopes": ["registry:read", "root"],
        "enabled": "maybe",
        "post": "yes",
        "_selected_action": "abc",
        "next": "https://evil.example/",
        "file": SimpleUploadedFile("tools.zip", b"PK\x03\x04 this is no zip"),
    }
    return data


def form_garbage_2() -> dict[str, Any]:
    """Management-form abuse, the "add a file" and "refresh" buttons, a hostile zip."""
    return {
        "add_file": "1",
        "_refresh": "1",
        "base": "99999999999999999999",
        "files-TOTAL_FORMS": "99999999999",
        "files-INITIAL_FORMS": "0",
        "files-MAX_NUM_FORMS": "-1",
        "files-0-path": "/etc/passwd",
        "files-1-path": "a/../../b",
        "toolmd": "---\nname: [\n",
        "custom_fields": "X secret\n\x00\nbad name here\n" + "Y " * 3000,
        "field_url": "javascript:alert(1)",
        "secret_token": "\r\n" * 10,
        "params": "[" * 3000,
        "after": "99999999999999999999999",
        "scopes": "",
        "confirm": "on",
        "file": SimpleUploadedFile("tools.zip", garbage_zip(), "application/zip"),
    }


def form_nul() -> dict[str, Any]:
    data: dict[str, Any] = {name: "\x00" for name in FORM_FIELDS}
    data |= {"toolmd": "---\nname: a\x00\n---\n", "name\x00": "x", "files-TOTAL_FORMS": "1\x00"}
    return data


def form_huge() -> dict[str, Any]:
    """Values far past every field's limit (max_length, TOOL.md and search caps)."""
    fields = ("name", "toolmd", "base", "files-0-path", "params", "slug", "custom_fields")
    return {name: "x" * 300_000 for name in fields} | {"raw-json": "1"}


def form_many() -> dict[str, Any]:
    # More than DATA_UPLOAD_MAX_NUMBER_FIELDS (1,000).
    return {f"field{i}": "x" for i in range(1200)}


# --------------------------------------------------------------------------------------
# Requests


@dataclass(frozen=True)
class Variant:
    name: str
    method: str
    make: Callable[[], dict[str, Any]] = dict  # extra keyword arguments for the client
    query: dict[str, str] | None = None
    csrf: str = ""  # "" (not enforced), "missing" or "bad"


HTMX = {"HX-Request": "true", "HX-Target": "tool-results", "HX-Current-URL": "http://[::1"}
HTMX_RESTORE = {
    "HX-Request": "true",
    "HX-Target": "run-results",
    "HX-History-Restore-Request": "true",
    "HX-Trigger": "\x7f",
}

V = {
    "get": Variant("get", "GET"),
    "get-htmx": Variant("get-htmx", "GET", lambda: {"headers": HTMX}),
    "get-htmx-restore": Variant("get-htmx-restore", "GET", lambda: {"headers": HTMX_RESTORE}),
    "head": Variant("head", "HEAD"),
    **{
        f"get-query-{name}": Variant(f"get-query-{name}", "GET", query=query)
        for name, query in QUERIES.items()
    },
    "post-empty": Variant("post-empty", "POST"),
    "post-form": Variant("post-form", "POST", lambda: {"data": form_garbage()}),
    "post-form-2": Variant("post-form-2", "POST", lambda: {"data": form_garbage_2()}),
    "post-form-htmx": Variant(
        "post-form-htmx", "POST", lambda: {"data": form_garbage(), "headers": HTMX}
    ),
    "post-json": Variant(
        "post-json",
        "POST",
        lambda: {
            "data": json.dumps({"name": [1], "params": {"query": 1}, "base": None}),
            "content_type": "application/json",
        },
    ),
    "post-bad-json": Variant(
        "post-bad-json",
        "POST",
        lambda: {"data": '{"params": [', "content_type": "application/json"},
    ),
    "post-urlencoded": Variant(
        "post-urlencoded",
        "POST",
        lambda: {
            "data": "name=%00&base=%ff%fe&toolmd=%&&&==&files-TOTAL_FORMS=1e3",
            "content_type": "application/x-www-form-urlencoded",
        },
    ),
    "post-nul": Variant("post-nul", "POST", lambda: {"data": form_nul()}),
    "post-huge": Variant("post-huge", "POST", lambda: {"data": form_huge()}),
    "post-many-fields": Variant("post-many-fields", "POST", lambda: {"data": form_many()}),
    "post-csrf-missing": Variant(
        "post-csrf-missing", "POST", lambda: {"data": form_garbage()}, csrf="missing"
    ),
    "post-csrf-bad": Variant(
        "post-csrf-bad",
        "POST",
        lambda: {"data": form_garbage(), "headers": {"X-CSRFToken": "\x00" * 32}},
        csrf="bad",
    ),
    "put": Variant("put", "PUT", lambda: {"data": "garbage", "content_type": "text/plain"}),
    "patch": Variant("patch", "PATCH", lambda: {"data": "{}", "content_type": "application/json"}),
    "delete": Variant("delete", "DELETE"),
    "options": Variant("options", "OPTIONS"),
}

EVERYTHING = tuple(V)
FORMS = (
    "get",
    "get-htmx",
    "get-query-garbage",
    "post-empty",
    "post-form",
    "post-form-2",
    "post-nul",
    "post-json",
    "post-form-htmx",
)
# What each visitor sends to every route with its real parameters. The superuser gets
# furthest (every console role and Django admin), so it sends everything.
CONSOLE_PLAN = {
    "anonymous": ("get", "get-htmx", "post-empty", "post-form", "post-json", "post-csrf-missing"),
    "nobody": ("get", "post-form"),
    "viewer": ("get", "get-htmx", "get-query-garbage", "post-form"),
    "developer": FORMS,
    "admin": ("get", "post-form", "post-form-2", "post-csrf-bad"),
    "superuser": EVERYTHING,
    "agent": ("get", "post-form"),
    "bad-bearer": ("get",),
}
ADMIN_SITE_PLAN = {
    "anonymous": ("get", "post-form"),
    "nobody": ("get",),
    "admin": ("get",),  # the console's admin role is not Django admin staff
    # Django admin has no htmx and one kind of form: fewer variants reach all of it.
    "superuser": (
        "get",
        "get-query-garbage",
        "get-query-nul",
        "post-empty",
        "post-form",
        "post-nul",
        "post-json",
        "post-urlencoded",
        "post-csrf-missing",
    ),
}
API_PLAN = {
    "anonymous": ("get", "post-form", "post-json"),
    "viewer": ("get",),
    "agent": EVERYTHING,
    "agent-readonly": ("get", "post-form", "post-json"),
    "revoked-agent": ("get",),
    "bad-bearer": ("get", "post-json"),
    "huge-bearer": ("get",),
}
# Other real objects for the same parameter (a queued run has no updates yet, a draft has
# no published version, a disabled tool is in no registry).
ALTERNATE_PLAN = {"superuser": ("get", "get-query-garbage", "post-form", "post-form-htmx")}
# With hostile path parameters: the visitors that get furthest into the views.
HOSTILE_PLAN = {
    "console": {"superuser": ("get", "post-form")},
    "admin": {"superuser": ("get",)},
    "api": {"agent": ("get", "post-json")},
}
# Django admin's object ids all go through the same code: fewer values suffice there.
ADMIN_HOSTILE_VALUES = ["..", "\x00", HUGE, "ünïcødé-名前-🙂", "-1", "99999999999999999999"]
CONVERTER_RE = {
    "int": re.compile(r"[0-9]+"),
    "uuid": re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
    "slug": re.compile(r"[-a-zA-Z0-9_]+"),
}


def hostile_values(converter: str) -> list[str]:
    """Every hostile value the converter lets through to the view, plus two it refuses
    (which fall through to other patterns or a 404)."""
    pattern = CONVERTER_RE.get(converter)
    if pattern is None:
        return HOSTILE_VALUES
    passing = [value for value in HOSTILE_VALUES if pattern.fullmatch(value)]
    refused = [value for value in HOSTILE_VALUES if not pattern.fullmatch(value)]
    return passing + refused[:2]


# Each Client builds its own handler, whose middleware (WhiteNoise, which scans the static
# files) takes most of a request's time to load: every client here shares one per mode.
_HANDLERS: dict[bool, Any] = {}


def new_client(*, enforce_csrf_checks: bool = False) -> Client:
    client = Client(raise_request_exception=False, enforce_csrf_checks=enforce_csrf_checks)
    client.handler = _HANDLERS.setdefault(enforce_csrf_checks, client.handler)
    return client


@dataclass
class World:
    users: dict[str, User | None]
    bearers: dict[str, str]
    values: dict[str, str]  # real value of each path parameter, by name
    api_values: dict[str, str]
    admin_ids: dict[str, str]  # admin model name -> an existing object's pk
    clients: dict[tuple[str, str], Client] = field(default_factory=dict)

    def client(self, visitor: str, csrf: str = "") -> Client:
        key = (visitor, csrf)
        if key not in self.clients:
            client = new_client(enforce_csrf_checks=bool(csrf))
            user = self.users.get(visitor)
            if user is not None:
                client.force_login(user)
            if csrf == "bad":
                # Malformed (wrong length and characters), and no control character:
                # Python 3.11.2 as Debian 12 patches it refuses those in a cookie.
                client.cookies["csrftoken"] = "%00not-a-token"
            self.clients[key] = client
        return self.clients[key]

    def alternates(self, route: Route) -> list[dict[str, str]]:
        real = self.real_values(route)
        params = {name for name, _ in route.converters}
        found = []
        if "run_id" in params:
            found.append(real | {"run_id": real["queued_run_id"]})
        if "name" in params and not route.is_admin:
            found += [real | {"name": name} for name in ("draft_only", "switched_off")]
        return found

    def real_values(self, route: Route) -> dict[str, str]:
        values = dict(self.api_values if route.is_api else self.values)
        if route.is_admin:
            model = route.template.split("/")[2] if route.template.count("/") > 2 else ""
            if model in self.admin_ids:
                values["object_id"] = self.admin_ids[model]
        if route.name in ("run_cancel", "api:run_cancel"):
            values["run_id"] = values["queued_run_id"]
        return values


def call(world: World, visitor: str, variant: Variant, path: str) -> Any:
    client = world.client(visitor, variant.csrf)
    kwargs = variant.make()
    headers = dict(kwargs.pop("headers", {}))
    bearer = world.bearers.get(visitor)
    if bearer is not None:
        headers["Authorization"] = bearer
    if variant.query is not None:
        path = path + "?" + urlencode(variant.query)
    method = getattr(client, variant.method.lower())
    if variant.method == "HEAD" or (variant.method in ("GET", "DELETE", "OPTIONS") and not kwargs):
        response = method(path, headers=headers)
    else:
        response = method(path, headers=headers, **kwargs)
    if getattr(response, "streaming", False):
        # Consuming it closes it (the test client closes non-streaming answers itself).
        b"".join(response.streaming_content)
    return response


def describe(visitor: str, variant: Variant, path: str, response) -> str:
    shown = path if len(path) < 200 else path[:200] + f"…({len(path)} chars)"
    text = f"{variant.method} {shown!r} as {visitor} ({variant.name}): {response.status_code}"
    exc_info = getattr(response, "exc_info", None)
    if exc_info:
        frames = traceback.extract_tb(exc_info[2])[-3:]
        where = " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames[::-1])
        text += f" {exc_info[0].__name__}: {str(exc_info[1])[:200]} at {where}"
    return text


def not_ready_report(route: Route, response) -> bool:
    """The health endpoint's 503 is its answer (no worker runs in these tests), not a fault."""
    if route.name != "api:health" or response.status_code != 503:
        return False
    return json.loads(response.content).get("ready") is False


def problems_with(route: Route, visitor: str, variant: Variant, path: str, response) -> list[str]:
    found = []
    status = response.status_code
    if not_ready_report(route, response):
        return found
    if status >= 500:
        found.append(describe(visitor, variant, path, response))
    anonymous = visitor in ("anonymous", "bad-bearer", "huge-bearer", "revoked-agent") or (
        visitor.startswith("agent") and not route.is_api
    )
    if anonymous and route.name not in PUBLIC and status < 500:
        location = response.get("Location", "")
        redirected_to_login = status in (301, 302) and "login" in location
        slash_added = status == 301 and location.rstrip("/").endswith(path.rstrip("/")[-20:])
        refused = status in (400, 401, 403, 404, 405)
        if not (redirected_to_login or slash_added or refused):
            found.append("anonymous got in: " + describe(visitor, variant, path, response))
    if route.is_api and status >= 400 and variant.method != "HEAD":
        try:
            body = json.loads(response.content)
        except ValueError:
            body = None
        if not (isinstance(body, dict) and {"error", "detail"} <= set(body)):
            found.append("not a JSON error: " + describe(visitor, variant, path, response))
    return found


# --------------------------------------------------------------------------------------
# The world: real objects for every path parameter

INPUTS = {
    "query": {"type": "string", "description": "What to look for."},
    "limit": {"type": "integer", "description": "At most this many.", "optional": True,
              "default": 10},
    "ratio": {"type": "number", "description": "A ratio.", "optional": True},
    "exact": {"type": "boolean", "description": "Exact only.", "optional": True,
              "default": False},
    "strict": {"type": "boolean", "description": "Unset, yes or no.", "optional": True},
    "mode": {"type": "enum", "values": "fast,thorough", "description": "How hard.",
             "optional": True, "default": "fast"},
    "api_key": {"type": "string", "description": "Overrides the integration.",
                "sensitive": True, "optional": True},
}  # fmt: skip


def finished_run(version: ToolVersion, actor: Actor, via: str, settings) -> tuple[Run, RunArtifact]:
    run = start.start_run(version, {"query": "cats"}, actor=actor, via=via, enqueue=False)
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.SUCCEEDED,
        result={"content": [{"type": "text", "text": "all good"}], "isError": False},
        isolation="process",
        exit_code=0,
        duration=0.5,
    )
    RunUpdate.objects.create(run=run, seq=1, content=[{"type": "text", "text": "half way"}])
    artifact = RunArtifact.objects.create(
        run=run, name="out/report.html", size=15, content=b"<h1>report</h1>"
    )
    return run, artifact


@pytest.fixture
def world(make_tool, nobody, viewer, developer, console_admin, settings, monkeypatch) -> World:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ALL_PROXY", CLOSED_PROXY)
    for name in ("NO_PROXY", "no_proxy"):  # the fake provider of some tests listens there
        monkeypatch.setenv(name, "127.0.0.1,localhost")
    ensure_groups()
    root = User.objects.create_superuser("root", "root@example.com", "pw-for-tests-only")

    integration = support.create(
        "searxng", values={"url": "http://127.0.0.1:9"}, secrets={"token": "tok-7Hq2Lm9P"}
    )
    make_tool("alpha", language="python", inputs=INPUTS, integrations=["searxng"])
    make_tool("alpha", language="python", inputs=INPUTS, integrations=["searxng"], body="# v2\n")
    alpha = make_tool("alpha", language="python", inputs=INPUTS, body="# v3\n", publish=False)
    make_tool("draft_only", publish=False)
    set_enabled(make_tool("switched_off"), False, actor=Actor.system())

    token, raw = AgentToken.issue("agent", ALL_SCOPES)
    _, readonly = AgentToken.issue("reader", ["registry:read"])
    revoked, revoked_raw = AgentToken.issue("gone", ALL_SCOPES)
    revoked.revoke()

    published = alpha.published_version
    run, artifact = finished_run(published, Actor(user=developer), RunVia.BROWSER, settings)
    queued = start.start_run(
        published, {"query": "dogs"}, actor=Actor(user=developer), via=RunVia.BROWSER, enqueue=False
    )
    api_run, api_artifact = finished_run(published, Actor(token=token), RunVia.API, settings)
    api_queued = start.start_run(
        published, {"query": "dogs"}, actor=Actor(token=token), via=RunVia.API, enqueue=False
    )

    check = CaseCheck.objects.create(
        tool=alpha, version=published, user=developer, via=RunVia.BROWSER,
        status=CheckStatus.FAILED, total=1, failed=1, publish_requested=True,
    )  # fmt: skip
    CaseRun.objects.create(case_check=check, position=0, name="finds", run=run, outcome="failed")

    common = {
        "check_id": str(check.pk),
        "position": "0",
        "name": "alpha",
        "number": "2",
        "type_slug": "searxng",
        "slug": "searxng",
        "pk": str(token.pk),
        "id": str(nobody.pk),
        "uidb64": urlsafe_base64_encode(force_bytes(nobody.pk)),
        "token": default_token_generator.make_token(nobody),
        "content_type_id": str(ContentType.objects.get_for_model(Tool).pk),
        "object_id": str(alpha.pk),
        "app_label": "tools_app",
        "url": "nowhere/",
        "rest": "v1/nowhere",
        "page": "mcp",
    }
    values = common | {
        "run_id": str(run.pk),
        "queued_run_id": str(queued.pk),
        "artifact_id": str(artifact.pk),
    }
    api_values = common | {
        "run_id": str(api_run.pk),
        "queued_run_id": str(api_queued.pk),
        "artifact_id": str(api_artifact.pk),
    }
    admin_ids = {
        "auditevent": AuditEvent.objects.first().pk,
        "tool": alpha.pk,
        "toolversion": published.pk,
        "integration": integration.pk,
        "integrationsecret": IntegrationSecret.objects.first().pk,
        "agenttoken": token.pk,
        "run": run.pk,
        "runupdate": RunUpdate.objects.first().pk,
        "runartifact": artifact.pk,
        "user": nobody.pk,
        "group": Group.objects.get(name=ADMIN).pk,
    }
    return World(
        users={
            "nobody": nobody,
            "viewer": viewer,
            "developer": developer,
            "admin": console_admin,
            "superuser": root,
        },
        bearers={
            "agent": f"Bearer {raw}",
            "agent-readonly": f"Bearer {readonly}",
            "revoked-agent": f"Bearer {revoked_raw}",
            "bad-bearer": "Bearer \x7f\x00 tc_",
            "huge-bearer": "Bearer tc_" + "x" * 8000,
        },
        values=values,
        api_values=api_values,
        admin_ids={model: str(pk) for model, pk in admin_ids.items()},
    )


# --------------------------------------------------------------------------------------
# The walk


def test_it_walks_every_url_pattern_of_the_site():
    names = {route.name for route in ROUTES}
    # Spot checks that the walk sees all four parts of the site.
    assert {"tool_edit", "run_artifact", "token_revoke", "integration_delete"} <= names
    assert {"api:tool_invoke", "api:run_artifact", "healthz"} <= names
    assert {"admin:tools_app_run_change", "admin:auth_user_password_change", "login"} <= names
    assert len(ROUTES) > 100


def plans(route: Route) -> tuple[dict, dict]:
    if route.is_api:
        return API_PLAN, HOSTILE_PLAN["api"]
    if route.is_admin:
        return ADMIN_SITE_PLAN, HOSTILE_PLAN["admin"]
    return CONSOLE_PLAN, HOSTILE_PLAN["console"]


def route_groups() -> list[tuple[str, list[Route]]]:
    """One test per route; Django admin's routes one test per model (its six routes run
    the same code for every model), with the delete page last, since a garbage POST there
    is a confirmed delete."""
    groups: dict[str, list[Route]] = {}
    for route in ROUTES:
        parts = route.template.split("/")
        model_route = route.is_admin and parts[1] in ("tools_app", "auth") and len(parts) > 3
        key = f"admin:{parts[1]}.{parts[2]}" if model_route else route.id
        groups.setdefault(key, []).append(route)
    for routes in groups.values():
        routes.sort(key=lambda route: route.name.endswith("_delete"))
    return list(groups.items())


ROUTE_GROUPS = route_groups()


@pytest.mark.parametrize("routes", [r for _, r in ROUTE_GROUPS], ids=[k for k, _ in ROUTE_GROUPS])
def test_it_never_answers_500(routes: list[Route], world: World):
    problems: list[str] = []
    counted = 0

    def send(route: Route, visitors: dict[str, tuple[str, ...]], values: dict[str, str]) -> None:
        nonlocal counted
        path = route.url(values)
        for visitor, variant_names in visitors.items():
            for name in variant_names:
                variant = V[name]
                response = call(world, visitor, variant, path)
                problems.extend(problems_with(route, visitor, variant, path, response))
                counted += 1

    for route in routes:
        plan, hostile_plan = plans(route)
        real = world.real_values(route)
        send(route, plan, real)
        for values in world.alternates(route):
            send(route, ALTERNATE_PLAN, values)
        for param, converter in route.converters:
            values = ADMIN_HOSTILE_VALUES if route.is_admin else hostile_values(converter)
            for value in values:
                send(route, hostile_plan, real | {param: value})

    assert counted
    assert not problems, f"{len(problems)} of {counted} requests failed:\n" + "\n".join(problems)


# --------------------------------------------------------------------------------------
# Django admin's lists with hostile query strings

ADMIN_QUERIES = [
    "o=99.-5.x",
    # Each ordering field costs Django admin work per column header: 3,000 of them cost
    # half a second per page, so the test sends a few hundred.
    "o=" + "1.-2." * 100 + "x",
    "q=" + "x" * 5000,
    "q=a%00b&o=1",
    "q=%ff%fe%ed%a0%80",
    "created_at__gte=notadate",
    "created_at__lt=2020-13-45",
    "created_at__gte=%00",
    "created_at__year=abc",
    "created_at__year=2020&created_at__month=13&created_at__day=99",
    "created_at__day=99999999999999999999&created_at__month=1&created_at__year=1",
    "created_at__year=99999",
    "created_at__year=0",
    "created_at__month=99999999999999999999",
    "created_at__week_day=%00",
    "e=1",
    "p=99999999999999999999",
    "all=&p=-1",
    "_to_field=password",
    "_popup=1&_to_field=%00",
    "status__exact=%00",
    "status__exact=" + "x" * 5000,
    "via__exact=bogus&status__exact=bogus",
    "tool__id__exact=abc",
    "tool__id__exact=99999999999999999999",
    "action__exact=%00&actor_kind__exact=%00&actor__exact=%00&target_type__exact=%00",
    "revoked_at__isempty=garbage",
    "revoked_at__isempty=%00",
    "language__exact=%00&enabled__exact=maybe",
    "type_slug__exact=%00&enabled__exact=2",
    "integration__id__exact=abc",
    "source__exact=%00",
    "is_staff__exact=x&is_superuser__exact=%00&is_active__exact=-1&groups__id__exact=abc",
    "password__startswith=x",
    "id__in=1,abc",
    "pk__gt=%00",
    "id__in=1,99999999999999999999",
    "scopes__contains=x",
    "values__has_key=%00",
    "params__query=%00",
    "manifest__name__icontains=x",
    "date_joined__year=99999&last_login__month=99999999999999999999",
    "size__gt=99999999999999999999999999",
    "seq__lt=-99999999999999999999",
    "x" * 3000 + "=1",
]
CHANGELISTS = [route for route in ROUTES if route.name.endswith("_changelist")]


def _applies(route: Route, query: str) -> bool:
    """A query filtering on a field goes to the lists whose model has that field (any
    other list refuses it the same way: the field does not exist)."""
    name = query.split("=")[0].split("__")[0]
    if name in ("o", "q", "e", "p", "all", "_to_field", "_popup", "id", "pk") or len(name) > 64:
        return True
    _, app_label, model_name, _ = route.template.split("/")
    try:
        apps.get_model(app_label, model_name)._meta.get_field(name)
    except FieldDoesNotExist:
        return False
    return True


def test_it_answers_hostile_admin_list_queries_without_500(world: World):
    problems = []
    counted = 0
    for route in CHANGELISTS:
        for query in filter(lambda query: _applies(route, query), ADMIN_QUERIES):
            path = route.url({}) + "?" + query
            response = world.client("superuser").get(path)
            counted += 1
            if response.status_code >= 500:
                problems.append(describe("superuser", V["get"], path, response))
    assert len(CHANGELISTS) >= 11 and counted > 200
    assert not problems, f"{len(problems)} of {counted} requests failed:\n" + "\n".join(problems)


# --------------------------------------------------------------------------------------
# Run pages: a garbage update number (the page's polling and cancel send one)


@pytest.mark.parametrize("kind", ["detail", "updates", "cancel"])
def test_it_reads_a_garbage_update_number_on_run_pages_as_zero(world: World, kind: str):
    queued, finished = world.values["queued_run_id"], world.values["run_id"]
    client = world.client("developer")
    htmx = {"HX-Request": "true"}
    if kind == "detail":  # a run without updates yet takes the number from the query
        response = client.get(f"/runs/{queued}/?after=abc")
    elif kind == "updates":
        response = client.get(f"/runs/{queued}/updates/?after=abc", headers=htmx)
    else:
        response = client.post(f"/runs/{finished}/cancel/", {"after": "abc"}, headers=htmx)
    assert response.status_code == 200, describe("developer", V["get"], kind, response)


# --------------------------------------------------------------------------------------
# Hostile values in the forms that change things: each gets a clear 4xx (or is saved
# as typed), never a 500.


def _edit_form(toolmd: str, base: str = "3", **extra: Any) -> dict[str, Any]:
    data = {
        "base": base,
        "toolmd": toolmd,
        "toolmd_newline": "lf",
        "note": "",
        "files-TOTAL_FORMS": "1",
        "files-INITIAL_FORMS": "1",
        "files-MIN_NUM_FORMS": "0",
        "files-MAX_NUM_FORMS": "1000",
        "files-0-path": "index.py",
        "files-0-content": "def execute(a, b, c, d):\n    return {'content': []}\n",
        "files-0-newline": "lf",
    }
    return data | extra


def _toolmd(description: str = "A tool.", extra: str = "") -> str:
    return f"---\nname: alpha\ndescription: {description}\nlanguage: python\n{extra}---\n\n# A\n"


EDIT_CASES = {
    "nul in TOOL.md": _edit_form(_toolmd("a\x00b")),
    "deep yaml flow": _edit_form(_toolmd("[" * 20_000)),
    "deep yaml block": _edit_form(
        _toolmd("x", "inputs:\n" + "".join(" " * i + "a:\n" for i in range(1, 3000)))
    ),
    "alias bomb": _edit_form(
        "---\nname: alpha\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a]\n"
        "description: *b\n---\n"
    ),
    "over 256 KiB": _edit_form(_toolmd("x") + "y" * 300_000),
    "frontmatter over 64 KiB": _edit_form(_toolmd("z" * 70_000)),
    "only dashes": _edit_form("---"),
    "empty TOOL.md": _edit_form(""),
    "not utf-8 in frontmatter": _edit_form(_toolmd("\udcff")),
    "huge version": _edit_form(_toolmd("x", "version: 99999999999999999999999\n")),
    "huge timeout": _edit_form(_toolmd("x", "timeout: 1e999\n")),
    "input spec oddities": _edit_form(
        _toolmd("x", "inputs:\n  a:\n    type: enum\n    values: ',,,'\n    description: d\n")
    ),
    "date key": _edit_form(_toolmd("x", "2020-01-01: 1\n? [a, b]\n: c\n")),
    "file path traversal": _edit_form(_toolmd(), **{"files-0-path": "../../etc/passwd"}),
    "file path absolute": _edit_form(_toolmd(), **{"files-0-path": "/etc/passwd"}),
    "file path windows": _edit_form(_toolmd(), **{"files-0-path": "C:\\x\\index.py"}),
    "file path huge": _edit_form(_toolmd(), **{"files-0-path": "a/" * 3000 + "b"}),
    "file path control": _edit_form(_toolmd(), **{"files-0-path": "a\x01\x7f\u202eb"}),
    "file path dot dirs": _edit_form(_toolmd(), **{"files-0-path": "./././index.py"}),
    "binary file unknown": _edit_form(
        _toolmd(), **{"files-0-binary": "on", "files-0-path": "x.bin"}
    ),
    "second TOOL.md": _edit_form(_toolmd(), **{"files-0-path": "TOOL.md"}),
    "base zero": _edit_form(_toolmd(), base="0"),
    "base old (conflict)": _edit_form(_toolmd("changed"), base="1"),
    "base in the future": _edit_form(_toolmd("changed"), base="4"),
    "base huge": _edit_form(_toolmd(), base="99999999999999999999"),
    "newline odd": _edit_form(_toolmd(), toolmd_newline="cr", **{"files-0-newline": "\x00"}),
    "too many files": _edit_form(_toolmd(), **{"files-TOTAL_FORMS": "5000"}),
    "initial above total": _edit_form(_toolmd(), **{"files-INITIAL_FORMS": "9"}),
    "publish as anyone": _edit_form(_toolmd("publish me"), publish="on"),
    "add file, huge total": _edit_form(_toolmd(), add_file="1", **{"files-TOTAL_FORMS": "9" * 30}),
    "file content not utf-8 entry": _edit_form(_toolmd(), **{"files-0-content": "\ud800"}),
}


def test_it_answers_hostile_tool_edits_with_a_clear_error(world: World):
    problems = []
    for url in ("/tools/alpha/edit/", "/tools/alpha/validate/"):
        for case, data in EDIT_CASES.items():
            # Admins' forms differ only in the publish box.
            for visitor in ("developer", "superuser") if "publish" in case else ("developer",):
                response = post(world, visitor, url, data)
                if response.status_code >= 500:
                    problems.append(f"{case}: " + describe(visitor, V["post-form"], url, response))
    assert not problems, "\n".join(problems)


def post(world: World, visitor: str, url: str, data: Any, headers: dict | None = None, **kw):
    """POST `data`; str values that UTF-8 cannot encode are sent as raw (invalid) bytes."""
    if isinstance(data, dict) and any(
        isinstance(v, str) and not _encodable(v) for v in data.values()
    ):
        body = "&".join(
            f"{quote(k)}={quote(v.encode('utf-8', 'surrogatepass'))}"
            if isinstance(v, str)
            else f"{quote(k)}={quote(str(v))}"
            for k, v in data.items()
        )
        kw["content_type"] = "application/x-www-form-urlencoded"
        data = body
    return world.client(visitor).post(url, data, headers=headers or {}, **kw)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


NEW_TOOL_CASES = [
    {"name": "..", "language": "python"},
    {"name": "new", "language": "python"},
    {"name": "alpha", "language": "python"},
    {"name": "x" * 5000, "language": "python"},
    {"name": "ok_name", "language": "ruby"},
    {"name": "ok_name", "language": "python", "label": "a\x00b"},
    {"name": "ok_name2", "language": "bash", "label": "a: b\n---\nname: evil"},
    {"name": "ok_name3", "language": "typescript", "description": "&a [*a]"},
    {"name": "ok_name4", "language": "javascript", "description": "x" * 2001},
    {"name": "ok_name5", "language": "python", "description": "'\"\\\u2028\u2029\x85\ufeff"},
    {
        "name": "ok_name6",
        "language": "python",
        "label": "\ud800",
        "description": "!!python/object:os.system",
    },
    {"name": "ok_name7", "language": "python", "description": "{{ settings.SECRET_KEY }} %}"},
]


def test_it_answers_hostile_new_tools_with_a_clear_error(world: World):
    problems = []
    for data in NEW_TOOL_CASES:
        response = post(world, "developer", "/tools/-/new/", data)
        if response.status_code >= 500:
            problems.append(describe("developer", V["post-form"], f"{data}"[:200], response))
    assert not problems, "\n".join(problems)


def _zip(entries: dict[str, bytes | str], compression: int = zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _valid_tool(name: str) -> dict[str, str]:
    return {
        f"{name}/TOOL.md": f"---\nname: {name}\ndescription: d\nlanguage: bash\n---\n",
        f"{name}/index.sh": "#!/bin/bash\necho ok\n",
    }


def import_cases() -> dict[str, bytes]:
    """Built when the test runs: the bomb alone is 30 MB before compression."""
    return {
        "empty file": b"",
        "not a zip": b"PK\x05\x06" + b"\x00" * 18,
        "truncated zip": _zip(_valid_tool("trunc"))[:-30],
        "traversal": _zip({"../evil/TOOL.md": "x", "/abs/TOOL.md": "y", "ok/../../z": "z"}),
        "nul in a name": _zip({"a\x00b/TOOL.md": "x"}),
        "backslashes": _zip({"win\\TOOL.md": "x", "win\\index.sh": "y"}),
        "bomb": _zip({"bomb/TOOL.md": "---\n" + "a" * 30_000_000}, zipfile.ZIP_DEFLATED),
        "nul in TOOL.md": _zip({"nully/TOOL.md": "---\nname: nully\ndescription: \x00\n---\n"}),
        "invalid utf-8": _zip({"bad/TOOL.md": b"---\nname: bad\xff\xfe\n---\n"}),
        "many entries": _zip({f"many/f{i}.txt": "x" for i in range(3000)}),
        "a zip in a zip": _zip({"inner.zip": _zip(_valid_tool("inner"))}),
        "duplicate names": _zip(_valid_tool("dup") | {"dup/index.sh ": "x"}),
        "upper-case folder": _zip(_valid_tool("Upper")),
        "valid": _zip(_valid_tool("imported_ok")),
    }


@pytest.mark.parametrize("visitor", ["developer", "superuser"])
def test_it_answers_hostile_imports_with_a_clear_error(world: World, visitor: str):
    problems = []
    for case, payload in import_cases().items():
        upload = SimpleUploadedFile("tools.zip", payload, "application/zip")
        response = post(world, visitor, "/tools/-/import/", {"file": upload, "publish": "on"})
        if response.status_code >= 500:
            problems.append(
                f"{case}: " + describe(visitor, V["post-form"], "/tools/-/import/", response)
            )
    assert not problems, "\n".join(problems)


fake_provider = support.fake_provider
PROVIDER = "{provider}"  # the fake provider's URL, filled in by the test
INTEGRATION_CASES = [
    {"slug": "..", "field_url": PROVIDER},
    {"slug": "a" * 65, "field_url": PROVIDER},
    {"slug": "UPPER", "field_url": PROVIDER},
    {"slug": "ünï", "field_url": PROVIDER},
    {"slug": "searxng", "field_url": PROVIDER},
    {"slug": "s2", "field_url": "javascript:alert(1)"},
    {"slug": "s3", "field_url": "http://[::1"},
    {"slug": "s4", "field_url": "http://" + "a" * 5000 + ".example"},
    {"slug": "s5", "field_url": "http://127.0.0.1:99999"},
    {"slug": "s6", "field_url": PROVIDER + "/\ud800/ a b"},
    {"slug": "s7", "field_url": "http://user:pw@127.0.0.1:9/%zz", "secret_token": "a\nb"},
    {"slug": "s7b", "field_url": PROVIDER, "secret_token": "a\r\nX-Injected: 1"},
    {"slug": "s7c", "field_url": PROVIDER, "secret_token": "pässwörd"},
    {"slug": "s8", "field_url": PROVIDER, "secret_token": "x" * 100_000},
    {"slug": "s9", "field_url": PROVIDER, "secret_token": "\ud800\udfff"},
    {"slug": "s10", "field_url": PROVIDER, "label": "x" * 5000, "enabled": "x"},
    {"slug": "s11", "field_url": PROVIDER, "clear_token": "on", "secret_token": "t"},
    {"slug": "s12", "field_url": " ", "secret_token": " "},
]
CUSTOM_CASES = [
    {"slug": "c1", "custom_fields": "NAME secret required\nNAME"},
    {"slug": "c2", "custom_fields": "1BAD\nlower\nA-B\nPATH\nLD_PRELOAD secret"},
    {"slug": "c3", "custom_fields": "A " + "secret " * 1000},
    {"slug": "c4", "custom_fields": "\n".join(f"V{i} secret" for i in range(1000))},
    {"slug": "c5", "custom_fields": "X" * 5000},
    {"slug": "c6", "custom_fields": "TOKEN secret\r\nURL url required", "secret_TOKEN": "\ud800"},
    {"slug": "c7", "custom_fields": "TOKEN secret", "secret_TOKEN": "t", "clear_TOKEN": "on"},
]


def test_it_answers_hostile_integration_forms_with_a_clear_error(world: World, fake_provider):
    problems = []
    provider = fake_provider.url
    urls = [
        ("/integrations/new/searxng/", INTEGRATION_CASES),
        ("/integrations/new/searxng/test/", INTEGRATION_CASES),
        ("/integrations/searxng/test/", INTEGRATION_CASES[5:]),
        ("/integrations/new/custom/", CUSTOM_CASES),
        ("/integrations/new/custom/test/", CUSTOM_CASES),
    ]
    for url, cases in urls:
        for case in cases:
            data = {key: value.replace(PROVIDER, provider) for key, value in case.items()}
            # Only the connection test answers htmx differently (a partial).
            headers = {"HX-Request": "true"} if url.endswith("/new/searxng/test/") else {}
            response = post(world, "superuser", url, data, headers)
            if response.status_code >= 500:
                problems.append(describe("superuser", V["post-form"], url, response))
    for revision in ("abc", "-1", "99999999999999999999", "1"):
        for case in INTEGRATION_CASES[5:10]:
            data = {key: value.replace(PROVIDER, provider) for key, value in case.items()}
            response = post(
                world, "superuser", "/integrations/searxng/edit/", data | {"revision": revision}
            )
            if response.status_code >= 500:
                problems.append(describe("superuser", V["post-form"], "edit", response))
    assert not problems, "\n".join(problems)


def test_it_answers_hostile_tokens_and_rollbacks_with_a_clear_error(world: World):
    problems = []
    cases = [
        ("/tokens/new/", {"name": "a\x00b", "scopes": ALL_SCOPES}),
        ("/tokens/new/", {"name": "a\x1fb\u202e", "scopes": ALL_SCOPES}),
        ("/tokens/new/", {"name": "x" * 5000, "scopes": ["nonsense"]}),
        ("/tokens/new/", {"name": "ok", "scopes": ["registry:read"] * 1000}),
        ("/tokens/new/", {"name": "\ud800", "scopes": "registry:read"}),
        ("/tools/alpha/rollback/1/", {"base": "abc"}),
        ("/tools/alpha/rollback/1/", {"base": "99999999999999999999"}),
        ("/tools/alpha/rollback/1/", {"base": "1", "next": "http://evil.example/"}),
        ("/tools/alpha/rollback/1/", {"base": "3", "next": "\x00//\\evil"}),
        ("/tools/alpha/publish/3/", {"next": "javascript:alert(1)"}),
        ("/integrations/searxng/disable/", {"next": "list\x00"}),
        ("/integrations/searxng/delete/", {"confirm": "\x00"}),
    ]
    for url, data in cases:
        for headers in ({}, {"HX-Request": "true"}):
            response = post(world, "superuser", url, data, headers)
            if response.status_code >= 500:
                problems.append(describe("superuser", V["post-form"], url, response))
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------------------
# The run form and the invoke endpoint: hostile params


DEEP = "[" * 100_000 + "]" * 100_000
RAW_PARAMS = {
    "nul in a value": '{"query": "a\\u0000b"}',
    "nul in a key": '{"query": "a", "x\\u0000": 1}',
    "lone surrogate": '{"query": "\\ud800"}',
    "deep nesting": '{"query": ' + DEEP + "}",
    # Past the nesting cap (64, tools_app/lib/nesting.py), yet well inside the interpreter's
    # recursion limit: refused by the cap with its path, on both paths alike.
    "moderate nesting": '{"query": "a", "ratio": ' + "[" * 500 + "]" * 500 + "}",
    "at the cap": '{"query": "a", "extra": ' + "[" * 63 + "]" * 63 + "}",
    "NaN": '{"query": "a", "ratio": NaN}',
    "Infinity": '{"query": "a", "ratio": Infinity}',
    "huge float": '{"query": "a", "ratio": 1e999}',
    "huge int": '{"query": "a", "limit": ' + "9" * 5000 + "}",
    "big int": '{"query": "a", "limit": 123456789012345678901234567890}',
    "negative zero": '{"query": "a", "ratio": -0.0, "limit": -0}',
    "duplicate keys": '{"query": "a", "query": "b"}',
    "array": "[1, 2]",
    "string": '"params"',
    "empty": "",
    "not json": "{",
}


def _raw_form(params: str) -> dict[str, str]:
    return {"raw-json": "1", "params": params}


# What each hostile form gets: the error shown under it (its start), or, where the input
# is acceptable after all, the params of the run it starts.
RAW_EXPECTED: dict[str, str | dict] = {
    "nul in a value": "query: may not contain NUL characters",
    "nul in a key": "params: a name may not contain NUL characters",
    "lone surrogate": "query: is not valid Unicode (it holds an unpaired surrogate)",
    "deep nesting": "params.query" + "[0]" * 63 + ": nested deeper than 64 levels",
    "moderate nesting": "params.ratio" + "[0]" * 63 + ": nested deeper than 64 levels",
    "at the cap": "extra: unknown parameter",
    "NaN": "ratio: must be a finite number",
    "Infinity": "ratio: must be a finite number",
    "huge float": "ratio: must be a finite number",
    "huge int": "Not usable JSON: a number is too long or the nesting is too deep.",
    "big int": {"query": "a", "limit": 123456789012345678901234567890},
    "negative zero": {"query": "a", "ratio": -0.0, "limit": 0},
    "duplicate keys": {"query": "b"},  # JSON's rule: the last one wins
    "array": 'The params must be a JSON object: {"name": value}.',
    "string": 'The params must be a JSON object: {"name": value}.',
    "empty": "query: is required",
    "not json": "Not valid JSON: Expecting property name enclosed in double quotes",
}
RUN_FORM_CASES: dict[str, tuple[dict, str | dict]] = {
    "nul": ({"query": "a\x00b"}, "Null characters are not allowed."),
    "huge integer": ({"query": "a", "limit": "9" * 5000}, "Enter a whole number."),
    "float overflow": ({"query": "a", "ratio": "1e999"}, "Enter a number."),
    "nan": ({"query": "a", "ratio": "nan"}, "Enter a number."),
    "enum outside values": ({"query": "a", "mode": "\x00"}, "Select a valid choice."),
    # A checkbox sent with any value is ticked; an unknown yes/no/unset answer is unset.
    "boolean garbage": (
        {"query": "a", "exact": "\x00", "strict": "maybe"},
        {"query": "a", "exact": True},
    ),
    # The API refuses "\ud800" with a 422: the browser's form must not run it either.
    "surrogate": ({"query": "\ud800"}, "Not valid Unicode"),
    "raw: surrogate bytes": (
        {"raw-json": "1", "params": '{"query": "\ud800"}'},
        "Not valid Unicode",
    ),
    **{f"raw: {name}": (_raw_form(text), RAW_EXPECTED[name]) for name, text in RAW_PARAMS.items()},
}


@pytest.mark.parametrize("case", list(RUN_FORM_CASES))
def test_it_answers_hostile_run_forms_with_a_clear_error(world: World, case: str):
    data, expected = RUN_FORM_CASES[case]
    before = list(Run.objects.values_list("pk", flat=True))

    response = post(world, "developer", "/tools/alpha/run/", data)

    started = Run.objects.exclude(pk__in=before)
    if isinstance(expected, dict):
        assert response.status_code == 302, describe("developer", V["post-form"], case, response)
        params = started.get().params
        assert params | expected == params, params
        return
    assert response.status_code == 400, describe("developer", V["post-form"], case, response)
    assert not started.exists()
    errors = form_errors(response)
    assert any(error.startswith(expected) for error in errors), errors


def form_errors(response) -> list[str]:
    """The error messages a person reads under the run form's fields."""
    page = response.content.decode()
    return [html.unescape(e) for e in re.findall(r'<p class="error"[^>]*>(.*?)</p>', page, re.S)]


# The same params from the browser (the raw JSON mode, and a field holding a lone
# surrogate) and from the API: (browser form, the API's params JSON).
AGREEMENT_CASES: dict[str, tuple[dict[str, str], str]] = {
    **{f"raw: {name}": (_raw_form(text), text or "null") for name, text in RAW_PARAMS.items()},
    "field: surrogate": ({"query": "\ud800"}, '{"query": "\\ud800"}'),
    "field: nul": ({"query": "a\x00b"}, '{"query": "a\\u0000b"}'),
    "field: fine": ({"query": "a", "limit": "3"}, '{"query": "a", "limit": 3}'),
}


@pytest.mark.parametrize("case", list(AGREEMENT_CASES))
def test_it_refuses_in_the_browser_what_the_api_refuses(world: World, case: str):
    """A person and an agent sending the same params get the same answer: both start the
    same run, or neither does and the page says what the API's 422 says."""
    form, params = AGREEMENT_CASES[case]
    before = set(Run.objects.values_list("pk", flat=True))
    browser = post(world, "developer", "/tools/alpha/run/", form)
    by_browser = list(Run.objects.exclude(pk__in=before))
    before |= {run.pk for run in by_browser}
    api = new_client().post(
        "/api/v1/tools/alpha/invoke",
        '{"params": ' + params + "}",
        content_type="application/json",
        headers={"Authorization": world.bearers["agent"]},
    )
    by_api = list(Run.objects.exclude(pk__in=before))

    if api.status_code == 202:
        assert browser.status_code == 302, (case, form_errors(browser))
        assert [run.params for run in by_browser] == [run.params for run in by_api]
        return
    assert browser.status_code == 400 and not by_browser, case
    assert api.status_code in (400, 422) and not by_api, api.content
    errors = form_errors(browser)
    detail = api.json()["detail"]
    if api.status_code == 400 and isinstance(detail, list):  # past the nesting cap
        assert detail[0] in errors, (detail, errors)
    elif api.status_code == 400:  # no JSON the API can read: the page says why it cannot
        assert any(e.startswith(("Not valid JSON", "Not usable JSON")) for e in errors), errors
    elif detail[0].startswith("params: must be an object"):
        assert any(e.startswith("The params must be a JSON object") for e in errors), errors
    elif case.startswith("field: "):  # the field's own wording, about the same problem
        assert errors and detail, (errors, detail)
    else:
        assert detail[0] in errors, (detail, errors)


INVOKE_BODIES = {
    **{
        f"params: {name}": '{"params": ' + (text or "null") + "}"
        for name, text in RAW_PARAMS.items()
    },
    "deep body": DEEP,
    "not json": "{",
    "empty": "",
    "null": "null",
    "array": "[]",
    "params a string": '{"params": "x"}',
    "version a float": '{"params": {"query": "a"}, "version": 1.5}',
    "version huge": '{"params": {"query": "a"}, "version": ' + "9" * 400 + "}",
    "version negative": '{"params": {"query": "a"}, "version": -1}',
    "version infinite": '{"params": {"query": "a"}, "version": Infinity}',
    "version a string": '{"params": {"query": "a"}, "version": "2"}',
    "version true": '{"params": {"query": "a"}, "version": true}',
    "version of a draft": '{"params": {"query": "a"}, "version": 3}',
    "version nul": '{"params": {"query": "a"}, "version": "\\u0000"}',
}


@pytest.mark.parametrize(
    "content_type", ["application/json", "text/plain", "application/x-www-form-urlencoded"]
)
def test_it_answers_hostile_invoke_bodies_with_json_errors(world: World, content_type: str):
    problems = []
    client = new_client()
    headers = {"Authorization": world.bearers["agent"]}
    for case, body in INVOKE_BODIES.items():
        for path in ("/api/v1/tools/alpha/invoke", "/api/v1/tools/draft_only/invoke"):
            response = client.post(path, body, content_type=content_type, headers=headers)
            if response.status_code >= 500:
                problems.append(f"{case}: " + describe("agent", V["post-json"], path, response))
            elif response.status_code >= 400:
                body_json = response.json()
                if not {"error", "detail"} <= set(body_json):
                    problems.append(f"{case}: not a JSON error: {body_json}")
    raw = b'{"params": {"query": "\xff\xfe"}}'
    response = client.post(
        "/api/v1/tools/alpha/invoke", raw, content_type=content_type, headers=headers
    )
    if response.status_code >= 500:
        problems.append("invalid utf-8: " + describe("agent", V["post-json"], "invoke", response))
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------------------
# The agent API, fuzzed from its own OpenAPI document (schemathesis, through WSGI)

# Per strategy: positive and negative data, with random and with real path parameters.
FUZZ_EXAMPLES = 20


@pytest.fixture
def wsgi_app():
    """The real WSGI application, called in this thread. Like Django's test client, keep
    the test's database connection open across requests (request_started/finished close
    it otherwise, and with it the test's transaction)."""
    from django.core.signals import request_finished, request_started
    from django.core.wsgi import get_wsgi_application
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def test_it_fuzzes_the_agent_api_without_a_500(world: World, wsgi_app):
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode

    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", wsgi_app)
    auth = {"Authorization": world.bearers["agent"]}
    real = {
        "name": "alpha",
        "number": 2,
        "run_id": world.api_values["run_id"],
        "artifact_id": int(world.api_values["artifact_id"]),
    }
    queued = real | {"run_id": world.api_values["queued_run_id"]}
    problems: list[str] = []
    operations = 0

    def check(case, response) -> None:
        where = f"{case.method} {case.formatted_path} {case.query or ''} {str(case.body)[:100]}"
        if case.path.endswith("/health") and response.status_code == 503:
            # Not ready (no worker in these tests): the health report is the answer.
            assert json.loads(response.content)["ready"] is False
            return
        if response.status_code >= 500:
            problems.append(f"{response.status_code} for {where}: {response.content[:300]!r}")
        elif response.status_code >= 400:
            try:
                body = json.loads(response.content)
            except ValueError:
                body = None
            if not (isinstance(body, dict) and {"error", "detail"} <= set(body)):
                problems.append(f"not a JSON error for {where}: {response.content[:300]!r}")

    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        params = {p.name for p in operation.path_parameters}
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            strategies = [operation.as_strategy(generation_mode=mode)]
            if params:  # also with real objects, to get past the 404s
                known = queued if operation.path.endswith("/cancel") else real
                fixed = {name: known[name] for name in params if name in known}
                strategies.append(
                    operation.as_strategy(generation_mode=mode, path_parameters=fixed)
                )
            for strategy in strategies:

                @given(case=strategy)
                @settings(
                    max_examples=FUZZ_EXAMPLES,
                    deadline=None,
                    database=None,
                    derandomize=True,
                    phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=list(HealthCheck),
                )
                def fuzz(case) -> None:
                    check(case, case.call(headers=auth))

                try:
                    fuzz()
                except Unsatisfiable:
                    # An operation without parameters or body (GET /health) has nothing
                    # to make invalid.
                    assert mode == GenerationMode.NEGATIVE, operation.path

    assert operations >= 9
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(sorted(set(problems))[:50])


# --------------------------------------------------------------------------------------
# The fixes, each asserted on every database (PostgreSQL alone turned some into 500s)


def test_it_refuses_nul_and_unpaired_surrogates_in_params_with_a_422(world: World):
    client = new_client()
    headers = {"Authorization": world.bearers["agent"]}
    bodies = {
        "params.query: may not contain NUL": '{"params": {"query": "a\\u0000b"}}',
        "params.query: is not valid Unicode": '{"params": {"query": "\\ud800"}}',
        "params: a name may not contain NUL": '{"params": {"query": "a", "x\\u0000": 1}}',
    }
    for expected, body in bodies.items():
        response = client.post(
            "/api/v1/tools/alpha/invoke", body, content_type="application/json", headers=headers
        )
        assert response.status_code == 422, (expected, response.content)
        detail = " ".join(response.json()["detail"])
        assert expected.split(": ", 1)[1] in detail, (expected, detail)
    assert Run.objects.filter(via=RunVia.API).count() == 2  # the world's two, no more


def test_it_answers_other_methods_on_the_api_schema_and_docs_with_json(world: World):
    client = new_client(enforce_csrf_checks=True)
    for path in ("/api/openapi.json", "/api/docs", "/api/"):
        response = client.post(path, {"a": "b"})
        assert response.status_code == 405, path
        assert response.json()["error"] == "method not allowed"
        assert response["Allow"] == "GET, HEAD"
    assert client.get("/api/openapi.json").json()["openapi"].startswith("3.")


def test_it_reports_a_secret_http_headers_cannot_carry_instead_of_failing(
    world: World, fake_provider
):
    response = world.client("superuser").post(
        "/integrations/new/searxng/test/",
        {"field_url": fake_provider.url, "secret_token": "pässwörd"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "HTTP headers cannot carry" in page and "pässwörd" not in page
    assert not fake_provider.seen  # nothing was sent


def test_it_answers_out_of_range_admin_date_filters_with_the_error_flag(world: World):
    client = world.client("superuser")
    for query in (
        "created_at__year=99999",
        "created_at__year=1&created_at__month=1&created_at__day=99999999999999999999",
    ):
        response = client.get(f"/admin/tools_app/auditevent/?{query}")
        assert response.status_code == 302, query
        assert response["Location"].endswith("?e=1")
