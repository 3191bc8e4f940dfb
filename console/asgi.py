"""The console's one ASGI application: MCP at /mcp, Django (WSGI, in threads) elsewhere.

Gunicorn serves it with uvicorn workers (console/gunicorn.conf.py). Django stays a WSGI
app run in a pool of CONSOLE_WEB_THREADS threads per worker, as under gunicorn's gthread
workers before: its views are synchronous, and Django's own ASGI handler would run them
all in one thread per process, so a 30 s long poll would hold up every other request.
The MCP app is asynchronous and holds a call open without holding a thread."""

from __future__ import annotations

import json
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

from a2wsgi import WSGIMiddleware  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402

django_app = WSGIMiddleware(
    get_wsgi_application(), workers=int(os.getenv("CONSOLE_WEB_THREADS", "4"))
)

from tools_app.api import mcp as mcp_server  # noqa: E402  (needs the apps loaded)
from tools_app.models.tokens import Scope  # noqa: E402
from tools_app.ops import logcontext  # noqa: E402

MCP_PATHS = ("/mcp", "/mcp/")
MCP_SCOPES = (Scope.REGISTRY_READ, Scope.TOOLS_INVOKE)
# What each method needs. A call needs the registry too: MCP clients list the tools to
# check a call's result against its outputSchema, so without it the run would happen and
# the call fail afterwards (and an agent that retries would run the tool twice).
METHOD_SCOPES = {
    "tools/list": (Scope.REGISTRY_READ,),
    "tools/call": (Scope.TOOLS_INVOKE, Scope.REGISTRY_READ),
}


async def application(scope, receive, send) -> None:
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
    elif scope["type"] == "http" and scope["path"] in MCP_PATHS:
        await mcp(scope, receive, send)
    else:
        await django_app(scope, receive, send)


async def lifespan(receive, send) -> None:
    """Runs the MCP session manager for as long as the server does."""
    message = await receive()
    assert message["type"] == "lifespan.startup"
    try:
        async with mcp_server.session_manager.run():
            await send({"type": "lifespan.startup.complete"})
            message = await receive()
            assert message["type"] == "lifespan.shutdown"
    except BaseException as exc:
        await send({"type": "lifespan.startup.failed", "message": str(exc)})
        raise
    await send({"type": "lifespan.shutdown.complete"})


async def mcp(scope, receive, send) -> None:
    """Authenticate the agent token, then hand the request to the SDK. Refusals are the
    API's JSON errors, before any MCP session exists."""
    headers = {key.decode("latin-1").lower(): value for key, value in scope["headers"]}
    header = headers.get("authorization", b"").decode("latin-1").strip()
    scheme, _, raw = header.partition(" ")
    if not header:
        return await refuse(send, 401, "missing token", "send 'Authorization: Bearer <token>'")
    if scheme.lower() != "bearer" or not raw.strip():
        return await refuse(send, 401, "malformed Authorization header", "use 'Bearer <token>'")
    token = await mcp_server.in_thread(mcp_server.authenticate, raw.strip())
    if token is None:
        return await refuse(
            send, 401, "invalid token", "the token is unknown, was revoked or has expired"
        )
    if not any(token.has_scope(s) for s in MCP_SCOPES):
        return await refuse(
            send,
            403,
            "insufficient_scope",
            "MCP needs 'registry:read' (to list tools) and 'tools:invoke' (to call them)",
            scopes=MCP_SCOPES,
        )
    if scope["method"] == "POST":
        body, messages = await read_body(receive)
        receive = replay(messages, receive)
        needed = scopes_needed(body)
        missing = [s for s in needed if not token.has_scope(s)]
        if missing:
            names = " and ".join(f"'{s}'" for s in missing)
            return await refuse(
                send,
                403,
                "insufficient_scope",
                f"this token lacks the {names} scope{'s' if len(missing) > 1 else ''}; "
                f"this request needs {' and '.join(needed)}",
                scopes=needed,
            )
    client = scope.get("client") or (None, None)
    mcp_server.current_token.set(token)
    mcp_server.current_ip.set(client[0])
    # As RequestContextMiddleware does for Django: a tool call's run and its log lines
    # carry this request's id, and the answer names it.
    raw = headers.get("x-request-id", b"").decode("latin-1")
    request_id = logcontext.sane_request_id(raw) or logcontext.new_request_id()
    logcontext.request_id.set(request_id)

    async def send_with_id(message: dict) -> None:
        if message["type"] == "http.response.start":
            extra = [(b"x-request-id", request_id.encode())]
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    await mcp_server.asgi_app(scope, receive, send_with_id)


async def read_body(receive) -> tuple[bytes, list[dict]]:
    """The whole request body (the SDK reads it whole too), and the messages it came in,
    to hand on unchanged."""
    messages, chunks = [], []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks), messages


def replay(messages: list[dict], receive):
    pending = list(messages)

    async def again() -> dict:
        return pending.pop(0) if pending else await receive()

    return again


def scopes_needed(body: bytes) -> tuple[str, ...]:
    """The scopes the JSON-RPC request (or batch) in `body` needs; none for anything the
    SDK will refuse on its own (not JSON, no method)."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return ()
    requests = parsed if isinstance(parsed, list) else [parsed]
    needed: list[str] = []
    for request in requests:
        method = request.get("method") if isinstance(request, dict) else None
        for scope in METHOD_SCOPES.get(method, ()) if isinstance(method, str) else ():
            if scope not in needed:
                needed.append(scope)
    return tuple(needed)


async def refuse(send, status: int, error: str, detail: str, scopes: tuple[str, ...] = ()) -> None:
    body = json.dumps({"error": error, "detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="tool-console"'))
    if scopes:
        # RFC 6750 section 3.1: the scopes the request needs, for a client to step up to.
        challenge = (
            f'Bearer realm="tool-console", error="insufficient_scope", scope="{" ".join(scopes)}"'
        )
        headers.append((b"www-authenticate", challenge.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
