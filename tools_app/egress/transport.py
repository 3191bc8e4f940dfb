"""The egress policy for requests the console makes itself (tools_app/egress/client.py).

An httpx transport whose connections are made by EgressBackend: it resolves the host once
per connection, judges EVERY address with the policy (one refused address refuses the
host: egress_policy.Policy.decide_host) and connects only to the addresses that call returned as
judged, in order, falling back from one to the next; the socket layer never resolves the
name again, so it cannot resolve to something else between the check and the connect
(DNS rebinding). TLS still verifies and sends SNI for the URL's host name, and
the Host header is the URL's. Each redirect hop is a new request through this transport,
so it is judged again; http.request drops credentials on a cross-origin redirect and caps
redirects.
"""

from __future__ import annotations

import functools
import ipaddress
import ssl
import typing

import httpcore
import httpx

from tools_app.egress import policy as egress_policy


class EgressRefused(httpcore.ConnectError):
    """The policy refused the destination (shown to the user as the reason)."""


class EgressBackend(httpcore.SyncBackend):
    def __init__(self, policy: egress_policy.Policy) -> None:
        self.policy = policy

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        judged, decision = self.policy.decide_host(host, port)
        if not decision.allowed or not judged:
            raise EgressRefused(decision.reason or f"{host}:{port}: no address was judged")
        error: Exception | None = None
        for ip in judged:  # a literal address each: pinned, never looked up again
            try:
                return super().connect_tcp(str(ip), port, timeout, local_address, socket_options)
            except (OSError, httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None
        raise error


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every transport of this process. Building one loads
    the CA bundle (tens of ms): once per request it was most of an http tool's overhead
    (bench/http_tool.py). A context is safe to share between connections and threads."""
    return httpx.create_ssl_context()


class EgressTransport(httpx.HTTPTransport):
    """httpx's transport with the connection pool on EgressBackend. `inner` (tests): a
    transport that answers instead of the network; a literal address is judged the same,
    a name is not resolved (nothing connects to it)."""

    def __init__(
        self, policy: egress_policy.Policy, inner: httpx.BaseTransport | None = None
    ) -> None:
        super().__init__(verify=tls_context())
        self.policy = policy
        self.inner = inner
        # httpx has no network_backend argument; its pool is rebuilt on ours.
        self._pool = httpcore.ConnectionPool(
            ssl_context=tls_context(), network_backend=EgressBackend(policy)
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.inner is not None:
            port = request.url.port or {"http": 80, "https": 443}[request.url.scheme]
            try:
                ip = ipaddress.ip_address(request.url.host)
            except ValueError:
                return self.inner.handle_request(request)
            decision = self.policy.decide(ip, port)
            if not decision.allowed:
                raise httpx.ConnectError(
                    f"{request.url.host}:{port} is refused by the egress policy: "
                    + decision.reason,
                    request=request,
                )
            return self.inner.handle_request(request)
        return super().handle_request(request)
