"""MCP (Streamable HTTP) over the registry and the run path, at /mcp (docs/mcp.md).

Built on the official `mcp` SDK's low-level Server and session manager; console/asgi.py
mounts `asgi_app` next to Django. Each HTTP request to /mcp carries an agent token
(`Authorization: Bearer ...`, the API's tokens: hashed, scoped, revocable); `tools/list`
needs `registry:read`, `tools/call` needs `tools:invoke`.

A call goes through tools_app.runs (start.py, execute.py) exactly like the API's invoke
(run record with via=mcp, Celery, redaction, secret policy); this module then follows the run
in the database: each stored update becomes a `notifications/progress` when the client sent a
progress token (with the tool's own progress/total when it sent them), and the run's
result becomes the CallToolResult. When the client cancels
(`notifications/cancelled`, or closing the request's stream) the SDK cancels the handler,
which cancels the run: the worker stops the tool and kills its process group.

The session manager runs stateless: no request depends on an earlier one reaching the
same web worker, so any number of gunicorn workers serve /mcp. Handshake-era clients
cancel with a separate `notifications/cancelled` POST, which may land in another worker
than the call: each call in flight is noted as a file in STATE_DIR/mcp-calls (shared by
the workers of one host), and the notification cancels the runs noted for its token and
request id.

Signed versions (docs/mcp.md#signatures-and-pins): each listed tool carries its digest and
signature envelope in `_meta`; a tool whose stored rows no longer verify
(catalog/integrity.py) is left out and its calls refused, and a pinned token lists and
calls only the digests approved for it (catalog/pins.py).

Every database access runs in a worker thread (Django's ORM is synchronous)."""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import mcp_types as types
from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import close_old_connections
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types.version import LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from tools_app.api import auth
from tools_app.api.common import signature_meta
from tools_app.api.limits import MAX_PARAMS_BYTES, params_size
from tools_app.audit import Actor
from tools_app.catalog import integrity, pins
from tools_app.lib import nesting
from tools_app.manifest import schema, toolmd
from tools_app.models import Run, RunUpdate, Tool
from tools_app.models.runs import FINISHED, RunVia
from tools_app.models.tokens import Scope
from tools_app.runs import cancel as run_cancel
from tools_app.runs import setup
from tools_app.runs import start as run_start

logger = logging.getLogger("tools_app.mcp")

T = TypeVar("T")

# JSON-RPC error codes for refusals the SDK has no name for (the server range).
MISSING_SCOPE = -32001
# Following a run: the database is asked after FIRST seconds, then each pause GROWTH
# times the last, up to MAX (the REST long poll's rhythm, so both paths answer alike).
POLL_FIRST = 0.002
POLL_GROWTH = 1.1
POLL_MAX = 0.1
# Annotation keys a TOOL.md may set under `annotations:` (an unknown top-level key the
# parser keeps in `extra`); anything else there is ignored.
HINTS = toolmd.ANNOTATION_HINTS

