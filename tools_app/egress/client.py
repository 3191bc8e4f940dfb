"""The console's one outbound HTTP client (httpx), used by connection tests and the runner.

- A total deadline (default 10 s) on top of httpx's per-operation timeouts, so a server
  that drips bytes cannot hold a worker.
- Redirects are followed by hand: only to http/https, never from https down to http, at
  most MAX_REDIRECTS, and credentials (Authorization, Proxy-Authorization, Cookie and any
  header the caller marks secret) are dropped when the origin changes. A redirect that
  would re-send a body to another origin (307/308, or 301/302 for a method other than
  POST) is not followed: the request fails saying so (a 303, or a 301/302 after a POST,
  becomes a GET without the body and is followed).
- The body is read up to `max_body` bytes and the rest discarded (`truncated` says so).
- Nothing here logs URLs, headers or bodies: they may carry secrets.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

import httpx

from tools_app.egress import policy as egress_policy
from tools_app.egress import transport as egress_transport

DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_BODY = 64 * 1024
MAX_REDIRECTS = 5
USER_AGENT = "ToolConsole/0.1 (+connection test)"
SCHEMES = ("http", "https")
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

# httpx logs every request URL at INFO and httpcore response headers at DEBUG; either may
# carry a credential (a token in a query string, a cookie), so they stay quiet.
logging.getLogger("httpx").setLevel(logging.WARNING)
logging.getLogger("httpcore").setLevel(logging.WARNING)


class HttpError(Exception):
    """The request could not be made or completed; the message is safe to show once the
    caller has redacted its secrets from it (it may contain the URL)."""


@dataclass(frozen=True)
class HttpResult:
    status: int
    reason: str
    headers: dict[str, str]
    body: bytes
    truncated: bool
    url: str  # the final URL, after redirects
    elapsed: float
    redirects: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def text(self) -> str:
        charset = "utf-8"
        content_type = self.headers.get("content-type", "")
        for part in content_type.split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                charset = value.strip('"')
        try:
            return self.body.decode(charset, errors="replace")
        except LookupError:
            return self.body.decode("utf-8", errors="replace")


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return (url.scheme, url.host, url.port)


def _origin_text(url: httpx.URL) -> str:
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"{url.scheme}://{host}" + (f":{url.port}" if url.port else "")


def check_url(url: str) -> httpx.URL:
    """Parse an absolute http(s) URL or raise HttpError."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise HttpError(
            f"only http and https URLs can be requested, not {parts.scheme or 'a relative URL'!r}"
        )
    if not parts.hostname:
        raise HttpError("the URL has no host")
    try:
        return httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as exc:
        raise HttpError(f"invalid URL: {exc}") from None


def request(
    method: str,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    content: bytes | str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_body: int = DEFAULT_MAX_BODY,
    follow_redirects: bool = True,
    secret_headers: Iterable[str] = (),
    transport: httpx.BaseTransport | None = None,
    policy: egress_policy.Policy | None = None,
) -> HttpResult:
    """Make one request (following safe redirects) and read at most `max_body` bytes.
    With `policy`, every hop's destination is judged by it (egress/transport.py) and proxies
    from the environment are not used (the check would judge the proxy, not the target)."""
    if policy is not None and not isinstance(transport, egress_transport.EgressTransport):
        transport = egress_transport.EgressTransport(policy, inner=transport)
    method = method.upper()
    current = check_url(url)
    send_headers = {"User-Agent": USER_AGENT, **(headers or {})}
    drop_on_cross_origin = CREDENTIAL_HEADERS | {h.lower() for h in secret_headers}
    started = time.monotonic()
    deadline = started + timeout
    redirects: list[str] = []

    def remaining() -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise HttpError(f"no complete answer within {timeout:g} s")
        return left

    try:
        with httpx.Client(
            follow_redirects=False,
            trust_env=policy is None,
            transport=transport,
            timeout=timeout,
        ) as client:
            while True:
                try:
                    request_ = client.build_request(
                        method,
                        current,
                        headers=send_headers,
                        content=content,
                        timeout=httpx.Timeout(remaining()),
                    )
                except UnicodeEncodeError:
                    # Never the value itself in the message: it may be a secret.
                    raise HttpError(
                        "a header value holds characters HTTP headers cannot carry "
                        "(only ASCII is allowed)"
                    ) from None
                response = client.send(request_, stream=True)
                try:
                    location = response.headers.get("location")
                    if (
                        follow_redirects
                        and response.status_code in REDIRECT_STATUSES
                        and location is not None
                    ):
                        if len(redirects) >= MAX_REDIRECTS:
                            raise HttpError(f"more than {MAX_REDIRECTS} redirects")
                        target = check_url(urljoin(str(current), location))
                        if current.scheme == "https" and target.scheme == "http":
                            raise HttpError("refused a redirect from https to plain http")
                        if response.status_code == 303 or (
                            response.status_code in (301, 302) and method == "POST"
                        ):
                            method, content = "GET", None
                        if _origin(target) != _origin(current):
                            if content:
                                # A body may carry a secret ({{slug.FIELD}} in an http
                                # tool's body) like the headers dropped below; it goes
                                # to the origin it was written for, or nowhere.
                                raise HttpError(
                                    f"did not follow the {response.status_code} redirect "
                                    f"to another origin ({_origin_text(target)}): it would "
                                    "re-send the request body there"
                                )
                            send_headers = {
                                k: v
                                for k, v in send_headers.items()
                                if k.lower() not in drop_on_cross_origin
                            }
                        redirects.append(str(target))
                        current = target
                        continue
                    body = bytearray()
                    truncated = False
                    for chunk in response.iter_bytes():
                        remaining()
                        body.extend(chunk)
                        if len(body) > max_body:
                            truncated = True
                            del body[max_body:]
                            break
                    return HttpResult(
                        status=response.status_code,
                        reason=response.reason_phrase,
                        headers={k.lower(): v for k, v in response.headers.items()},
                        body=bytes(body),
                        truncated=truncated,
                        url=str(current),
                        elapsed=time.monotonic() - started,
                        redirects=redirects,
                    )
                finally:
                    response.close()
    except httpx.TimeoutException:
        raise HttpError(f"no answer within {timeout:g} s") from None
    except httpx.ConnectError as exc:
        raise HttpError(f"could not connect to {current.host}: {_reason(exc)}") from None
    except httpx.HTTPError as exc:
        raise HttpError(f"{type(exc).__name__}: {_reason(exc)}") from None


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    # "[Errno 111] Connection refused" -> "Connection refused"
    if text.startswith("[Errno") and "]" in text:
        text = text.split("]", 1)[1].strip()
    return text[:200]
