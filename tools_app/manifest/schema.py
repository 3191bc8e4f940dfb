"""JSON Schema (draft 2020-12) of a tool's inputs, registry entries, and parameter checks.

Registry formats (docs/agent-api.md, "Registry", `?format=`):

- native: every manifest field plus `input_schema`, plus any `extra` (e.g. sha256);
- openai: a Chat Completions tool, `{"type": "function", "function": {...}}`;
- openai-responses: a Responses API function tool, flat:
  `{"type": "function", "name", "description", "parameters", "strict"}`;
- anthropic: a Messages API tool, `{"name", "description", "input_schema"}`;
- mcp: an MCP `Tool`, `{"name", "title", "description", "inputSchema"}`; `extra` goes
  into `_meta`, MCP's place for such data.

OpenAI and Anthropic get the schema without `$schema` and never `extra`: their APIs
refuse fields they do not know.

`strict=True` (the openai formats only) makes the schema fit OpenAI's strict mode: every
property required, optional ones nullable (`null` means "not given": validate_params drops
it), `additionalProperties: false` on every object, and none of the keywords strict mode
refuses (`default`, `writeOnly`, `contentEncoding`, `minLength`, `maxLength`; the default is
stated in the description, in JSON). A tool with a `json` input (any JSON value) cannot be
described in strict mode; it is served with `strict: false` and its ordinary schema.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from tools_app.lib import nesting
from tools_app.manifest import input_files
from tools_app.manifest.inputs import ARRAY_TYPES, InputSpec, text_problems
from tools_app.manifest.toolmd import Manifest

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
FORMATS = ("native", "openai", "openai-responses", "anthropic", "mcp")
STRICT_FORMATS = ("openai", "openai-responses")
_JSON_TYPES = {"string": "string", "number": "number", "integer": "integer"}
_JSON_TYPES |= {"boolean": "boolean", "enum": "string"}


# A file travels inside params as an object with its bytes in base64 (the run form builds
# it from an upload; agents send it so). tools_app/manifest/input_files.py checks size and encoding.
_FILE = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 255},
        "mime_type": {"type": "string", "maxLength": 255},
        "data": {"type": "string", "contentEncoding": "base64"},
    },
    "required": ["name", "data"],
    "additionalProperties": False,
}


def _property(spec: InputSpec) -> dict[str, Any]:
    # An empty description (a warning in TOOL.md) is left out: every format allows that.
    prop: dict[str, Any] = {"description": spec.description} if spec.description else {}
    if spec.type == "file":
        prop |= copy.deepcopy(_FILE)
    elif spec.type == "file[]":
        prop |= {"type": "array", "items": copy.deepcopy(_FILE)}
    elif spec.type.endswith("[]"):  # string[] number[] integer[] boolean[]
        prop |= {"type": "array", "items": {"type": _JSON_TYPES[spec.type[:-2]]}}
    elif spec.type != "json":  # json: any JSON value
        prop["type"] = _JSON_TYPES[spec.type]
    if spec.type == "enum":
        prop["enum"] = list(spec.values)
    if spec.has_default:
        prop["default"] = spec.default
    if spec.sensitive:
        prop["writeOnly"] = True
    return prop


def input_schema(
    manifest: Manifest, *, for_model: bool = False, for_caller: bool = False
) -> dict[str, Any]:
    """The JSON Schema of a tool's `params` object. `for_model`: only the inputs a model
    may fill (visibility user-or-llm and llm-only; user-only inputs come from a preset and
    hidden ones from an integration, docs/tool-format.md). `for_caller`: what a run's
    caller may send, every input but the hidden ones (the executor fills those)."""
    inputs = {
        name: spec
        for name, spec in manifest.inputs.items()
        if (not for_model or spec.model_visible) and (not for_caller or spec.visibility != "hidden")
    }
    return {
        "$schema": DRAFT_2020_12,
        "type": "object",
        "properties": {name: _property(spec) for name, spec in inputs.items()},
        "required": [name for name, spec in inputs.items() if not spec.optional],
        "additionalProperties": False,
    }


_OUTPUT_JSON_TYPES = {"string": "string", "number": "number", "integer": "integer"}
_OUTPUT_JSON_TYPES |= {"boolean": "boolean"}


def output_schema(manifest: Manifest) -> dict[str, Any] | None:
    """The schema of a tool's structured result (its `outputs`), or None without any."""
    if not manifest.outputs:
        return None
    properties: dict[str, Any] = {}
    for name, spec in manifest.outputs.items():
        prop: dict[str, Any] = {}
        json_type = _OUTPUT_JSON_TYPES.get(spec["type"])
        if json_type is not None:
            prop["type"] = [json_type, "null"] if spec.get("nullable") else json_type
        elif manifest.kind != "http" and not spec.get("nullable"):
            prop["not"] = {"type": "null"}  # any JSON value but null, as it is checked
        if spec.get("description"):
            prop["description"] = spec["description"]
        properties[name] = prop
    schema = {
        "type": "object",
        "properties": properties,
        "required": [n for n, spec in manifest.outputs.items() if not spec.get("nullable")],
    }
    if manifest.kind != "http":
        # A code tool's object is checked for other keys (tools_app/manifest/outputs.py).
        # An http tool's is built from its outputs alone; its schema stays as published
        # versions were signed with it (docs/signing.md hashes the listed schema).
        schema["additionalProperties"] = False
    return schema