# The agent token of the HTTP request being served; the ASGI wrapper below sets it and
# the SDK runs each handler in the context of the request that carried its message.
current_token: contextvars.ContextVar = contextvars.ContextVar("mcp_token", default=None)
current_ip: contextvars.ContextVar = contextvars.ContextVar("mcp_ip", default=None)


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run ORM code in a worker thread, with Django's per-request connection hygiene
    (CONN_MAX_AGE, broken connections) as a WSGI request would get it."""

    def call() -> T:
        close_old_connections()
        try:
            return fn(*args)
        finally:
            close_old_connections()

    return await anyio.to_thread.run_sync(call)


def _require(scope: str) -> Any:
    token = current_token.get()
    if token is None:  # the ASGI wrapper refuses such requests; never reached
        raise MCPError(MISSING_SCOPE, "missing token")
    if not token.has_scope(scope):
        raise MCPError(MISSING_SCOPE, f"this token lacks the '{scope}' scope", {"scope": scope})
    return token


# --------------------------------------------------------------------------------------
# tools/list


def mcp_tool(manifest: toolmd.Manifest, meta: dict[str, Any] | None = None) -> types.Tool:
    """A registry entry in the mcp format with `meta` as its `_meta` (common.signature_meta),
    with annotations from the manifest."""
    entry = schema.tool_entry(manifest, fmt="mcp", extra=meta)
    entry["annotations"] = annotations(manifest)
    return types.Tool.model_validate(entry)


def annotations(manifest: toolmd.Manifest) -> dict[str, Any]:
    """`network: false` means the tool cannot reach the outside world (openWorldHint
    false); other hints only where the TOOL.md states them under `annotations:`."""
    hints: dict[str, Any] = {"title": manifest.label, "openWorldHint": manifest.network}
    declared = manifest.extra.get("annotations")
    if isinstance(declared, dict):
        for key in HINTS:
            if isinstance(declared.get(key), bool):
                hints[key] = declared[key]
        if not manifest.network:
            hints["openWorldHint"] = False  # a stated hint never contradicts the sandbox
    return hints


# (seals key, its tools with their digests): building 1,000 Tool models is most of a
# tools/list. The key is catalog/integrity.py's fingerprint of the stored rows, not the
# registry's revision: a database edit that leaves the revision alone changes it, and the
# edited tool drops out of the list.
_listed: tuple[Any, list[tuple[types.Tool, str]]] = (None, [])


def list_published(token: Any = None) -> list[types.Tool]:
    """The tools that verify; for a pinned token, those approved for it."""
    global _listed
    sealed = integrity.seals()
    listed = _listed
    if listed[0] != sealed.key:
        listed = _build_list()
        _listed = listed
    return [tool for tool, digest in listed[1] if pins.refusal(token, tool.name, digest) is None]


def _build_list() -> tuple[Any, list[tuple[types.Tool, str]]]:
    """(the seals key of what was read, the tools that verify with their digests)."""
    sealed, verified = integrity.verified_versions(
        "published_version__manifest", "published_version__sha256", "published_version__signature"
    )
    tools = []
    for _name, seal, (manifest, sha, signature) in verified:
        meta = signature_meta(sha, signature, seal.digest)
        tools.append((mcp_tool(toolmd.Manifest.from_dict(manifest), meta=meta), seal.digest))
    return sealed.key, tools


async def on_list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
    token = _require(Scope.REGISTRY_READ)
    return types.ListToolsResult(tools=await in_thread(list_published, token))


# --------------------------------------------------------------------------------------
# tools/call


class Refused(Exception):
    """A call of a tool this token may not run now: an error result, so the model sees
    why (a protocol error would read as a broken server)."""


def start(name: str, arguments: dict[str, Any], token: Any, ip: str | None) -> Run:
    # The name is checked before any query (PostgreSQL refuses NUL bytes in one).
    tool = None
    if toolmd.NAME_RE.fullmatch(name):
        tool = Tool.objects.published().select_related("published_version").filter(name=name)
        tool = tool.first()
    if tool is None or tool.published_version is None:
        raise MCPError(types.INVALID_PARAMS, f"no published tool is named {name[:100]!r}")
    version = tool.published_version
    version.tool = tool
    check_arguments(version, arguments)
    # Checked here, not only from the (memoized) list: a database edit a moment ago is
    # refused before any run exists. The worker checks again before it runs the tool.
    seal = integrity.seal_of(version)
    if not seal.ok:
        raise Refused(
            f"Tool {tool.name} is refused: its stored version {version.number} does not "
            f"match its signature ({'; '.join(seal.problems)}). An admin must publish it "
            "again."
        )
    refused = pins.refusal(token, tool.name, seal.digest)
    if refused is not None:
        raise Refused(f"tool_not_approved: {refused.message}.")
    return run_start.start_run(
        tool.published_version, arguments, actor=Actor(token=token, ip=ip), via=RunVia.MCP
    )


def check_arguments(version: Any, arguments: dict[str, Any]) -> None:
    """The REST API's limits on params, as protocol errors (invalid params): the nesting
    cap, then 1 MiB of JSON (file bytes not counted), before any run exists."""
    try:
        nesting.check(arguments, "params")
    except nesting.TooDeep as exc:
        raise MCPError(types.INVALID_PARAMS, str(exc), {"path": exc.path}) from None
    size = params_size(setup.manifest_of(version), arguments)
    if size > MAX_PARAMS_BYTES:
        message = f"the arguments are {size} bytes of JSON; the limit is {MAX_PARAMS_BYTES} bytes"
        raise MCPError(types.INVALID_PARAMS, message, {"limit": MAX_PARAMS_BYTES, "size": size})


Update = tuple[int, list, float | None, float | None]  # seq, content, progress, total


def news(run_id: Any, after: int) -> tuple[str, dict | None, list[Update]]:
    """(status, result once finished, updates after `after`), updates read after the
    status so a finished run comes with every update."""
    status, result = Run.objects.filter(pk=run_id).values_list("status", "result").get()
    updates = list(
        RunUpdate.objects.filter(run_id=run_id, seq__gt=after)
        .order_by("seq")
        .values_list("seq", "content", "progress", "total")
    )
    return status, (result if status in FINISHED else None), updates


def cancel(run_id: Any, token: Any, ip: str | None) -> None:
    run = Run.objects.select_related("tool").get(pk=run_id)
    if not run.is_finished:
        run_cancel.cancel_run(run, Actor(token=token, ip=ip))


def update_text(content: Any) -> str | None:
    """The text of an update's content blocks, for the progress message."""
    if not isinstance(content, list):
        return None
    texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    text = "\n".join(t for t in texts if isinstance(t, str))
    return text[:1000] or None


