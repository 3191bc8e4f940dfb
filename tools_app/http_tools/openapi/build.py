"""Building one draft `kind: http` tool (TOOL.md and samples) from one operation.

Inputs come from path, query and header parameters and a JSON request body; outputs only
from a documented 2xx JSON response, each proven by a sample (the documented example, or one
built from the documented schema, with `source: openapi#/paths/...`); an operation whose
response is undocumented gets no outputs and says so. A security scheme becomes the
integration the tool declares when an integration (or integration type) of that name
exists, else a note in the TOOL.md body; its secret field is sent as the scheme says: an
apiKey in a header, the query or a cookie (`Cookie: name={{slug.FIELD}}`), bearer/OAuth as
`Authorization: Bearer ...`, and HTTP Basic as `Authorization: Basic {{slug.FIELD}}` with the
field holding base64 of `user:password` (templates substitute, they never encode).

Operations the TOOL.md form cannot express (a required form/XML body, a required cookie,
OPTIONS/TRACE) are skipped with their reason."""

from __future__ import annotations

import contextlib
import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import yaml

from tools_app.http_tools import spec as http_spec
from tools_app.http_tools.openapi.document import OpenApiError
from tools_app.http_tools.openapi.refs import Resolver, pointer
from tools_app.manifest import limits as manifest_limits
from tools_app.manifest import toolmd

MAX_OPERATIONS = 2000
MAX_OUTPUTS = 30
MAX_SAMPLE_DEPTH = 8  # a sample built from a schema stops here
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
JSON_MEDIA_RE = re.compile(r"application/(?:[\w.+-]*\+)?json(?:\s*;.*)?$", re.I)
BINARY_MEDIA_RE = re.compile(r"(?:image|audio|video)/|application/(?:octet-stream|pdf|zip)", re.I)
SAMPLE_NAME = "samples/openapi.json"
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SERVER_VAR_RE = re.compile(r"\{([^{}]*)\}")
# OpenAPI says these header parameters are ignored: the request's own machinery sets them.
IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})


@dataclass
class Operation:
    """One operation of the document, as the import page lists it."""

    key: str  # operationId, else "METHOD /path"
    method: str
    path: str
    summary: str


def operations(document: dict[str, Any]) -> list[Operation]:
    found = []
    resolver = Resolver(document)
    for path, item in document["paths"].items():
        item, _ = resolver.deref(item)  # 3.1: a path item may be a $ref
        if not isinstance(item, dict):
            continue
        for method in METHODS:
            op = item.get(method)
            if not isinstance(op, dict):
                continue
            op_id = op.get("operationId")
            key = op_id if isinstance(op_id, str) and op_id.strip() else f"{method.upper()} {path}"
            summary = op.get("summary") or op.get("description") or ""
            summary = " ".join(str(summary).split())[:200]
            found.append(Operation(key, method.upper(), str(path), summary))
            if len(found) > MAX_OPERATIONS:
                raise OpenApiError(f"the document has more than {MAX_OPERATIONS} operations")
    return found


@dataclass
class Draft:
    """What one chosen operation becomes: a tool's files, or the reason it is skipped."""

    operation: Operation
    name: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    skipped: str = ""
    notes: list[str] = field(default_factory=list)
    # What validation warns about (an input left without a description, say): shown before
    # and after importing, never a reason to refuse.
    warnings: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    undocumented: bool = False  # no documented 2xx response body: no outputs


def snake(text: str) -> str:
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text)
    text = re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()
    return re.sub(r"_+", "_", text)