def _without_dialect(schema: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in schema.items() if key != "$schema"}


# Keywords OpenAI's strict mode refuses; `default` moves into the description instead.
_NOT_STRICT = ("default", "writeOnly", "contentEncoding", "minLength", "maxLength")


def _strict_property(prop: dict[str, Any], *, nullable: bool) -> dict[str, Any]:
    """One property in strict form: objects list every property as required (the ones
    their schema leaves optional become nullable), and no refused keyword anywhere."""
    prop = {key: value for key, value in prop.items() if key not in _NOT_STRICT}
    if prop.get("type") == "object":
        required = set(prop.get("required", ()))
        prop["properties"] = {
            name: _strict_property(child, nullable=name not in required)
            for name, child in prop["properties"].items()
        }
        prop["required"] = list(prop["properties"])
        prop["additionalProperties"] = False
    if prop.get("type") == "array":
        prop["items"] = _strict_property(prop["items"], nullable=False)
    if nullable:
        prop["type"] = [prop["type"], "null"]
        if "enum" in prop:
            prop["enum"] = [*prop["enum"], None]
    return prop


def strict_schema(manifest: Manifest) -> dict[str, Any] | None:
    """The input schema in OpenAI's strict form (see the module docstring), or None when
    strict mode cannot describe it: a `json` input takes any JSON value, and strict mode
    has no schema for an object whose keys are not listed."""
    properties = {}
    for name, spec in manifest.inputs.items():
        if not spec.model_visible:  # a model never fills user-only or hidden inputs
            continue
        if spec.type == "json":
            return None
        prop = _property(spec)
        if "default" in prop:
            # JSON's spelling (false, null, ["a"]), the one a model reads in the schema.
            default = json.dumps(prop["default"], ensure_ascii=False)
            prop["description"] = f"{prop.get('description', '')} Default: {default}.".strip()
        properties[name] = _strict_property(prop, nullable=spec.optional)
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def tool_entry(
    manifest: Manifest, *, fmt: str, extra: dict[str, Any] | None = None, strict: bool = False
) -> dict[str, Any]:
    """One tool as the registry lists it in format `fmt` (one of FORMATS); `strict` only
    with STRICT_FORMATS. The native format lists every input with its visibility; the
    formats for models only the inputs a model fills."""
    if strict and fmt not in STRICT_FORMATS:
        raise ValueError(f"strict applies to the {' and '.join(STRICT_FORMATS)} formats only")
    schema = input_schema(manifest, for_model=fmt != "native")
    outputs = output_schema(manifest)
    strict_parameters = strict_schema(manifest) if strict else None
    # A tool strict mode cannot describe is served as a non-strict tool (OpenAI takes the
    # two side by side) rather than with a schema the API would refuse.
    strict = strict_parameters is not None
    parameters = strict_parameters or _without_dialect(schema)
    if fmt == "native":
        more: dict[str, Any] = {"kind": "http"} if manifest.kind == "http" else {}
        if manifest.kind == "http" or outputs is not None:
            more["output_schema"] = outputs
        return {
            "name": manifest.name,
            "label": manifest.label,
            "description": manifest.description,
            "version": manifest.version,
            # An http tool has no language (its parsed default would be a lie).
            "language": "http" if manifest.kind == "http" else manifest.language,
            "integrations": list(manifest.integrations),
            "timeout": manifest.timeout,
            "network": manifest.network,
            "input_schema": schema,
            **more,
            **(extra or {}),
        }
    if fmt == "openai":
        function = {
            "name": manifest.name,
            "description": manifest.description,
            "parameters": parameters,
        }
        if strict:
            function["strict"] = True
        return {"type": "function", "function": function}
    if fmt == "openai-responses":
        return {
            "type": "function",
            "name": manifest.name,
            "description": manifest.description,
            "parameters": parameters,
            "strict": strict,
        }
    if fmt == "anthropic":
        return {
            "name": manifest.name,
            "description": manifest.description,
            "input_schema": _without_dialect(schema),
        }
    if fmt == "mcp":
        entry: dict[str, Any] = {
            "name": manifest.name,
            "title": manifest.label,
            "description": manifest.description,
            "inputSchema": schema,
        }
        if outputs is not None:
            entry["outputSchema"] = outputs
        if extra:
            entry["_meta"] = dict(extra)
        return entry
    raise ValueError(f"unknown registry format {fmt!r}; use one of {', '.join(FORMATS)}")


