"""The executor of `kind: http` tools (docs/http-tools.md): one HTTP request described by
the TOOL.md frontmatter, made by the worker for a run. No sandbox, since no tool code runs;
the run goes through the same Run record, progress updates, cancel, redaction and audit as a
code tool (tools_app/runs/execute.py hands over here from _execute).

- Templates: `{{input}}` and `{{slug.FIELD}}` (FIELD: the field's name or its variable).
  Values placed in the URL are percent-encoded whole (a `/` or `..` in an input stays inside
  its path segment); query params are encoded by httpx, and a query param that is one
  list input is repeated per item (`?id=1&id=2`). A JSON body is built on the parsed
  structure: a string that is exactly `{{x}}` becomes x's JSON value, other strings get
  text substitution; nothing is built by concatenating JSON text.
- Integration values only from the integrations the secret policy granted this run
  (runs._execute decided); a template or hidden input needing a withheld one fails the run
  with the policy's notice.
- Hidden inputs are filled from the declared integrations (http_checks.hidden_source).
- Every destination, redirects included, is judged by the tool's egress policy
  (client.request with the policy: EgressTransport); credentials, and every header that
  carries an integration value, are dropped on a cross-origin redirect.
- The response is read as a stream up to MAX_RESPONSE (10 MiB); past it the run fails
  saying so. `json` maps outputs with JMESPath (a text block and `structuredContent`),
  `text` returns the text, `binary` becomes an artifact.
- Retries only for idempotent methods (GET HEAD PUT DELETE) on 429 and 5xx, honouring
  Retry-After up to RETRY_AFTER_CAP seconds, at most RETRIES extra attempts.
- Cancel aborts the request in flight: the sockets are shut down, which wakes a blocked read.
- A `file` input is the object the API takes (`{"name", "mime_type", "data"}`, base64):
  a body template `{{doc}}` sends it as that JSON value (tools_app/manifest/input_files.py).
- A successful JSON response is also kept, redacted, as the outcome's `response` (at most
  MAX_KEPT_RESPONSE of JSON text), so a developer can save it as a sample.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpcore
import httpx
import jmespath

from tools_app.egress import client
from tools_app.egress import policy as egress_policy
from tools_app.egress import transport as egress_transport
from tools_app.http_tools import checks as http_checks
from tools_app.http_tools import spec as http_spec
from tools_app.http_tools.checks import ValidationContext
from tools_app.http_tools.context import validation_context
from tools_app.lib import nesting
from tools_app.manifest import outputs as outputs_spec
from tools_app.manifest.toolmd import Manifest
from tools_app.runner import Artifact, Redactor, RunOutcome
from tools_app.runs.setup import RunSetupError, limits_for, work_dir

MAX_RESPONSE = 10 * 1024 * 1024
MAX_RESULT_TEXT = 1024 * 1024
MAX_KEPT_RESPONSE = 1024 * 1024
RETRIES = 2
RETRY_AFTER_CAP = 30.0
RETRY_BACKOFF = 1.0
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE"})
USER_AGENT = "ToolConsole/0.1 (+http tool)"
_WHOLE = re.compile(r"\s*\{\{\s*([^{}]*?)\s*\}\}\s*")


class HttpToolError(Exception):
    """The request cannot be made as described; the message is shown (after redaction)."""


# Given the request as sent (URL, headers, body), refresh the OAuth tokens it carried:
# (their integrations' slugs, the redaction labels with the new tokens), or None when it
# carried none. Raises HttpToolError, in words, when a token cannot be refreshed.
Reauthorize = Callable[[str], tuple[list[str], dict[str, str]] | None]


# --- Templates ----------------------------------------------------------------------------


class Values:
    """What templates may name: the run's params and the granted integrations' values."""

    def __init__(
        self,
        params: dict[str, Any],
        integrations: dict[str, dict[str, str]],
        withheld: dict[str, str],
    ) -> None:
        self.params = params
        self.integrations = integrations
        self.withheld = withheld  # slug -> the policy's notice

    def lookup(self, name: str) -> tuple[bool, Any]:
        """(found, value) for a template name; raises HttpToolError for a withheld one."""
        if http_spec.TEMPLATE_INPUT_RE.fullmatch(name):
            return (name in self.params and self.params[name] is not None), self.params.get(name)
        match = http_spec.TEMPLATE_FIELD_RE.fullmatch(name)
        if match is None:
            raise HttpToolError(f"{{{{{name}}}}} is not a template this tool can fill")
        slug, field = match.groups()
        if slug in self.withheld:
            raise HttpToolError(self.withheld[slug])
        values = self.integrations.get(slug, {})
        value = values.get(field, values.get(field.lower()))
        if value is None:
            raise HttpToolError(f"{{{{{name}}}}}: integration {slug!r} has no value for {field}")
        return True, value


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


def render_text(template: str, values: Values, encode: Callable[[str], str] = str) -> str:
    def one(match: re.Match[str]) -> str:
        _found, value = values.lookup(match.group(1))
        return encode(_as_text(value))

    return http_spec.TEMPLATE_RE.sub(one, template)


def render_url(template: str, values: Values) -> str:
    """Substitute into the URL with every value percent-encoded whole (the host is literal:
    the validation refuses a template there)."""
    return render_text(template, values, lambda text: quote(text, safe=""))


def render_json(template: Any, values: Values) -> Any:
    """The body built on the parsed structure: a whole-string `{{x}}` is x's JSON value.
    An object's member whose template is one optional input that was not given is left
    out, as a query parameter is (an API may refuse a null it did not ask for)."""
    if isinstance(template, dict):
        rendered = {}
        for key, item in template.items():
            whole = _WHOLE.fullmatch(item) if isinstance(item, str) else None
            if whole is not None and not values.lookup(whole.group(1))[0]:
                continue
            rendered[key] = render_json(item, values)
        return rendered
    if isinstance(template, list):
        return [render_json(item, values) for item in template]
    if isinstance(template, str):
        whole = _WHOLE.fullmatch(template)
        if whole is not None:
            _found, value = values.lookup(whole.group(1))
            return value
        return render_text(template, values)
    return template


def render_query(query: dict[str, str], values: Values) -> dict[str, str | list[str]]:
    """A param whose template is one optional input that was not given is left out. A
    whole-string `{{x}}` whose value is a list (a `string[]`... input) repeats the key, one
    item each (`?id=1&id=2`, the OpenAPI form style exploded); an empty list is left out,
    like a value not given. Items are scalars: an object or list inside is refused."""
    rendered: dict[str, str | list[str]] = {}
    for name, template in query.items():
        whole = _WHOLE.fullmatch(template)
        if whole is not None:
            found, value = values.lookup(whole.group(1))
            if not found:
                continue
            if isinstance(value, list):
                if any(isinstance(item, dict | list) for item in value):
                    raise HttpToolError(
                        f"query parameter {name}: {{{{{whole.group(1)}}}}} is a list of "
                        "objects or lists; a repeated query parameter takes plain values only"
                    )
                if value:
                    rendered[name] = [_as_text(item) for item in value]
                continue
            rendered[name] = _as_text(value)
        else:
            rendered[name] = render_text(template, values)
    return rendered


# --- Cancellable transport ----------------------------------------------------------------


class _TrackingBackend(egress_transport.EgressBackend):
    def __init__(self, policy: egress_policy.Policy, sockets: list[socket.socket]) -> None:
        super().__init__(policy)
        self.sockets = sockets

    def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        stream = super().connect_tcp(*args, **kwargs)
        sock = stream.get_extra_info("socket")
        if sock is not None:
            self.sockets.append(sock)
        return stream


class CancellableTransport(egress_transport.EgressTransport):
    """EgressTransport whose open connections abort() can cut from another thread."""

    def __init__(self, policy: egress_policy.Policy) -> None:
        super().__init__(policy)
        self.sockets: list[socket.socket] = []
        self._pool = httpcore.ConnectionPool(
            ssl_context=egress_transport.tls_context(),
            network_backend=_TrackingBackend(policy, self.sockets),
        )

    def abort(self) -> None:
        for sock in list(self.sockets):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes a recv blocked in the other thread


# --- The run ------------------------------------------------------------------------------


class _Cancelled(Exception):
    pass


def _retry_delay(result: client.HttpResult, attempt: int) -> float:
    raw = result.headers.get("retry-after", "").strip()
    delay = RETRY_BACKOFF * (2**attempt)
    if raw.isdigit():
        delay = float(raw)
    elif raw:
        with contextlib.suppress(TypeError, ValueError, IndexError, OverflowError):
            delay = parsedate_to_datetime(raw).timestamp() - time.time()
    return min(max(delay, 0.0), RETRY_AFTER_CAP)


def _text_result(text: str, *, error: bool = False, structured: Any = None) -> dict[str, Any]:
    if len(text) > MAX_RESULT_TEXT:
        text = text[:MAX_RESULT_TEXT] + "\n[truncated: the result is over 1 MiB]"
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": error}
    if structured is not None:
        result["structuredContent"] = structured
    return result


def _outcome_maker(
    redactor: Redactor,
    policy_text: str,
    lead_notes: tuple[str, ...] = (),
    *,
    started: float | None = None,
) -> Callable[..., RunOutcome]:
    """outcome(status, result, artifacts=(), notes=(), response=None): a RunOutcome of an
    http run, redacted, timed from `started` (default: now)."""
    started = time.monotonic() if started is None else started

    def outcome(
        status: str, result: dict[str, Any], artifacts=(), notes=(), response=None
    ) -> RunOutcome:
        return RunOutcome(
            status=status,
            result=redactor.redact_json(result),
            stderr_tail="",
            artifacts=list(artifacts),
            isolation="",
            exit_code=None,
            duration=time.monotonic() - started,
            notices=[*lead_notes, *notes],
            network_policy=policy_text,
            response=_kept(response, redactor),
        )

    return outcome


def perform(
    manifest: Manifest,
    values: Values,
    *,
    policy: egress_policy.Policy,
    secrets: dict[str, str],
    timeout: float,
    artifacts_dir: Path,
    on_update: Callable[[dict[str, Any]], None],
    cancel: threading.Event,
    reauthorize: Reauthorize | None = None,
) -> RunOutcome:
    """Make the tool's request and map the response; never raises for the request's faults.
    On a 401, `reauthorize` (given what was sent) refreshes the OAuth tokens the request
    carried, once; a second 401 tells to reconnect."""
    started = time.monotonic()
    redactor = Redactor(secrets)
    outcome = _outcome_maker(redactor, policy.summary(), started=started)

    def fail(message: str, status: str = "failed") -> RunOutcome:
        return outcome(status, _text_result(message, error=True))

    assert manifest.request is not None
    spec = manifest.request

    def build() -> tuple[str, dict[str, str], bytes | None, list[str]]:
        """The request filled in (again after a token refresh): target, headers, body and
        the headers carrying integration values."""
        url = render_url(spec["url"], values)
        query = render_query(spec.get("query") or {}, values)
        headers = {"User-Agent": USER_AGENT}
        secret_headers = []
        for name, template in (spec.get("headers") or {}).items():
            headers[name] = render_text(template, values)
            if any(ch in headers[name] for ch in "\r\n\x00"):
                # Never the value in the message: it may hold a secret.
                raise HttpToolError(
                    f"header {name}: a filled-in value holds a line break or NUL, which "
                    "HTTP headers cannot carry"
                )
            if any(
                http_spec.TEMPLATE_FIELD_RE.fullmatch(n) for n in http_spec.template_names(template)
            ):
                secret_headers.append(name)
        content = None
        if "body" in spec:
            body = render_json(spec["body"], values)
            content = json.dumps(body, ensure_ascii=False).encode("utf-8")
            if not any(k.lower() == "content-type" for k in headers):
                headers["Content-Type"] = "application/json"
        if spec.get("response", "json") == "json" and not any(
            k.lower() == "accept" for k in headers
        ):
            headers["Accept"] = "application/json"
        target = str(httpx.URL(url).copy_merge_params(query)) if query else url
        return target, headers, content, secret_headers

    try:
        target, headers, content, secret_headers = build()
    except HttpToolError as exc:
        return fail(str(exc))
    except (httpx.InvalidURL, ValueError) as exc:
        return fail(f"The request URL is not valid once filled in: {exc}")

    method = spec["method"]
    shown = f"{method} {urlsplit(target).scheme}://{urlsplit(target).netloc}{urlsplit(target).path}"
    deadline = started + min(timeout, float(spec.get("timeout") or timeout))
    transport = CancellableTransport(policy)
    finished = threading.Event()

    def watch() -> None:
        while not finished.is_set():
            if cancel.wait(0.05):
                transport.abort()
                return

    watcher = threading.Thread(target=watch, name="http-tool-cancel", daemon=True)
    watcher.start()
    try:
        attempt = 0
        refreshed: list[str] = []  # the integrations whose token a 401 made us refresh
        while True:
            on_update(
                {
                    "content": [
                        {
                            "type": "text",
                            "text": redactor.redact(f"{shown} (attempt {attempt + 1})"),
                        }
                    ]
                }
            )
            left = deadline - time.monotonic()
            if left <= 0:
                return fail(f"No complete answer within {timeout:g} s.", "timed_out")
            try:
                result = client.request(
                    method,
                    target,
                    headers=headers,
                    content=content,
                    timeout=left,
                    max_body=MAX_RESPONSE,
                    secret_headers=secret_headers,
                    transport=transport,
                    policy=policy,
                )
            except client.HttpError as exc:
                if cancel.is_set():
                    return fail("Cancelled while the request was in flight.", "cancelled")
                if (
                    time.monotonic() >= deadline
                    or "no answer within" in str(exc)
                    or ("no complete answer" in str(exc))
                ):
                    return fail(f"{shown}: {exc}", "timed_out")
                return fail(f"{shown}: {exc}")
            if cancel.is_set():
                return fail("Cancelled while the request was in flight.", "cancelled")
            if result.truncated:
                return fail(
                    f"{shown}: the response is larger than {MAX_RESPONSE // (1024 * 1024)} MiB; "
                    "it was not read further"
                )
            if result.status == 401 and reauthorize is not None:
                if refreshed:
                    return fail(
                        f"{shown} answered HTTP 401 again with a freshly refreshed token: "
                        f"reconnect integration {', '.join(refreshed)}."
                    )
                sent = " ".join(
                    [target, *headers.values(), (content or b"").decode(errors="replace")]
                )
                try:
                    fresh = reauthorize(sent)
                    if fresh is not None:
                        refreshed, labels = fresh
                        redactor = Redactor({**secrets, **labels})
                        target, headers, content, secret_headers = build()
                except HttpToolError as exc:
                    return fail(f"{shown} answered HTTP 401; {exc}")
                if fresh is not None:
                    on_update(
                        {
                            "content": [
                                {
                                    "type": "text",
                                    "text": "HTTP 401; refreshed the access token of "
                                    f"{', '.join(refreshed)}, retrying",
                                }
                            ]
                        }
                    )
                    continue
            retryable = method in IDEMPOTENT and (result.status == 429 or result.status >= 500)
            if retryable and attempt < RETRIES:
                delay = _retry_delay(result, attempt)
                if time.monotonic() + delay < deadline:
                    attempt += 1
                    on_update(
                        {
                            "content": [
                                {
                                    "type": "text",
                                    "text": f"HTTP {result.status}; retrying in {delay:g} s",
                                }
                            ]
                        }
                    )
                    if cancel.wait(delay):
                        return fail("Cancelled while waiting to retry.", "cancelled")
                    continue
            return _map_response(manifest, result, shown, artifacts_dir, outcome, redactor)
    finally:
        finished.set()
        transport.close()


def _map_response(manifest, result, shown, artifacts_dir, outcome, redactor) -> RunOutcome:
    assert manifest.request is not None
    kind = manifest.request.get("response", "json")
    if not result.ok:
        excerpt = result.text()[:2000]
        message = f"{shown} answered HTTP {result.status} {result.reason}".rstrip()
        return outcome("failed", _text_result(f"{message}\n\n{excerpt}".rstrip(), error=True))
    if kind == "binary":
        artifacts_dir.mkdir(parents=True, exist_ok=True)
        name = Path(urlsplit(result.url).path).name or "response"
        name = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:100] or "response"
        path = artifacts_dir / name
        path.write_bytes(result.body)
        content_type = result.headers.get("content-type", "application/octet-stream")
        text = f"Saved the response ({len(result.body)} bytes, {content_type}) as artifact {name}."
        artifact = Artifact(name=redactor.redact(name), path=path, size=len(result.body))
        return outcome("succeeded", _text_result(text), [artifact])
    if kind == "text":
        return outcome("succeeded", _text_result(result.text()))
    if manifest.request.get("method") == "HEAD" or not result.body.strip():
        data: Any = None
    else:
        try:
            # The console's nesting cap: the body becomes the run's structured result,
            # which pages, the API and MCP walk recursively.
            data = nesting.loads(result.text(), root="body", level=2)
        except json.JSONDecodeError as exc:
            return outcome(
                "failed",
                _text_result(
                    f"{shown}: the response is not JSON ({exc.msg} at line {exc.lineno})",
                    error=True,
                ),
            )
        except (nesting.TooDeep, ValueError) as exc:  # ValueError: a number too long
            problem = str(exc) if isinstance(exc, nesting.TooDeep) else "a number is too long"
            return outcome(
                "failed",
                _text_result(f"{shown}: the response is not usable JSON: {problem}", error=True),
            )
    response = {"status": result.status, "body": data}
    if not manifest.outputs:
        return outcome(
            "succeeded",
            _text_result(json.dumps(data, indent=2, ensure_ascii=False), structured=data),
            response=response,
        )
    outputs: dict[str, Any] = {}
    problems = []
    for name, spec in manifest.outputs.items():
        value = jmespath.search(spec["path"], data)
        missing = value is None and not spec.get("nullable")
        why = "the path gave nothing (and it is not nullable)" if missing else None
        why = why or outputs_spec.type_problem(spec, value)
        if why:
            problems.append(f"output {name} ({spec['path']}): {why}")
        outputs[name] = value
    text = json.dumps(outputs, indent=2, ensure_ascii=False)
    if problems:
        message = "The response does not match the tool's outputs:\n" + "\n".join(problems)
        return outcome(
            "failed", _text_result(f"{message}\n\n{text}", error=True, structured=outputs)
        )
    return outcome("succeeded", _text_result(text, structured=outputs), response=response)


def replay_sample(
    manifest: Manifest,
    sample_name: str,
    files: dict[str, bytes],
    *,
    secrets: dict[str, str],
    artifacts_dir: Path,
) -> RunOutcome:
    """A case replayed offline (docs/cases.md `sample:`): the version's samples/<name>.json
    ({"source", "status", "body"}) answers in place of the API, through the same response
    mapping and redaction as a real answer. Opens no socket, reads no integration."""
    assert manifest.request is not None
    redactor = Redactor(secrets)
    path = f"samples/{sample_name}.json"
    outcome = _outcome_maker(
        redactor,
        f"offline replay of {path}: no network",
        (f"Replayed offline from {path}: no request was sent.",),
    )

    def fail(message: str) -> RunOutcome:
        return outcome("failed", _text_result(message, error=True))

    data = files.get(path)
    if data is None:
        return fail(f"{path}: this version has no such sample to replay")
    try:
        sample = nesting.loads(data.decode("utf-8"), root="")
    except (UnicodeDecodeError, ValueError, nesting.TooDeep) as exc:
        return fail(f"{path}: not a usable sample ({type(exc).__name__})")
    status = sample.get("status") if isinstance(sample, dict) else None
    if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
        return fail(f'{path}: not a sample {{"source", "status", "body"}} with an HTTP status')
    body = sample.get("body")
    kind = manifest.request.get("response", "json")
    if isinstance(body, str) and kind != "json":
        raw, content_type = body.encode("utf-8"), "text/plain; charset=utf-8"
    elif body is None:
        raw, content_type = b"", "application/json"
    else:
        raw, content_type = json.dumps(body, ensure_ascii=False).encode("utf-8"), "application/json"
    result = client.HttpResult(
        status=status,
        reason="",
        headers={"content-type": content_type},
        body=raw,
        truncated=False,
        url=manifest.request["url"],
        elapsed=0.0,
    )
    shown = f"{manifest.request['method']} {path} (offline)"
    return _map_response(manifest, result, shown, artifacts_dir, outcome, redactor)


def sample_performer(run, manifest: Manifest, secrets: dict[str, str]):
    """The `perform` a runs.Supervisor calls for a run with `replay_sample`."""
    files = run.version.file_bytes()

    def run_it(*, on_update, cancel) -> RunOutcome:
        return replay_sample(
            manifest,
            run.replay_sample,
            files,
            secrets=secrets,
            artifacts_dir=work_dir(run) / "artifacts",
        )

    return run_it


def _kept(response: dict[str, Any] | None, redactor: Redactor) -> dict[str, Any] | None:
    """The redacted response to keep with the run, or None past MAX_KEPT_RESPONSE."""
    if response is None:
        return None
    kept = redactor.redact_json(response)
    if len(json.dumps(kept, ensure_ascii=False)) > MAX_KEPT_RESPONSE:
        return None
    return kept


# --- From a run (Django from here on) -----------------------------------------------------


def integration_values(slugs: list[str]) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """(slug -> {field name, VARIABLE and variable: value}, redaction labels -> secrets)
    for the granted integrations. Raises IntegrationError/VaultError like the runner's
    environment (same checks: configured, enabled, complete, decryptable)."""
    from tools_app.integrations import oauth
    from tools_app.integrations.environment import environment_for
    from tools_app.integrations.fields import fields_of
    from tools_app.models import Integration

    values: dict[str, dict[str, str]] = {}
    labels: dict[str, str] = {}
    for slug in slugs:
        env, secrets = environment_for([slug])
        labels |= secrets
        integration = Integration.objects.get(slug=slug)
        per: dict[str, str] = {}
        for spec in fields_of(integration):
            if spec.env in env:
                per[spec.name] = per[spec.env] = per[spec.env.lower()] = env[spec.env]
        # An OAuth type's access token, by its env name like a field: {{google.GOOGLE_ACCESS_TOKEN}}
        per |= oauth.template_values(integration, env)
        values[slug] = per
    return values, labels


def reauthorizer(values: Values, granted: list[str]) -> Reauthorize:
    """The 401 hook of `perform` for a run: refresh (under the row lock, once across
    workers) each granted OAuth integration whose token the rejected request carried,
    and fill the new token into `values`."""
    from tools_app.integrations import oauth

    def reauthorize(sent: str) -> tuple[list[str], dict[str, str]] | None:
        slugs: list[str] = []
        labels: dict[str, str] = {}
        for slug in granted:
            per = values.integrations.get(slug, {})
            try:
                fresh = oauth.after_401(slug, per, sent)
            except oauth.OAuthFailure as exc:
                raise HttpToolError(str(exc)) from None
            if fresh is not None:
                values.integrations[slug], new_labels = fresh
                labels |= new_labels
                slugs.append(slug)
        return (slugs, labels) if slugs else None

    return reauthorize


def fill_hidden(
    manifest: Manifest, params: dict[str, Any], values: Values, context: ValidationContext
) -> None:
    """Hidden inputs come from the declared integrations (httpchecks documents the rule)."""
    for name, spec in manifest.inputs.items():
        if spec.visibility != "hidden":
            continue
        slug = http_checks.hidden_source(manifest, name, context)
        if slug is None:
            if not spec.optional and not spec.has_default:
                raise HttpToolError(f"hidden input {name!r}: no declared integration fills it")
            continue
        if slug in values.withheld:
            raise HttpToolError(values.withheld[slug])
        value = values.integrations.get(slug, {}).get(name)
        if value is not None:
            params[name] = value
        elif not spec.optional and not spec.has_default:
            raise HttpToolError(f"hidden input {name!r}: integration {slug!r} has no value for it")


def performer(run, manifest: Manifest, params: dict[str, Any], access, secrets, policy_of):
    """The `perform` a runs.Supervisor calls for a run of an http tool. Setup faults
    (an integration that is missing, a withheld one the request needs, a URL out of bounds)
    become the run's failed result, like a code tool's."""
    from tools_app.integrations import vault
    from tools_app.integrations.errors import IntegrationError

    granted = list(access.granted)
    withheld = {d.slug: d.notice for d in access.withheld}
    try:
        found, labels = integration_values(granted)
    except (IntegrationError, vault.VaultError) as exc:
        raise RunSetupError(str(exc)) from None
    secrets = {**secrets, **labels}
    values = Values(dict(params), found, withheld)
    # Out of bounds now (settings changed since it was saved): never sent.
    context = validation_context()
    problem = http_checks.boundary_problem(manifest, context)
    policy = policy_of(granted)
    timeout = limits_for(manifest, run.timeout).timeout

    def run_it(*, on_update, cancel) -> RunOutcome:
        redactor = Redactor(secrets)
        if problem:
            message = f"request.url: {problem}"
        else:
            try:
                fill_hidden(manifest, values.params, values, context)
                message = ""
            except HttpToolError as exc:
                message = str(exc)
        if message:
            return RunOutcome(
                status="failed",
                result=redactor.redact_json(_text_result(message, error=True)),
                stderr_tail="",
                artifacts=[],
                isolation="",
                exit_code=None,
                duration=0.0,
                network_policy=policy.summary(),
            )
        return perform(
            manifest,
            values,
            policy=policy,
            secrets=secrets,
            timeout=timeout,
            artifacts_dir=work_dir(run) / "artifacts",
            on_update=on_update,
            cancel=cancel,
            reauthorize=reauthorizer(values, granted),
        )

    return run_it
