"""The three checks of a `kind: http` tool (docs/http-tools.md), run by manifest/folder.py's
validate_files, so by validate_tools, editor saves, sync, import and publishing:

- request boundary: the URL is absolute https:// (http:// only to a destination the egress
  policy's allow list names) with a literal host that is never the console's own host in
  any spelling: `localhost` and `*.localhost`, a host in settings.ALLOWED_HOSTS, or an IP
  literal (however written: 127.1, 0x7f000001, [::ffff:127.0.0.1]) that the egress policy
  refuses, unless the allow list names it explicitly.
- param reachability: a required `hidden` input (not optional, no default) is shown to
  nobody, so something must fill it. The mapping: a hidden input NAME is filled by the
  field NAME of one of the tool's declared integrations (matched against the field's name,
  or its environment variable lower-cased: `api_token` <- field `api_token` or env
  `API_TOKEN`). An OAuth access token is such a field too (an integration stores it as a
  secret field), so the same rule covers it. The executor fills it the same way.
- no guessed response schemas: every output's JMESPath `path` must resolve (search gives
  non-null) in the body of at least one `samples/*.json` with a 2xx status; else an
  "unverified output" error naming it.

Samples: `samples/*.json`, each {"source": "<doc URL or run id>", "status": 200, "body": ...}.

What the first two checks know of this console (its host names and ports, the allow lists,
the integrations) comes in a ValidationContext, which the Django layer builds
(tools_app/http_tools/context.py): this module, like the TOOL.md parser, reads neither the
settings nor the database.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import jmespath
from django.utils.http import is_same_domain

from tools_app.egress import policy as egress_policy
from tools_app.lib import nesting
from tools_app.lib.strictyaml import ERROR, Problem

if TYPE_CHECKING:  # toolmd calls check(); a Manifest is only passed through here
    from tools_app.manifest.toolmd import Manifest

SAMPLE_KEYS = ("source", "status", "body")


@dataclass(frozen=True)
class ValidationContext:
    """What checking a kind: http tool knows of this console. The default knows nothing
    (no allowed hosts, allow list or integration), for checks away from any console. The
    console's own (validation_context()) reads its database parts only when first used."""

    # settings.ALLOWED_HOSTS: the console's own host names.
    allowed_hosts: tuple[str, ...] = ()
    # The ports the console answers on: CONSOLE_PUBLIC_URL's, else dev.py's 8000.
    console_ports: frozenset[int] = frozenset({8000})
    # settings.TOOL_NETWORK_ALLOW and settings.TOOL_DNS, as written (egress_policy.build
    # reads them).
    network_allow: str = ""
    dns: str = ""
    # The System page's exceptions as stored, parsed (and resolved) only for an http tool.
    admin_entries: Sequence[str] = ()
    # {slug: its non-secret URL values} of each enabled integration, in slug order.
    integration_urls: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The slugs of the enabled integrations whose type confines egress to their URLs.
    confining: Sequence[str] = ()
    # {slug: the names a hidden input may take to be filled by it}: every integration's,
    # and every integration type's (for an integration not created yet).
    integration_fields: Mapping[str, frozenset[str]] = field(default_factory=dict)


def check(
    manifest: Manifest,
    files: Mapping[str, bytes],
    toolmd_path: str,
    lines: Mapping[str, int],
    context: ValidationContext,
) -> list[Problem]:
    folder = toolmd_path.rsplit("/", 1)[0] if "/" in toolmd_path else ""
    samples, problems = read_samples(files, folder)
    problems += boundary_problems(manifest, toolmd_path, lines.get("request.url", 1), context)
    problems += reachability_problems(manifest, toolmd_path, lines, context)
    problems += unverified_outputs(manifest, samples, toolmd_path, lines)
    return problems


# --- Samples ------------------------------------------------------------------------------


def read_samples(
    files: Mapping[str, bytes], folder: str
) -> tuple[list[dict[str, Any]], list[Problem]]:
    samples: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for name in sorted(files):
        if not (name.startswith("samples/") and name.endswith(".json")) or name.count("/") != 1:
            continue
        shown = f"{folder}/{name}" if folder else name
        try:
            data = nesting.loads(files[name].decode("utf-8"), root="")
        except UnicodeDecodeError:
            problems.append(Problem(shown, 1, "file", "is not UTF-8"))
            continue
        except json.JSONDecodeError as exc:
            problems.append(Problem(shown, exc.lineno, "file", f"is not JSON: {exc.msg}"))
            continue
        except nesting.TooDeep as exc:
            problems.append(Problem(shown, 1, "file", f"is not usable JSON: {exc}"))
            continue
        except ValueError:  # an integer past Python's digit limit
            problems.append(Problem(shown, 1, "file", "is not usable JSON: a number is too long"))
            continue
        if not isinstance(data, dict):
            problems.append(Problem(shown, 1, "file", 'must be {"source", "status", "body"}'))
            continue
        bad = False
        for key in data:
            if key not in SAMPLE_KEYS:
                message = f"unknown key (allowed: {', '.join(SAMPLE_KEYS)})"
                problems.append(Problem(shown, 1, str(key)[:64], message))
                bad = True
        source = data.get("source")
        if not isinstance(source, str) or not source.strip():
            message = "is required: the documentation URL or the run id this response came from"
            problems.append(Problem(shown, 1, "source", message))
            bad = True
        status = data.get("status")
        if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
            problems.append(Problem(shown, 1, "status", "must be an HTTP status such as 200"))
            bad = True
        if "body" not in data:
            problems.append(Problem(shown, 1, "body", "is required: the response's JSON body"))
            bad = True
        if not bad:
            samples.append({"name": name, **data})
    return samples, problems


