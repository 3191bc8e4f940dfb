"""A tool's `outputs`: the structured result it promises (MCP's outputSchema), and the check
of a result against them.

An http tool reads each output from its JSON response by a JMESPath `path`; a code tool
returns them itself, as the `structuredContent` object of its result. Both declare the same
keys (a code tool has no `path`), both are listed as the same schema
(tools_app/manifest/schema.py) and both are held to it here. Pure: no settings, no database.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tools_app.lib.strictyaml import INVALID, Map, key_label, kind, show
from tools_app.manifest.document import Checker, read_boolean, read_string, unknown_keys
from tools_app.manifest.inputs import INPUT_NAME_RE

OUTPUT_TYPES = ("string", "number", "integer", "boolean", "json")
HTTP_OUTPUT_KEYS = ("type", "path", "description", "nullable")
CODE_OUTPUT_KEYS = ("type", "description", "nullable")
# The languages whose harness passes a result's structuredContent on (a bash tool's result
# is its stdout).
STRUCTURED_LANGUAGES = ("typescript", "javascript", "python")


def check_outputs(
    c: Checker,
    m: Map,
    *,
    http: bool,
    request: dict[str, Any] | None = None,
    language: str | None = None,
) -> dict[str, dict[str, Any]]:
    """The `outputs` block: name -> {type, description, nullable}, and for an http tool
    `path`, a JMESPath expression into its response (`request`: the checked request, None
    when it had errors)."""
    value = m.get("outputs")
    if value is None or value is INVALID:
        return {}
    if not isinstance(value, Map):
        c.error(m.value_lines["outputs"], "outputs", f"must be a mapping, got {kind(value)}")
        return {}
    if request is not None and request.get("response") != "json":
        c.error(
            m.key_lines["outputs"],
            "outputs",
            f"outputs need response: json (this request's response is {request.get('response')})",
        )
        return {}
    if not http and language not in STRUCTURED_LANGUAGES:
        c.error(
            m.key_lines["outputs"],
            "outputs",
            f"a {language} tool cannot return structuredContent (its result is its stdout): "
            "declare outputs in a TypeScript, JavaScript or Python tool",
        )
        return {}
    outputs: dict[str, dict[str, Any]] = {}
    for name, spec in value.items():
        line = value.key_lines[name]
        path = f"outputs.{key_label(name)}"
        if not INPUT_NAME_RE.fullmatch(name):
            c.error(line, path, f"{name!r} is not a valid output name")
            continue
        if not isinstance(spec, Map):
            what = "type and path" if http else "a type"
            c.error(line, path, f"must be a mapping with {what}, got {kind(spec)}")
            continue
        if not http and "path" in spec:
            c.error(
                spec.key_lines["path"],
                f"{path}.path",
                "is only for kind: http (a code tool returns structuredContent itself)",
            )
            continue
        unknown_keys(c, spec, path, "output", HTTP_OUTPUT_KEYS if http else CODE_OUTPUT_KEYS)
        type_ = spec.get("type")
        if type_ is None:
            c.error(line, f"{path}.type", f"is required: one of {', '.join(OUTPUT_TYPES)}")
            continue
        if type_ is INVALID:
            continue
        if not isinstance(type_, str) or type_ not in OUTPUT_TYPES:
            c.error(
                spec.value_lines["type"],
                f"{path}.type",
                f"{show(type_)} is not one of {', '.join(OUTPUT_TYPES)}",
            )
            continue
        entry: dict[str, Any] = {"type": type_}
        if http:
            expression = _check_path(c, spec, path)
            if expression is None:
                continue
            entry["path"] = expression
        description = ""
        if spec.get("description") is not None:
            description = (
                read_string(c, spec, "description", path=f"{path}.description", required=False)
                or ""
            )
        nullable = read_boolean(c, spec, "nullable", path=f"{path}.nullable", default=False)
        c.lines[path] = line
        outputs[name] = {**entry, "description": description, "nullable": nullable}
    return outputs


def _check_path(c: Checker, spec: Map, path: str) -> str | None:
    import jmespath
    import jmespath.exceptions

    expression = read_string(c, spec, "path", path=f"{path}.path", required=True)
    if expression is None:
        return None
    try:
        jmespath.compile(expression)
    except jmespath.exceptions.JMESPathError as exc:
        reason = " ".join(str(exc).split())[:160]
        c.error(spec.value_lines["path"], f"{path}.path", f"is not a JMESPath expression: {reason}")
        return None
    return expression


def type_problem(spec: Mapping[str, Any], value: Any) -> str | None:
    """Why `value` does not match one output's type, or None."""
    if value is None:
        return None if spec.get("nullable") else "is null (and it is not nullable)"
    type_ = spec["type"]
    ok = {
        "string": isinstance(value, str),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
        "json": True,
    }[type_]
    return None if ok else f"expected {type_}, got {json_kind(value)}"


def json_kind(value: Any) -> str:
    """A JSON value's kind as a tool author would say it (YAML's words but for arrays and
    objects)."""
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return kind(value)


def structured_problems(outputs: Mapping[str, Mapping[str, Any]], structured: Any) -> list[str]:
    """Why a code tool's structuredContent does not match its `outputs` (empty: it does):
    an object with every output that is not nullable, each of its type, and no other key
    (the listed schema says additionalProperties: false)."""
    if not isinstance(structured, dict):
        return [f"structuredContent must be an object, got {json_kind(structured)}"]
    problems = []
    for name, spec in outputs.items():
        if name not in structured:
            if not spec.get("nullable"):
                problems.append(f"{name}: is missing")
            continue
        why = type_problem(spec, structured[name])
        if why:
            problems.append(f"{name}: {why}")
    for name in structured:
        if name not in outputs:
            problems.append(f"{str(name)[:64]}: is not one of the tool's outputs")
    return problems