def call_result(
    result: dict | None, status: str, protocol_version: str = LATEST_MODERN_VERSION
) -> types.CallToolResult:
    if not isinstance(result, dict):
        return types.CallToolResult(
            content=[types.TextContent(text=f"The run ended {status} without a result.")],
            is_error=True,
        )
    structured = result.get("structuredContent", {})
    if not isinstance(structured, dict) and protocol_version not in MODERN_PROTOCOL_VERSIONS:
        # An http tool without `outputs` keeps a JSON array or scalar answer as it came:
        # any JSON value on 2026-07-28, but an object only on the handshake versions, so
        # there the text block alone carries it.
        result = {key: value for key, value in result.items() if key != "structuredContent"}
    try:
        # An http tool's structuredContent (its `outputs`, listed as the outputSchema)
        # passes through as the run stored it, redacted like its text.
        return types.CallToolResult.model_validate(result)
    except ValidationError:
        # A result the console stored but MCP's content types do not cover: keep it whole.
        text = json.dumps(result.get("content"), ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(text=text)], is_error=bool(result.get("isError"))
        )


def calls_dir() -> Path:
    return Path(settings.STATE_DIR) / "mcp-calls"


def call_key(token: Any, request_id: Any) -> str:
    """A file-name-safe key for (token, request id): request ids are the client's."""
    raw = json.dumps([str(token.pk), request_id], default=str)
    return hashlib.sha256(raw.encode()).hexdigest()[:40]


# A note is removed when its call ends; one left by a web worker that died mid-call is
# removed after this long (longer than any run: timeouts are at most 900 s).
STALE_NOTE_SECONDS = 3600
_next_prune = 0.0


def note_call(token: Any, request_id: Any, run_id: Any) -> Path | None:
    if request_id is None:
        return None
    folder = calls_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    prune_notes(folder)
    path = folder / f"{call_key(token, request_id)}.{run_id}"
    path.touch()
    return path


def prune_notes(folder: Path) -> None:
    """At most every ten minutes per process, drop notes older than STALE_NOTE_SECONDS."""
    global _next_prune
    now = time.time()
    if now < _next_prune:
        return
    _next_prune = now + 600
    for path in folder.iterdir():
        with contextlib.suppress(OSError):
            if path.stat().st_mtime < now - STALE_NOTE_SECONDS:
                path.unlink()


def cancel_noted(token: Any, request_id: Any, ip: str | None) -> int:
    """Cancel the runs noted for this token's request `request_id`; a run is only ever
    cancelled for the token that started it, whatever the folder holds."""
    cancelled = 0
    for path in calls_dir().glob(f"{call_key(token, request_id)}.*"):
        run_id = path.name.split(".", 1)[1]
        try:
            run = Run.objects.select_related("tool").filter(pk=run_id, token=token).first()
        except (ValueError, ValidationError, DjangoValidationError):
            continue
        if run is not None and not run.is_finished:
            cancelled += run_cancel.cancel_run(run, Actor(token=token, ip=ip))
    return cancelled