def validate_params(
    manifest: Manifest, params: object, *, model: bool = False
) -> tuple[dict[str, Any], list[str]]:
    """Check `params` against the tool's inputs and fill in defaults.

    Returns (params with defaults, errors), every error as "path: message", all of them.
    A null value counts as not given (forms send empty optional fields as null). Messages
    never quote the value of a sensitive input."""
    if not isinstance(params, dict):
        return {}, [f"params: must be an object, got {_json_kind(params)}"]
    # First: jsonschema and everything after it walk the value recursively.
    too_deep = nesting.too_deep(params, "params")
    if too_deep is not None:
        return {}, [str(nesting.TooDeep(too_deep))]
    filled = {key: value for key, value in params.items() if value is not None}
    for name, spec in manifest.inputs.items():
        if spec.has_default and name not in filled:
            filled[name] = copy.deepcopy(spec.default)

    # `model`: the caller is a model (MCP), which fills only what the model formats list.
    validator = Draft202012Validator(input_schema(manifest, for_model=model, for_caller=not model))
    errors = [_message(manifest, error, model=model) for error in validator.iter_errors(filled)]
    errors += input_files.problems(manifest, filled)
    for name, value in filled.items():
        if name not in manifest.inputs:
            continue
        if isinstance(value, float) and not math.isfinite(value):
            errors.append(f"{name}: must be a finite number")
        elif manifest.inputs[name].type in ARRAY_TYPES and isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, float) and not math.isfinite(item):
                    errors.append(f"{name}.{index}: must be a finite number")
    errors += text_problems(filled)
    return filled, sorted(set(errors))


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _message(manifest: Manifest, error: ValidationError, *, model: bool = False) -> str:
    path = ".".join(str(part) for part in error.absolute_path) or "params"
    name = str(error.absolute_path[0]) if error.absolute_path else ""
    spec = manifest.inputs.get(name)
    if error.validator == "required":
        missing = str(error.message).split("'")[1] if "'" in error.message else "?"
        return f"{missing}: is required"
    if error.validator == "additionalProperties":
        # Hidden inputs are the executor's to fill (an integration), never a caller's.
        callable_ = [
            n
            for n, spec in manifest.inputs.items()
            if (spec.model_visible if model else spec.visibility != "hidden")
        ]
        unknown = sorted(str(key) for key in error.instance if key not in callable_)
        allowed = ", ".join(callable_) or "none"
        return f"{', '.join(unknown)}: unknown parameter (allowed: {allowed})"
    if spec is not None and error.validator == "type" and len(error.absolute_path) == 1:
        wanted = "true or false" if spec.type == "boolean" else f"{_article(spec.type)}"
        if spec.type == "file":
            wanted = 'a file object {"name", "mime_type", "data" (base64)}'
        elif spec.type == "file[]":
            wanted = "an array of file objects"
        elif spec.type.endswith("[]"):
            wanted = f"an array of {spec.type[:-2]} values"
        return f"{path}: must be {wanted}, got {_json_kind(error.instance)}"
    if spec is not None and error.validator == "enum":
        shown = "the value" if spec.sensitive else repr(error.instance)
        return f"{path}: {shown} is not one of {', '.join(spec.values)}"
    if spec is not None and spec.sensitive:
        return f"{path}: is not valid"
    return f"{path}: {error.message}"


def _article(type_: str) -> str:
    return {"integer": "an integer", "enum": "a string"}.get(type_, f"a {type_}")