# --- Request boundary ---------------------------------------------------------------------


def ip_spelling(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """`host` as an IP address when it is one in any spelling a client accepts."""
    host = host.strip("[]").rstrip(".")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if host and all(ch in "0123456789abcdefxABCDEFX." for ch in host) and host[0].isdigit():
        try:  # inet_aton reads 127.1, 0x7f.1, 2130706433 and 017700000001
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def _own_host(host: str, context: ValidationContext) -> bool:
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    # "*" allows any Host header; it names no host of ours. (Django's validate_host.)
    return any(is_same_domain(host, h) for h in context.allowed_hosts if h != "*")


def tool_policy(manifest: Manifest, context: ValidationContext) -> egress_policy.Policy:
    """What egress_config.tool_policy gives a run of the tool, from the context."""
    slugs = manifest.integrations
    urls = {s: urls for s, urls in context.integration_urls.items() if s in slugs}
    extra = egress_policy.integration_allows(urls) if slugs else ()
    allows = (*egress_policy.admin_allows(context.admin_entries), *extra)
    confined_by = [s for s in context.confining if s in slugs]
    return egress_policy.build(context.network_allow, allows, context.dns, confined_by)


def boundary_problem(manifest: Manifest, context: ValidationContext) -> str | None:
    """Why the request's URL is out of bounds for this console, or None."""
    assert manifest.request is not None
    parts = urlsplit(manifest.request["url"])
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    except ValueError:
        return "has an invalid port"
    ip = ip_spelling(host)
    try:
        policy = tool_policy(manifest, context)
    except egress_policy.PolicyError as exc:
        return f"the egress policy is invalid: {exc}"
    own = _own_host(host, context) or (ip is not None and _own_host(str(ip), context))
    # A service an admin allowed by address and port on the console's host (a SearXNG on
    # 127.0.0.1:8888) is not the console; the console's own port never is allowed.
    if own and (port in context.console_ports or not _named_exactly(policy, host, ip, port)):
        return (
            f"{host!r} is this console's own host: a tool never calls back into the console "
            f"(another service on this host: allow its address and port, here {port}, on "
            f"the System page or in {egress_policy.ALLOW_SETTING})"
        )
    if ip is not None:
        decision = policy.decide(ip, port)
        if not decision.allowed:
            return f"{host!r} is refused by the egress policy: {decision.reason}"
    if parts.scheme.lower() == "http":
        addresses = [ip] if ip is not None else egress_policy.resolve(host)
        allowed = addresses and all(
            any(allow.matches(address, port) for allow in policy.allows) for address in addresses
        )
        if not allowed:
            return (
                f"http:// only to a destination the egress allow list names "
                f"({egress_policy.ALLOW_SETTING} or an integration's URL); {host}:{port} is not "
                "one: use https://"
            )
    return None


def _named_exactly(policy: egress_policy.Policy, host: str, ip, port: int) -> bool:
    """An allow entry with this port names every address `host` stands for."""
    addresses = [ip] if ip is not None else egress_policy.resolve(host)
    return bool(addresses) and all(
        any(allow.port == port and allow.matches(address, port) for allow in policy.allows)
        for address in addresses
    )


def boundary_problems(
    manifest: Manifest, toolmd_path: str, line: int, context: ValidationContext
) -> list[Problem]:
    problem = boundary_problem(manifest, context)
    return [Problem(toolmd_path, line, "request.url", problem)] if problem else []


# --- Param reachability -------------------------------------------------------------------


def hidden_source(manifest: Manifest, name: str, context: ValidationContext) -> str | None:
    """The declared integration that fills hidden input `name`, or None."""
    for slug in manifest.integrations:
        names = context.integration_fields.get(slug)
        if names is not None and name in names:
            return slug
    return None


def reachability_problems(
    manifest: Manifest, toolmd_path: str, lines: Mapping[str, int], context: ValidationContext
) -> list[Problem]:
    problems = []
    for name, spec in manifest.inputs.items():
        if spec.visibility != "hidden" or spec.optional or spec.has_default:
            continue
        if hidden_source(manifest, name, context) is None:
            declared = ", ".join(manifest.integrations) or "none"
            problems.append(
                Problem(
                    toolmd_path,
                    lines.get(f"inputs.{name}", 1),
                    f"inputs.{name}",
                    f"a required hidden input nobody can fill: no declared integration "
                    f"(integrations: {declared}) has a field {name!r} (or variable "
                    f"{name.upper()}) nor an OAuth token of that name; declare one, or make "
                    "the input optional or visible",
                )
            )
    return problems


# --- No guessed response schemas ----------------------------------------------------------


def unverified_outputs(
    manifest: Manifest, samples: list[dict[str, Any]], toolmd_path: str, lines: Mapping[str, int]
) -> list[Problem]:
    proving = [s for s in samples if 200 <= s["status"] < 300]
    problems = []
    for name, spec in manifest.outputs.items():
        if any(_resolves(spec["path"], s["body"]) for s in proving):
            continue
        where = (
            f"none of the {len(proving)} 2xx sample(s) in samples/*.json"
            if proving
            else "no 2xx sample: add samples/<name>.json"
        )
        problems.append(
            Problem(
                toolmd_path,
                lines.get(f"outputs.{name}", 1),
                f"outputs.{name}",
                f"unverified output: path {spec['path']!r} resolves in {where} "
                '({"source": "<doc URL or run id>", "status": 200, "body": ...}); never guess '
                "a response's shape",
                ERROR,
            )
        )
    return problems


def _resolves(path: str, body: Any) -> bool:
    try:
        return jmespath.search(path, body) is not None
    except jmespath.exceptions.JMESPathError:
        return False
