"""The `request` block of a kind: http TOOL.md: the request template (method, URL, query,
headers, JSON body, response) with its `{{input}}` and `{{slug.FIELD}}` slots. (Its
`outputs`, which code tools declare too, are tools_app/manifest/outputs.py's.) Pure
parsing, like the rest of the TOOL.md parser; what the console allows (hosts,
integrations) is checks.py's."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from tools_app.lib.strictyaml import INVALID, Map, Seq, key_label, kind, show
from tools_app.manifest.document import Checker, is_number, read_string, unknown_keys
from tools_app.manifest.inputs import InputSpec
from tools_app.manifest.limits import MAX_TIMEOUT

HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
BODY_METHODS = ("POST", "PUT", "PATCH")
RESPONSES = ("json", "text", "binary")
REQUEST_KEYS = ("method", "url", "query", "headers", "body", "response", "timeout")
MAX_URL = 2048
# `{{name}}` (an input) or `{{slug.FIELD}}` (an integration value, the redaction label).
TEMPLATE_RE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
TEMPLATE_INPUT_RE = re.compile(r"[a-z_][a-z0-9_]{0,63}")
TEMPLATE_FIELD_RE = re.compile(r"([a-z0-9][a-z0-9_-]{0,63})\.([A-Za-z_][A-Za-z0-9_]{0,127})")


def template_names(text: str) -> list[str]:
    """The names inside `{{...}}` in `text`, in order (inputs and slug.FIELD labels)."""
    return [match.group(1) for match in TEMPLATE_RE.finditer(text)]


def _check_templates(
    c: Checker,
    text: str,
    line: int,
    key: str,
    inputs: Mapping[str, InputSpec],
    integrations: tuple[str, ...],
) -> None:
    for name in template_names(text):
        field_match = TEMPLATE_FIELD_RE.fullmatch(name)
        if TEMPLATE_INPUT_RE.fullmatch(name):
            if name not in inputs:
                c.error(line, key, f"{{{{{name}}}}} is not an input of this tool")
        elif field_match:
            if field_match.group(1) not in integrations:
                c.error(
                    line,
                    key,
                    f"{{{{{name}}}}}: {field_match.group(1)!r} is not in this tool's integrations",
                )
        else:
            c.error(line, key, f"{{{{{name}}}}} is neither {{{{input}}}} nor {{{{slug.FIELD}}}}")


def _walk_json_template(
    c: Checker,
    value: Any,
    line: int,
    key: str,
    inputs: Mapping[str, InputSpec],
    integrations: tuple[str, ...],
) -> Any:
    """Check every string of a JSON body template; return it JSON-able."""
    if isinstance(value, Map):
        return {
            k: _walk_json_template(
                c, v, value.value_lines[k], f"{key}.{key_label(k)}", inputs, integrations
            )
            for k, v in value.items()
        }
    if isinstance(value, Seq):
        return [
            _walk_json_template(c, v, item_line, f"{key}[{i}]", inputs, integrations)
            for i, (v, item_line) in enumerate(zip(value, value.item_lines, strict=True))
        ]
    if isinstance(value, str):
        _check_templates(c, value, line, key, inputs, integrations)
        return value
    if (
        value is None
        or isinstance(value, bool | int)
        or (isinstance(value, float) and math.isfinite(value))
    ):
        return value
    c.error(line, key, f"{kind(value)} cannot be part of a JSON body")
    return None


def _string_map(
    c: Checker,
    m: Map,
    key: str,
    inputs: Mapping[str, InputSpec],
    integrations: tuple[str, ...],
) -> dict[str, str]:
    """request.query / request.headers: a mapping of names to template strings."""
    value = m.get(key)
    if value is None or value is INVALID:
        return {}
    path = f"request.{key}"
    if not isinstance(value, Map):
        c.error(
            m.value_lines[key], path, f"must be a mapping of names to strings, got {kind(value)}"
        )
        return {}
    result: dict[str, str] = {}
    for name, item in value.items():
        line = value.value_lines[name]
        item_key = f"{path}.{key_label(name)}"
        if key == "headers" and not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}", name):
            c.error(line, item_key, "is not a valid header name")
            continue
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            c.error(line, item_key, f"must be a string, got {kind(item)}")
            continue
        text = str(item)
        _check_templates(c, text, line, item_key, inputs, integrations)
        result[name] = text
    return result


def check_request(
    c: Checker, m: Map, inputs: Mapping[str, InputSpec], integrations: tuple[str, ...]
) -> dict[str, Any] | None:
    value = m.get("request")
    if value is INVALID:
        return None
    if value is None:
        c.error(m.key_lines.get("request", 1), "request", "is required for kind: http")
        return None
    if not isinstance(value, Map):
        c.error(m.value_lines["request"], "request", f"must be a mapping, got {kind(value)}")
        return None
    unknown_keys(c, value, "request", "request", REQUEST_KEYS)
    method = value.get("method", "GET")
    if method is INVALID:
        method = "GET"
    if not isinstance(method, str) or method.upper() not in HTTP_METHODS:
        c.error(
            value.value_lines["method"],
            "request.method",
            f"{show(method)} is not one of {', '.join(HTTP_METHODS)}",
        )
        method = "GET"
    method = method.upper()
    url = read_string(c, value, "url", path="request.url", required=True)
    if url is not None:
        line = value.value_lines["url"]
        c.lines["request.url"] = line
        problem = url_shape_problem(url)
        if problem:
            c.error(line, "request.url", problem)
        else:
            _check_templates(c, url, line, "request.url", inputs, integrations)
    query = _string_map(c, value, "query", inputs, integrations)
    headers = _string_map(c, value, "headers", inputs, integrations)
    request: dict[str, Any] = {"method": method, "url": url, "query": query, "headers": headers}
    if "body" in value and value["body"] is not INVALID:
        if method not in BODY_METHODS:
            c.error(
                value.key_lines["body"],
                "request.body",
                f"only a {', '.join(BODY_METHODS)} request has a body, not {method}",
            )
        else:
            request["body"] = _walk_json_template(
                c, value["body"], value.value_lines["body"], "request.body", inputs, integrations
            )
    response = value.get("response", "json")
    if response is None or response is INVALID:
        response = "json"
    if not isinstance(response, str) or response not in RESPONSES:
        c.error(
            value.value_lines["response"],
            "request.response",
            f"{show(response)} is not one of {', '.join(RESPONSES)}",
        )
        response = "json"
    request["response"] = response
    timeout = value.get("timeout")
    if timeout is not None and timeout is not INVALID:
        if not is_number(timeout) or not 0 < timeout <= MAX_TIMEOUT:
            c.error(
                value.value_lines["timeout"],
                "request.timeout",
                f"must be seconds above 0, at most {MAX_TIMEOUT}, got {show(timeout)}",
            )
        else:
            request["timeout"] = float(timeout)
    return request


def url_shape_problem(url: str) -> str | None:
    """Why `url` is no absolute http(s) URL with a literal host, or None. (Which hosts
    may be reached is checks.py's request boundary, given what it knows of the console.)"""
    if len(url) > MAX_URL:
        return f"is longer than {MAX_URL} characters"
    if any(ch.isspace() or ord(ch) < 32 for ch in url):
        return "must not contain spaces or control characters"
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return (
            "must be an absolute https:// URL of the provider's API, never a relative or "
            "/api/ path back to this console"
        )
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "{" in authority or "}" in authority:
        return "the host must be literal: no {{template}} in the host or port"
    if "@" in authority:
        return "must not contain a user name or password: use headers with {{slug.FIELD}}"
    if not authority or authority.startswith(":"):
        return "has no host"
    if "#" in url:
        return "must not contain a #fragment"
    return None