async def on_cancelled(ctx: Any, params: types.CancelledNotificationParams) -> None:
    """A handshake-era cancel, perhaps for a call another web worker serves."""
    token = current_token.get()
    if token is None or params.request_id is None or not token.has_scope(Scope.TOOLS_INVOKE):
        return
    # Shielded: the notification's own request ends (202) at once, which would cancel this.
    with anyio.CancelScope(shield=True):
        await in_thread(cancel_noted, token, params.request_id, current_ip.get())


async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
    token = _require(Scope.TOOLS_INVOKE)
    ip = current_ip.get()
    try:
        run = await in_thread(start, params.name, params.arguments or {}, token, ip)
    except run_start.InvalidParams as exc:
        # A tool error, not a protocol error, so the model sees it and can correct itself.
        text = "Invalid arguments:\n" + "\n".join(exc.errors)
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
    except Refused as exc:
        return types.CallToolResult(content=[types.TextContent(text=str(exc))], is_error=True)
    noted = None
    try:
        noted = await in_thread(note_call, token, ctx.request_id, run.pk)
        return await follow(ctx, run.pk)
    except BaseException:
        # Cancelled by the client (notification or closed stream) or the server stopping:
        # the run must not outlive the call that nobody will read.
        with anyio.CancelScope(shield=True):
            try:
                await in_thread(cancel, run.pk, token, ip)
            except Exception:
                logger.exception("could not cancel run %s after its MCP call ended", run.pk)
        raise
    finally:
        if noted is not None:
            noted.unlink(missing_ok=True)


class Counter:
    """The progress/total of each notification: the tool's own count (progress, total,
    as onUpdate sent them) when the update has one; an update without one repeats the
    last count, or, before any, counts updates (1, 2, 3...) with no total, as MCP asks
    for a progress that never goes back."""

    def __init__(self) -> None:
        self.last: tuple[float, float | None] | None = None

    def of(self, seq: int, progress: float | None, total: float | None) -> tuple:
        if progress is not None:
            self.last = (progress, total)
        return self.last or (float(seq), None)


async def follow(ctx: Any, run_id: Any) -> types.CallToolResult:
    after = 0
    pause = POLL_FIRST
    counter = Counter()
    while True:
        status, result, updates = await in_thread(news, run_id, after)
        for seq, content, progress, total in updates:
            after = seq
            value, of = counter.of(seq, progress, total)
            await ctx.session.report_progress(value, of, update_text(content))
        if status in FINISHED:
            return call_result(result, status, ctx.session.protocol_version)
        if updates:
            pause = POLL_FIRST
        await anyio.sleep(pause)
        pause = min(pause * POLL_GROWTH, POLL_MAX)


# --------------------------------------------------------------------------------------
# The server and its ASGI app


def build_server() -> Server:
    server = Server(
        "tool-console",
        version="1",
        title="Tool Console",
        instructions=(
            "Tools published in this Tool Console. Each call runs the tool in the console's "
            "sandbox; progress arrives as notifications when you send a progress token."
        ),
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
    server.add_notification_handler(
        "notifications/cancelled", types.CancelledNotificationParams, on_cancelled
    )
    return server


def transport_security() -> TransportSecuritySettings:
    """The Host (and Origin) an /mcp request may carry: Django's ALLOWED_HOSTS, any port."""
    hosts = [h.lstrip(".") for h in settings.ALLOWED_HOSTS]
    if "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    allowed_hosts = [pattern for h in hosts for pattern in (h, f"{h}:*")]
    origins = [f"{s}://{h}{p}" for h in hosts for s in ("http", "https") for p in ("", ":*")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=allowed_hosts,
        allowed_origins=origins,
    )


server = build_server()
session_manager = StreamableHTTPSessionManager(
    app=server, security_settings=transport_security(), json_response=False, stateless=True
)
asgi_app = StreamableHTTPASGIApp(session_manager)


def authenticate(raw: str) -> Any:
    """The active token `raw` (the API's memo and last-used rules), or None."""
    token = auth.active_token(raw)
    if token is not None:
        auth.touch(token)
    return token
