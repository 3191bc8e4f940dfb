"""Reading an OpenAPI 3.0/3.1 document, which comes from anywhere and so is read as hostile:
- its size is checked before anything is parsed (MAX_DOCUMENT);
- JSON is read with duplicate keys refused; YAML through tools_app/lib/strictyaml.py, which
  refuses anchors and aliases (so no "billion laughs" expansion) and deep nesting;
- only OpenAPI 3.0 and 3.1 are read."""

from __future__ import annotations

import json
import math
import re
from datetime import date, datetime
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from tools_app.lib import nesting, strictyaml

MAX_DOCUMENT = 10 * 1024 * 1024  # bytes; checked before parsing
MAX_DEPTH = nesting.MAX_DEPTH  # nesting of the document (JSON or YAML): the console's cap
_PLAIN_KEY_TAGS = {strictyaml.TAG + t for t in ("int", "float", "bool", "null")}


class OpenApiError(ValueError):
    """The document (or a chosen operation) cannot be imported; the message says why."""


def fetch_document(url: str) -> bytes:
    """The document at `url`, fetched through the console's egress policy (a private or
    loopback address only where an exception allows it), at most MAX_DOCUMENT bytes."""
    from tools_app.egress import client as http_client
    from tools_app.egress.config import console_policy

    if not url.startswith(("https://", "http://")):
        raise OpenApiError(f"{url}: not an http(s) URL")
    try:
        result = http_client.request(
            "GET", url, max_body=MAX_DOCUMENT + 1, timeout=30, policy=console_policy()
        )
    except http_client.HttpError as exc:
        raise OpenApiError(f"{url}: cannot be fetched: {exc}") from None
    if not result.ok:
        raise OpenApiError(f"{url}: the server answered {result.status}")
    if result.truncated or len(result.body) > MAX_DOCUMENT:
        raise OpenApiError(
            f"{url}: the document is larger than {MAX_DOCUMENT // 1048576} MiB; nothing imported"
        )
    return result.body


def _plain(value: Any) -> Any:
    """strictyaml's Map/Seq and YAML timestamps as plain JSON-able values."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise OpenApiError(f"duplicate key {key!r} in the JSON document")
        result[key] = value
    return result


def _depth_ok(value: Any) -> None:
    try:
        nesting.check(value, root="")
    except nesting.TooDeep as exc:
        raise OpenApiError(f"the document is too deep: {exc}") from None


def parse_document(data: bytes) -> dict[str, Any]:
    """The document as plain values, or OpenApiError. Size first, then JSON or YAML."""
    if len(data) > MAX_DOCUMENT:
        raise OpenApiError(
            f"the document is {len(data) / 1048576:.1f} MiB; at most "
            f"{MAX_DOCUMENT // 1048576} MiB are read"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise OpenApiError(f"the document is not UTF-8 (byte {exc.start})") from None
    if not text.strip():
        raise OpenApiError("the document is empty")
    if text.lstrip().startswith("{"):
        try:
            document = nesting.loads(text, root="", object_pairs_hook=_no_duplicates)
        except json.JSONDecodeError as exc:
            raise OpenApiError(f"not valid JSON: {exc.msg} (line {exc.lineno})") from None
        except nesting.TooDeep as exc:
            raise OpenApiError(f"the document is too deep: {exc}") from None
        except ValueError as exc:  # e.g. an integer of more digits than Python converts
            raise OpenApiError(f"not valid JSON: {str(exc)[:120]}") from None
    else:
        document = _read_yaml(text)
        _depth_ok(document)
    if not isinstance(document, dict):
        raise OpenApiError("not an OpenAPI document: the top level must be a mapping")
    _check_version(document)
    return document


def _read_yaml(text: str) -> Any:
    try:
        node = strictyaml.compose(text, max_depth=MAX_DEPTH)
    except strictyaml.Refused as exc:
        raise OpenApiError(f"line {exc.mark.line + 1}: {exc.message}") from None
    except yaml.YAMLError as exc:
        line = strictyaml.error_line(exc, text)
        raise OpenApiError(f"line {line}: {strictyaml.error_message(exc)}") from None
    except (UnicodeError, RecursionError) as exc:
        raise OpenApiError(f"the YAML cannot be read: {type(exc).__name__}") from None
    if node is None:
        raise OpenApiError("the document is empty")
    _string_keys(node)
    problems: list[str] = []
    reader = strictyaml.Reader(
        lambda line, key, message: problems.append(f"line {line}: {key}: {message}"),
        root_key="document",
    )
    value = reader.convert(node)
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise OpenApiError("the YAML is not plain data: " + "; ".join(problems[:5]) + more)
    return _plain(value)


def _string_keys(root: Node) -> None:
    """Plain scalar keys as strings: OpenAPI documents write `200:` for response codes,
    which YAML reads as an integer (the strict reader would refuse it as a key)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, MappingNode):
            for key, value in node.value:
                if isinstance(key, ScalarNode) and key.tag in _PLAIN_KEY_TAGS:
                    key.tag = strictyaml.TAG + "str"
                stack.append(value)
        elif isinstance(node, SequenceNode):
            stack.extend(node.value)


def _check_version(document: dict[str, Any]) -> None:
    if "swagger" in document:
        raise OpenApiError(
            f"Swagger {document.get('swagger')} (OpenAPI 2) is not supported: convert the "
            "document to OpenAPI 3.0 or 3.1 first"
        )
    version = document.get("openapi")
    if version is None:
        raise OpenApiError("not an OpenAPI document: the 'openapi' version key is missing")
    if not isinstance(version, str) or not re.match(r"3\.[01](\.\d+)?(-\S+)?$", version):
        raise OpenApiError(f"OpenAPI {version!r} is not supported: only 3.0 and 3.1 are")
    if not isinstance(document.get("paths"), dict):
        raise OpenApiError("'paths' is missing or not a mapping: no operations to import")
