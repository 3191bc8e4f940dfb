"""One local HTTP server standing in for an outside API (a provider, a web site, a
console behind a proxy): the `stand_in` fixture in tests/conftest.py starts them.

A test gives it one function, `answer(request) -> Reply`, and reads what was asked in
`server.seen`; `methods=("GET",)` refuses the others with 501, as a GET-only API does.
It binds where the test says: 127.0.0.1 by default, another loopback address (127.0.0.2:
not the console's own), an IPv6 address, or 0.0.0.0:80 inside a test network namespace
(tests/support/egress.py runs it there in a child process). With `netns` (a
/proc/PID/ns/net path) it binds inside that namespace while serving from this process, so
a test still reads `seen`."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import socket
import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Request:
    method: str
    path: str  # as sent, query included
    headers: dict[str, str]  # names as the client spelled them
    body: bytes
    local_address: str  # the server address the request came in on

    @property
    def route(self) -> str:
        """The path without its query."""
        return self.path.partition("?")[0]

    @property
    def query(self) -> str:
        return self.path.partition("?")[2]

    def header(self, name: str, default: str | None = None) -> str | None:
        """A header by name, whatever its case."""
        lowered = name.lower()
        for key, value in self.headers.items():
            if key.lower() == lowered:
                return value
        return default


@dataclass
class Reply:
    status: int = 200
    # Bytes, or chunks written (and flushed) one by one: a big or a slow body.
    body: bytes | Iterable[bytes] = b""
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # The Content-Length to announce for chunks (bytes announce their own length).
    length: int | None = None


def json_reply(data: object, status: int = 200, **headers: str) -> Reply:
    return Reply(status, json.dumps(data).encode(), "application/json", headers)


def redirect(location: str, status: int = 302) -> Reply:
    return Reply(status, headers={"Location": location})


Answer = Callable[[Request], Reply]


class StandIn:
    """An HTTP server on its own threads, answering every request with `answer`."""

    def __init__(
        self,
        answer: Answer,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        http11: bool = False,
        methods: Collection[str] | None = None,
        netns: str | None = None,
    ) -> None:
        self.answer = answer
        # Others get 501 unrecorded, as from a server that implements only these.
        self.methods = methods
        self.seen: list[Request] = []
        handler = _handler(self, http11)
        if netns is None:
            self.httpd = _server(host, port, handler)
        else:
            self.httpd = _server_in(netns, host, port, handler)
        self.host = host
        self.port: int = self.httpd.server_address[1]
        netloc = f"[{host}]" if ":" in host else host
        self.url = f"http://{netloc}:{self.port}"
        self._thread: threading.Thread | None = None

    @property
    def last(self) -> Request:
        return self.seen[-1]

    def start(self) -> StandIn:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def close(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> StandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _server(host: str, port: int, handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        daemon_threads = True

    return Server((host, port), handler)


CLONE_NEWNET = 0x40000000


def _server_in(
    netns: str, host: str, port: int, handler: type[BaseHTTPRequestHandler]
) -> ThreadingHTTPServer:
    """The server, its socket made by a thread of its own that joined the network
    namespace `netns`: the socket stays in that namespace and any thread may serve it
    (setns moves the calling thread only; Python 3.11 has no os.setns)."""
    made: list[ThreadingHTTPServer | BaseException] = []

    def inside() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(netns, os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    errno = ctypes.get_errno()
                    raise OSError(errno, f"setns {netns}: {os.strerror(errno)}")
            finally:
                os.close(fd)
            made.append(_server(host, port, handler))
        except BaseException as exc:  # raised again in the caller's thread
            made.append(exc)

    thread = threading.Thread(target=inside)
    thread.start()
    thread.join()
    if isinstance(made[0], BaseException):
        raise made[0]
    return made[0]


def _handler(server: StandIn, http11: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.1 keeps the connection open between requests, as most real APIs do.
        protocol_version = "HTTP/1.1" if http11 else "HTTP/1.0"

        def log_message(self, *args: object) -> None:  # keep test output quiet
            return

        def _handle(self) -> None:
            if server.methods is not None and self.command not in server.methods:
                self.send_error(501, f"Unsupported method ({self.command!r})")
                return
            length = int(self.headers.get("Content-Length") or 0)
            request = Request(
                self.command,
                self.path,
                dict(self.headers),
                self.rfile.read(length) if length else b"",
                self.connection.getsockname()[0],
            )
            server.seen.append(request)
            reply = server.answer(request)
            self.send_response(reply.status)
            if reply.content_type is not None:
                self.send_header("Content-Type", reply.content_type)
            body = reply.body
            size = len(body) if isinstance(body, bytes) else reply.length
            if size is not None:
                self.send_header("Content-Length", str(size))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            if self.command == "HEAD":
                return
            # The client may hang up first (a cancelled run, a refused big body).
            with contextlib.suppress(OSError):
                for chunk in [body] if isinstance(body, bytes) else body:
                    self.wfile.write(chunk)
                    self.wfile.flush()

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle

    return Handler