def _text(value: Any, limit: int = 500) -> str:
    text = " ".join(str(value or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _schema_type(schema: Any) -> str | None:
    if not isinstance(schema, dict):
        return None
    type_ = schema.get("type")
    if isinstance(type_, list):  # 3.1: ["string", "null"]
        types = [t for t in type_ if t != "null"]
        type_ = types[0] if len(types) == 1 else None
    if type_ is None and "properties" in schema:
        return "object"
    return type_ if isinstance(type_, str) else None


def _input_spec(schema: Any, description: str, required: bool) -> dict[str, Any]:
    type_ = _schema_type(schema)
    spec: dict[str, Any] = {}
    enum = schema.get("enum") if isinstance(schema, dict) else None
    extra = []
    if type_ in ("integer", "number", "boolean"):
        spec["type"] = type_
    elif (
        type_ == "string"
        and isinstance(enum, list)
        and enum
        and all(isinstance(v, str) and v.strip() and "," not in v for v in enum)
        and len(set(enum)) == len(enum)
    ):
        spec["type"] = "enum"
        spec["values"] = ", ".join(v.strip() for v in enum)
    elif type_ in ("array", "object"):
        spec["type"] = "string"
        extra.append(f"({type_} in the API: sent as given)")
    else:
        spec["type"] = "string"
    if isinstance(schema, dict) and schema.get("default") is not None:
        extra.append(f"Default: {_text(json.dumps(schema['default']), 80)}.")
    # Nothing said is left empty, not filled with words that say nothing: TOOL.md warns
    # about it, and so does the import preview (Draft.warnings).
    spec["description"] = _text(" ".join([description or "", *extra]).strip())
    if not required:
        spec["optional"] = True
    return spec


# The separator of a delimited (explode: false) array query parameter, by its style.
ARRAY_SEPARATORS = {"form": ",", "spaceDelimited": " ", "pipeDelimited": "|"}
_ARRAY_ITEM_TYPES = {"string": "string[]", "integer": "integer[]", "number": "number[]"}
_ARRAY_ITEM_TYPES |= {"boolean": "boolean[]"}


def _array_query_input(
    param: dict[str, Any], schema: dict[str, Any], description: str, required: bool
) -> dict[str, Any]:
    """An array query parameter. Delimited (explode: false) it is one string of the joined
    values; exploded (form's default, `?id=1&id=2`) it is a list input of the item type,
    which the request's whole-string `{{input}}` query template repeats per item."""
    name = param["name"]
    style = param.get("style", "form")
    explode = param.get("explode")
    if not isinstance(explode, bool):
        explode = style == "form"
    items = _merged(schema.get("items")) if isinstance(schema.get("items"), dict) else {}
    if style in ARRAY_SEPARATORS and not explode:
        sep = ARRAY_SEPARATORS[style]
        shown = {" ": "spaces"}.get(sep, f"'{sep}'")
        text = f"{description} Values separated by {shown} (a list in the API)."
        return _input_spec({"type": "string"}, text.strip(), required)
    if style in ARRAY_SEPARATORS:  # exploded: the key repeats per item
        item_type = _schema_type(items)
        extra = [f"A list: each item is sent as {name}=<item>."]
        enum = items.get("enum")
        if isinstance(enum, list) and enum:
            shown = ", ".join(json.dumps(v, ensure_ascii=False) for v in enum[:20])
            extra.append(f"Items are one of: {_text(shown, 200)}.")
        if item_type not in _ARRAY_ITEM_TYPES:
            item_type = "string"
            if _schema_type(items) in ("object", "array"):
                extra.append("(Items are structured in the API: each is sent as given.)")
        if isinstance(schema.get("default"), list):
            extra.append(f"Default: {_text(json.dumps(schema['default']), 80)}.")
        spec: dict[str, Any] = {"type": _ARRAY_ITEM_TYPES[item_type]}
        spec["description"] = _text(" ".join([description, *extra]).strip())
        if not required:
            spec["optional"] = True
        return spec
    return _input_spec(schema, description, required)


class Builder:
    def __init__(
        self, document: dict[str, Any], resolver: Resolver, origin: str, server: str
    ) -> None:
        self.document = document
        self.resolver = resolver
        self.origin = origin
        self.server = server
        self.title = _text((document.get("info") or {}).get("title") or "the API", 100)

    # -- server
    def base_url(self, path_item: dict[str, Any], op: dict[str, Any]) -> str:
        if self.server:
            return self.server.rstrip("/")
        for servers in (op.get("servers"), path_item.get("servers"), self.document.get("servers")):
            if isinstance(servers, list) and servers:
                return self._server_url(servers[0])
        raise OpenApiError(
            "the document names no server, so the API's address is unknown: give the "
            "server URL (--server https://api.example.com)"
        )

    def _server_url(self, server: Any) -> str:
        server, _ = self.resolver.deref(server)
        url = server.get("url") if isinstance(server, dict) else None
        if not isinstance(url, str) or not url.strip():
            raise OpenApiError("the first server has no url")
        variables = server.get("variables") or {}
        scheme, sep, rest = url.partition("://")
        host = re.split(r"[/?#]", rest, maxsplit=1)[0] if sep else ""
        if sep and "{" in host:
            raise OpenApiError(
                f"the server URL {url!r} has a templated host: a tool needs a literal host; "
                "give the server URL (--server https://...)"
            )

        def fill(match: re.Match[str]) -> str:
            spec = variables.get(match.group(1)) if isinstance(variables, dict) else None
            if not isinstance(spec, dict) or not isinstance(spec.get("default"), str):
                raise OpenApiError(f"server variable {{{match.group(1)}}} has no default")
            return spec["default"]

        url = _SERVER_VAR_RE.sub(fill, url)
        if not urlsplit(url).scheme or not urlsplit(url).netloc:
            raise OpenApiError(
                f"the server URL {url!r} is relative: a tool needs the API's absolute "
                "https:// address; give the server URL (--server https://...)"
            )
        return url.rstrip("/")

    # -- parameters
    def parameters(self, path_item: dict[str, Any], op: dict[str, Any], where: str) -> list[dict]:
        merged: dict[tuple[str, str], dict] = {}
        for source in (path_item.get("parameters"), op.get("parameters")):
            for raw in source or []:
                param = self.resolver.full(raw)
                if not isinstance(param, dict) or not isinstance(param.get("name"), str):
                    raise OpenApiError(f"{where}: a parameter has no name")
                merged[(param["name"], str(param.get("in")))] = param
        return list(merged.values())

    def build(self, op: Operation, name: str) -> Draft:
        draft = Draft(op, name=name)
        path_item, _ = self.resolver.deref(self.document["paths"][op.path])
        raw = path_item[op.method.lower()]
        where = f"{op.method} {op.path}"
        if op.method not in http_spec.HTTP_METHODS:
            draft.skipped = f"{op.method} is not a method a kind: http tool can send"
            return draft
        if "{{" in op.path or "}}" in op.path:  # would read as the tool's own templates
            raise OpenApiError(f"{where}: a path may not contain '{{{{' or '}}}}'")
        base = self.base_url(path_item, raw)
        inputs: dict[str, dict[str, Any]] = {}
        used: set[str] = set()
        query: dict[str, str] = {}
        headers: dict[str, str] = {}
        url_path = op.path

        def input_name(raw_name: str, location: str) -> str:
            candidate = snake(raw_name) or location
            if not candidate[0].isalpha() and candidate[0] != "_":
                candidate = f"p_{candidate}"
            candidate = candidate[:64]
            if candidate in used:
                candidate = f"{candidate[:56]}_{location}"
            n = 2
            while candidate in used:
                candidate = f"{candidate[:60]}_{n}"
                n += 1
            used.add(candidate)
            return candidate

        for param in self.parameters(path_item, raw, where):
            location = param.get("in")
            pname = param["name"]
            required = bool(param.get("required")) or location == "path"
            schema = param.get("schema")
            if schema is None and isinstance(param.get("content"), dict):
                schema = next(iter(param["content"].values()), {}).get("schema")
            description = _text(param.get("description") or "")
            if location == "header" and pname.lower() in IGNORED_HEADERS:
                continue
            if location == "cookie" or (location == "header" and not required):
                if required:
                    draft.skipped = f"the required {location} parameter {pname!r} cannot be sent"
                    return draft
                draft.notes.append(f"The optional {location} parameter `{pname}` is not sent.")
                continue
            if location not in ("path", "query", "header"):
                raise OpenApiError(f"{where}: parameter {pname!r} has no valid 'in'")
            if location == "header" and not _TOKEN_RE.fullmatch(pname):
                raise OpenApiError(f"{where}: {pname!r} is not a valid header name")
            iname = input_name(pname, location)
            if location == "query" and _schema_type(schema) == "array":
                inputs[iname] = _array_query_input(param, schema, description, required)
            else:
                inputs[iname] = _input_spec(schema, description, required)
            if location == "path":
                if "{" + pname + "}" not in url_path:
                    raise OpenApiError(f"{where}: path parameter {pname!r} is not in the path")
                url_path = url_path.replace("{" + pname + "}", "{{" + iname + "}}")
            elif location == "query":
                query[pname] = "{{" + iname + "}}"
            else:
                headers[pname] = "{{" + iname + "}}"
        leftover = re.findall(r"(?<!\{)\{([^{}]+)\}(?!\})", url_path)
        if leftover:
            raise OpenApiError(f"{where}: path parameter {leftover[0]!r} is not declared")

        request: dict[str, Any] = {"method": op.method, "url": base + url_path}
        if query:
            request["query"] = query
        body = self.request_body(raw, where, draft)
        if draft.skipped:
            return draft
        fields = body_fields(body) if body is not None else None
        if fields is not None:
            # An object body's top-level properties become typed inputs, the body a JSON
            # template of them (an optional one not given is left out of the object).
            template = {}
            for key, (schema, description, required) in fields.items():
                iname = input_name(key, "body")
                inputs[iname] = _body_field_spec(schema, description, required)
                template[key] = "{{" + iname + "}}"
            request["body"] = template
        elif body is not None:
            body_name = input_name("body", "body")
            inputs[body_name] = body.spec
            request["body"] = "{{" + body_name + "}}"

        integrations = self.security(raw, headers, query, draft)
        if headers:
            request["headers"] = headers
        outputs, sample, response = self.response(raw, op, draft)
        request["response"] = response

        # The summary and the operation's own description: agents read only this field.
        said = [str(raw.get(key) or "").strip() for key in ("summary", "description")]
        said = [text for text in dict.fromkeys(said) if text]
        if not said:  # a tool needs a description: its method and path are one
            draft.warnings.append(
                "description: the operation has neither summary nor description, so the "
                f"tool's is only '{where} of {self.title}'"
            )
        description = _text(
            " ".join(t if t.endswith((".", "!", "?")) else f"{t}." for t in said)
            or f"{where} of {self.title}",
            manifest_limits.MAX_DESCRIPTION,
        )
        front: dict[str, Any] = {
            "name": name,
            "label": _text(raw.get("summary") or op.key, 200),
            "description": description,
            "version": 1,
            "kind": "http",
        }
        if integrations:
            front["integrations"] = integrations
        if inputs:
            front["inputs"] = inputs
        front["request"] = request
        if outputs:
            front["outputs"] = outputs
            draft.outputs = list(outputs)
        frontmatter = yaml.safe_dump(
            copy.deepcopy(front), sort_keys=False, allow_unicode=True, width=1000
        )
        body_md = self.body(op, raw, draft)
        files = {"TOOL.md": f"---\n{frontmatter}---\n{body_md}".encode()}
        if sample is not None:
            files[SAMPLE_NAME] = (json.dumps(sample, indent=2, ensure_ascii=False) + "\n").encode()
        draft.files = files
        return draft

    def request_body(self, raw: dict[str, Any], where: str, draft: Draft) -> RequestBody | None:
        if "requestBody" not in raw:
            return None
        body = self.resolver.full(raw["requestBody"])
        if not isinstance(body, dict):
            raise OpenApiError(f"{where}: requestBody is not a mapping")
        required = bool(body.get("required"))
        content = body.get("content") if isinstance(body.get("content"), dict) else {}
        media = next((m for m in content if JSON_MEDIA_RE.match(m)), None)
        if draft.operation.method not in http_spec.BODY_METHODS:
            draft.notes.append(f"The request body is not sent: {draft.operation.method} has none.")
            return None
        if media is None:
            kinds = ", ".join(content) or "no media type"
            if required:
                draft.skipped = f"its request body is {kinds}; a kind: http tool sends JSON"
                return None
            draft.notes.append(f"The optional request body ({kinds}) is not sent.")
            return None
        schema = content[media].get("schema") if isinstance(content[media], dict) else None
        parts = [_text(body.get("description") or "", 300)]
        shape = self.schema_summary(schema)
        parts.append(f"The JSON request body{': ' + shape if shape else ''}.")
        spec: dict[str, Any] = {
            "type": "json",
            "description": _text(" ".join(p for p in parts if p)),
        }
        if not required:
            spec["optional"] = True
        return RequestBody(spec, _merged(schema), required)

    def schema_summary(self, schema: Any) -> str:
        schema = _merged(schema)
        type_ = _schema_type(schema)
        if type_ == "object" and isinstance(schema.get("properties"), dict):
            needed = set(schema.get("required") or [])
            fields = [
                f"{key} ({_schema_type(value) or 'any'}{', required' if key in needed else ''})"
                for key, value in list(schema["properties"].items())[:20]
            ]
            return "an object with " + ", ".join(fields)
        return f"{'an' if (type_ or 'a')[0] in 'aeiou' else 'a'} {type_}" if type_ else ""

    # -- security
    def security(
        self, raw: dict[str, Any], headers: dict[str, str], query: dict[str, str], draft: Draft
    ) -> list[str]:
        requirements = raw.get("security", self.document.get("security"))
        if not isinstance(requirements, list) or not requirements:
            return []
        first = requirements[0]
        if not isinstance(first, dict) or not first:
            return []  # {} : anonymous access is allowed
        schemes = (self.document.get("components") or {}).get("securitySchemes") or {}
        slugs: list[str] = []
        for scheme_name in first:
            scheme, _ = self.resolver.deref(schemes.get(scheme_name))
            kind = scheme.get("type") if isinstance(scheme, dict) else None
            slug = _integration_for(scheme_name)
            scheme = scheme if isinstance(scheme, dict) else {}
            basic = kind == "http" and str(scheme.get("scheme", "")).lower() == "basic"
            if slug is None:
                draft.notes.append(
                    f"The API's security scheme `{scheme_name}` ({kind or 'unknown type'}) has "
                    "no integration of that name in this console: create one, declare it under "
                    "integrations and send its credential in request.headers."
                    + (f" {BASIC_FIELD_HELP}" if basic else "")
                )
                continue
            field_name = _secret_field(slug)
            value = "{{" + f"{slug}.{field_name}" + "}}" if field_name else ""
            if not value:
                draft.notes.append(f"Integration `{slug}` has no field to send as a credential.")
            elif kind == "apiKey" and scheme.get("in") == "header" and scheme.get("name"):
                headers[str(scheme["name"])] = value
            elif kind == "apiKey" and scheme.get("in") == "query" and scheme.get("name"):
                query[str(scheme["name"])] = value
            elif (
                kind == "apiKey"
                and scheme.get("in") == "cookie"
                and isinstance(scheme.get("name"), str)
                and _TOKEN_RE.fullmatch(scheme["name"])
            ):
                # One Cookie header, `a=...; b=...` when several schemes send a cookie.
                cookie = f"{scheme['name']}={value}"
                before = headers.get("Cookie")
                headers["Cookie"] = f"{before}; {cookie}" if before else cookie
            elif basic:
                # Templates only substitute (docs/http-tools.md): no encoding step, so the
                # field holds the base64 text itself.
                headers["Authorization"] = f"Basic {value}"
                draft.notes.append(
                    f"HTTP Basic (`{scheme_name}`): the field {field_name} of integration "
                    f"`{slug}` is sent as `Authorization: Basic <{field_name}>`. "
                    + BASIC_FIELD_HELP
                )
            elif (kind == "http" and str(scheme.get("scheme", "")).lower() == "bearer") or kind in (
                "oauth2",
                "openIdConnect",
            ):
                headers["Authorization"] = f"Bearer {value}"
            else:
                draft.notes.append(
                    f"Security scheme `{scheme_name}` ({kind}) is not sent automatically: "
                    f"add the credential from integration `{slug}` to request.headers."
                )
            if slug not in slugs:
                slugs.append(slug)
        return slugs

    # -- response
    def response(
        self, raw: dict[str, Any], op: Operation, draft: Draft
    ) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
        responses = raw.get("responses") if isinstance(raw.get("responses"), dict) else {}
        codes = sorted(str(c) for c in responses if re.fullmatch(r"2(\d\d|XX)", str(c)))
        if not codes:
            draft.undocumented = True
            draft.notes.append(
                "The document describes no 2xx response: no outputs (the tool returns the "
                "response as text)."
            )
            return {}, None, "text"
        code = codes[0]
        response, _ = self.resolver.deref(responses[code])
        content = response.get("content") if isinstance(response, dict) else None
        content = content if isinstance(content, dict) else {}
        media = next((m for m in content if JSON_MEDIA_RE.match(m)), None)
        if media is None:
            if any(BINARY_MEDIA_RE.match(m) for m in content):
                draft.notes.append(f"The {code} response is a file: it becomes an artifact.")
                return {}, None, "binary"
            draft.undocumented = True
            draft.notes.append(
                f"The {code} response documents no JSON body: no outputs (returned as text)."
            )
            return {}, None, "text"
        entry = content[media] if isinstance(content[media], dict) else {}
        schema = self.resolver.full(entry["schema"]) if "schema" in entry else None
        base_ptr = pointer("paths", op.path, op.method.lower(), "responses", code, "content", media)
        example, source = self.example(entry, schema, base_ptr)
        if example is None and schema is not None:
            example = build_sample(schema)
            source = base_ptr + "/schema"
        if example is None:
            draft.undocumented = True
            draft.notes.append(
                f"The {code} response has neither a schema nor an example: no outputs."
            )
            return {}, None, "json"
        status = 200 if code == "2XX" else int(code)
        sample = {"source": "openapi" + source, "status": status, "body": example}
        outputs = derive_outputs(schema, example)
        if not outputs:
            draft.notes.append(f"The {code} response's documented body gives no outputs.")
        return outputs, sample, "json"

    def example(self, entry: dict[str, Any], schema: Any, base: str) -> tuple[Any, str]:
        if entry.get("example") is not None:
            return self.resolver.full(entry["example"]), base + "/example"
        examples = entry.get("examples")
        if isinstance(examples, dict):
            for key, item in examples.items():
                item = self.resolver.full(item)
                if isinstance(item, dict) and item.get("value") is not None:
                    value = item["value"]
                    if isinstance(value, str):  # some documents give the JSON as text
                        with contextlib.suppress(ValueError):
                            value = json.loads(value)
                    return value, f"{base}/examples/{key}/value"
        if isinstance(schema, dict):
            if schema.get("example") is not None:
                return schema["example"], base + "/schema/example"
            if isinstance(schema.get("examples"), list) and schema["examples"]:
                return schema["examples"][0], base + "/schema/examples/0"
        return None, ""

    def body(self, op: Operation, raw: dict[str, Any], draft: Draft) -> str:
        lines = [f"# {_text(raw.get('summary') or op.key, 200)}", ""]
        description = str(raw.get("description") or "").strip()
        if description:
            lines += [description[:4000], ""]
        lines += [
            f"Imported from the OpenAPI document {self.origin!r} ({self.title}): "
            f"`{op.method} {op.path}`"
            + (f" (operationId `{op.key}`)." if op.key != f"{op.method} {op.path}" else "."),
            "",
            "Outputs come only from the documented response; check the draft, then publish.",
        ]
        if draft.notes:
            lines += ["", "## Notes", ""] + [f"- {note}" for note in draft.notes]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class RequestBody:
    """A JSON request body: the one `json` input that sends it whole, and its schema."""

    spec: dict[str, Any]
    schema: Any
    required: bool


# An object body with more top-level properties than this stays one `json` input.
MAX_BODY_FIELDS = 30


def body_fields(body: RequestBody) -> dict[str, tuple[Any, str, bool]] | None:
    """{property: (schema, description, required)} when the body is an object whose
    properties are all listed (an object that takes other keys too stays one input)."""
    schema = body.schema
    if _schema_type(schema) != "object" or not isinstance(schema.get("properties"), dict):
        return None
    properties = schema["properties"]
    extra = schema.get("additionalProperties")
    if not properties or len(properties) > MAX_BODY_FIELDS or extra not in (None, False):
        return None
    needed = set(schema.get("required") or [])
    fields = {}
    for key, value in properties.items():
        if not isinstance(key, str) or not key or "{{" in key or "}}" in key:
            return None
        if isinstance(value, dict) and value.get("readOnly"):
            continue  # the server's to fill (an id), never sent
        said = value.get("description") if isinstance(value, dict) else None
        # No filler: what the document does say (the field's place in the body, its type).
        type_ = _schema_type(value) or "any JSON value"
        description = _text(said or f"The request body's `{key}` field ({type_}).")
        fields[key] = (value, description, body.required and key in needed)
    return fields or None


def _body_field_spec(schema: Any, description: str, required: bool) -> dict[str, Any]:
    """A typed input for one body property: scalars and enums as themselves, a list of
    scalars as a list input, anything nested as `json` (sent as given)."""
    type_ = _schema_type(schema)
    if type_ == "object" or (type_ is None and not isinstance(schema, dict)):
        spec = {"type": "json", "description": description}
    elif type_ == "array":
        item = _schema_type(schema.get("items"))
        list_type = _ARRAY_ITEM_TYPES.get(item or "")
        spec = {"type": list_type or "json", "description": description}
    elif type_ is None:
        spec = {"type": "json", "description": description}
    else:
        return _input_spec(schema, description, required)
    if not required:
        spec["optional"] = True
    return spec


def _merged(schema: Any) -> Any:
    """allOf parts merged into one object schema (enough to list properties)."""
    if not isinstance(schema, dict) or not isinstance(schema.get("allOf"), list):
        return schema
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    properties: dict[str, Any] = dict(merged.get("properties") or {})
    required = list(merged.get("required") or [])
    for part in schema["allOf"]:
        part = _merged(part)
        if isinstance(part, dict):
            properties.update(part.get("properties") or {})
            required += list(part.get("required") or [])
            if part.get("type") and "type" not in merged:
                merged["type"] = part["type"]
    if properties:
        merged["properties"] = properties
        merged.setdefault("type", "object")
    if required:
        merged["required"] = required
    return merged


def build_sample(schema: Any, depth: int = 0) -> Any:
    """A response body built from the documented schema only: its examples, defaults and
    enum values where it gives them, else a value of the documented type."""
    schema = _merged(schema)
    if not isinstance(schema, dict) or depth > MAX_SAMPLE_DEPTH:
        return None
    for key in ("example", "default"):
        if schema.get(key) is not None:
            return schema[key]
    if isinstance(schema.get("examples"), list) and schema["examples"]:
        return schema["examples"][0]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("oneOf", "anyOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return build_sample(schema[key][0], depth + 1)
    type_ = _schema_type(schema)
    if type_ == "object":
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        return {k: build_sample(v, depth + 1) for k, v in props.items()}
    if type_ == "array":
        item = build_sample(schema.get("items"), depth + 1)
        return [] if item is None else [item]
    return {"string": "string", "integer": 0, "number": 0.0, "boolean": True}.get(type_ or "")


_OUTPUT_TYPES = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}


def _value_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "json"


def _path_of(key: str) -> str:
    return key if _IDENT_RE.fullmatch(key) else json.dumps(key)


def derive_outputs(schema: Any, example: Any) -> dict[str, dict[str, Any]]:
    """Outputs for the documented body: the top-level fields of an object (typed from the
    schema, else from the example), or the whole body; each kept only if the sample proves
    it (the three checks' rule: no output without a sample)."""
    schema = _merged(schema)
    outputs: dict[str, dict[str, Any]] = {}
    if isinstance(example, dict):
        props = schema.get("properties") if isinstance(schema, dict) else None
        props = props if isinstance(props, dict) else {}
        needed = set(schema.get("required") or []) if isinstance(schema, dict) else set()
        for key, value in example.items():
            if value is None or len(outputs) >= MAX_OUTPUTS:
                continue
            name = snake(str(key)) or "field"
            if not name[0].isalpha() and name[0] != "_":
                name = f"f_{name}"
            name = name[:64]
            if name in outputs:
                continue
            prop = _merged(props.get(key))
            type_ = (
                _OUTPUT_TYPES.get(_schema_type(prop) or "", "json") if prop else _value_type(value)
            )
            if (
                type_ != "json"
                and _value_type(value) != type_
                and not (
                    type_ == "number" and isinstance(value, int) and not isinstance(value, bool)
                )
            ):
                type_ = "json"  # the example disagrees with the schema: promise nothing narrower
            spec: dict[str, Any] = {"type": type_, "path": _path_of(str(key))}
            if isinstance(prop, dict) and prop.get("description"):
                spec["description"] = _text(prop["description"], 300)
            if key not in needed:
                spec["nullable"] = True
            outputs[name] = spec
    elif isinstance(example, list):
        outputs["items"] = {"type": "json", "path": "@", "description": "The response's list."}
    elif example is not None:
        outputs["value"] = {"type": _value_type(example), "path": "@"}
    return outputs


def _integration_for(scheme_name: str) -> str | None:
    """The integration slug named like the security scheme, if the console has one."""
    from tools_app.integrations.types import integration_types
    from tools_app.models import Integration

    candidates = [scheme_name.lower(), snake(scheme_name).replace("_", "-"), snake(scheme_name)]
    types = integration_types()
    for slug in candidates:
        if not toolmd.SLUG_RE.fullmatch(slug):
            continue
        if Integration.objects.filter(slug=slug).exists() or slug in types:
            return slug
    return None


def _secret_field(slug: str) -> str | None:
    from tools_app.integrations.fields import fields_of
    from tools_app.integrations.types import integration_types
    from tools_app.models import Integration

    integration = Integration.objects.filter(slug=slug).first()
    if integration is not None:
        specs = fields_of(integration)
    else:
        itype = integration_types().get(slug)
        specs = itype.fields if itype is not None else ()
    secret = [s for s in specs if s.secret] or list(specs)
    return secret[0].env if secret else None


BASIC_FIELD_HELP = (
    "For HTTP Basic the secret field holds base64 of `user:password` (the output of "
    "`printf '%s' 'user:password' | base64`), not the password alone."
)
_TOKEN_RE = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}")
