"""A tool's inputs: their types and visibilities, each input's spec (InputSpec) and its
checks (enum values, defaults), and the text no param may hold."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tools_app.lib.strictyaml import INVALID, Map, Seq, key_label, kind, show
from tools_app.manifest.document import Checker, is_int, is_number, read_boolean, unknown_keys

# A list of scalars, written like `file[]`: an http tool's whole-string query template
# repeats the key for each item (`?id=1&id=2`); code tools get a JSON array.
ARRAY_TYPES = ("string[]", "number[]", "integer[]", "boolean[]")
INPUT_TYPES = ("string", "number", "integer", "boolean", "enum", "json", "file", "file[]")
INPUT_TYPES += ARRAY_TYPES
VISIBILITIES = ("user-or-llm", "llm-only", "user-only", "hidden")
# What a model sees (registry formats, MCP): user-only and hidden inputs never.
MODEL_VISIBILITIES = ("user-or-llm", "llm-only")
INPUT_KEYS = ("type", "description", "optional", "sensitive", "values", "default", "visibility")
INPUT_NAME_RE = re.compile(r"[a-z_][a-z0-9_]{0,63}")


@dataclass(frozen=True)
class InputSpec:
    name: str
    type: str
    description: str
    optional: bool = False
    sensitive: bool = False
    values: tuple[str, ...] = ()
    default: Any = None
    has_default: bool = False
    visibility: str = "user-or-llm"

    @property
    def model_visible(self) -> bool:
        return self.visibility in MODEL_VISIBILITIES

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "type": self.type,
            "description": self.description,
            "optional": self.optional,
            "sensitive": self.sensitive,
        }
        if self.visibility != "user-or-llm":
            data["visibility"] = self.visibility
        if self.type == "enum":
            data["values"] = list(self.values)
        if self.has_default:
            data["default"] = self.default
        return data


def _enum_values(c: Checker, spec: Map, path: str) -> tuple[str, ...] | None:
    value = spec["values"]
    line = spec.value_lines["values"]
    key = f"{path}.values"
    items: list[Any]
    if isinstance(value, str):
        items = [item.strip() for item in value.split(",")]
    elif isinstance(value, Seq):
        c.warning(
            line,
            key,
            "a YAML list works here, but the documented form is a comma-separated string "
            "(values: a, b, c) that agents' loaders expect",
        )
        items = [item.strip() if isinstance(item, str) else item for item in value]
    else:
        c.error(line, key, f"must be a comma-separated string like 'a, b', got {kind(value)}")
        return None
    values: list[str] = []
    for item in items:
        if item is INVALID:
            return None
        if not isinstance(item, str):
            c.error(line, key, f"every value must be a string, got {kind(item)}")
            return None
        if not item:
            c.error(line, key, "has an empty value (check the commas)")
            return None
        if "," in item:
            c.error(line, key, f"value {item!r} must not contain a comma")
            return None
        if item in values:
            c.error(line, key, f"value {item!r} is listed twice")
            return None
        values.append(item)
    return tuple(values)


# PostgreSQL refuses both in JSON (a 500 when the run is stored), and no tool expects them.
_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")


def text_problems(params: dict[str, Any]) -> list[str]:
    """A NUL character or an unpaired surrogate anywhere in `params` (names included).
    Iterative: params nested thousands deep must not exhaust the stack."""
    problems = []
    stack: list[tuple[str, Any]] = [("params", params)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and _BAD_TEXT.search(key):
                    problems.append(f"{path}: a name {_bad_text(key)}")
                    continue
                stack.append((key if path == "params" else f"{path}.{key}", item))
        elif isinstance(value, list | tuple):
            stack.extend((f"{path}.{index}", item) for index, item in enumerate(value))
        elif isinstance(value, str) and _BAD_TEXT.search(value):
            problems.append(f"{path}: {_bad_text(value)}")
    return problems


def _bad_text(text: str) -> str:
    if "\x00" in text:
        return "may not contain NUL characters"
    return "is not valid Unicode (it holds an unpaired surrogate)"


def _default_matches(type_: str, value: Any, values: tuple[str, ...]) -> str | None:
    """Why `value` cannot be the default of an input of type `type_`, or None."""
    if isinstance(value, str | list | dict) and (problems := text_problems({"x": value})):
        return problems[0].partition(": ")[2]  # the run would refuse it as a param
    if type_ == "string":
        return None if isinstance(value, str) else f"must be a string, got {kind(value)}"
    if type_ == "integer":
        return None if is_int(value) else f"must be an integer, got {show(value)}"
    if type_ == "number":
        return None if is_number(value) else f"must be a number, got {show(value)}"
    if type_ == "boolean":
        return None if isinstance(value, bool) else f"must be true or false, got {show(value)}"
    if type_ == "json":
        return None
    if type_ in ARRAY_TYPES:
        if not isinstance(value, list):
            return f"must be a list of {type_[:-2]} values, got {kind(value)}"
        for item in value:
            why = _default_matches(type_[:-2], item, values)
            if why:
                return f"every item {why}"
        return None
    if type_ in ("file", "file[]"):
        return "a file input cannot have a default"
    if not isinstance(value, str) or value not in values:
        return f"{show(value)} is not one of the values {', '.join(values)}"
    return None


def _input_description(c: Checker, spec: Map, path: str, line: int) -> str | None:
    """The input's description; an empty one (`description: ''`, as an OpenAPI import
    writes for an undocumented parameter) is a warning, not an error: the tool works, but
    a model has only the name to go by. The key itself is required (docs/tool-format.md),
    so that an empty one is a choice someone can see and fill in."""
    key = f"{path}.description"
    if "description" not in spec:
        c.error(line, key, "is required (description: '' leaves it empty, with a warning)")
        return None
    value = spec["description"]
    if value is INVALID:
        return None
    if value is not None and not isinstance(value, str):
        c.error(spec.value_lines["description"], key, f"must be a string, got {kind(value)}")
        return None
    if value is None or not value.strip():
        c.warning(
            spec.value_lines.get("description", line),
            key,
            "is empty: say what the input is for (models read it to fill the input in)",
        )
        return ""
    return value.strip()


def _check_input(c: Checker, name: str, spec: Any, line: int) -> InputSpec | None:
    path = f"inputs.{name}"
    if not isinstance(spec, Map):
        c.error(
            line,
            path,
            f"must be a mapping with type and description, got {kind(spec)}",
        )
        return None
    unknown_keys(c, spec, path, "input", INPUT_KEYS)
    type_ = spec.get("type")
    if type_ is None:
        c.error(line, f"{path}.type", f"is required: one of {', '.join(INPUT_TYPES)}")
    elif type_ is not INVALID and (not isinstance(type_, str) or type_ not in INPUT_TYPES):
        c.error(
            spec.value_lines["type"],
            f"{path}.type",
            f"{show(type_)} is not one of {', '.join(INPUT_TYPES)}",
        )
        type_ = None
    description = _input_description(c, spec, path, line)
    optional = read_boolean(c, spec, "optional", path=f"{path}.optional", default=False)
    sensitive = read_boolean(c, spec, "sensitive", path=f"{path}.sensitive", default=False)
    visibility = spec.get("visibility")
    if visibility is None or visibility is INVALID:
        visibility = "user-or-llm"
    elif not isinstance(visibility, str) or visibility not in VISIBILITIES:
        c.error(
            spec.value_lines["visibility"],
            f"{path}.visibility",
            f"{show(visibility)} is not one of {', '.join(VISIBILITIES)}",
        )
        visibility = "user-or-llm"

    values: tuple[str, ...] | None = ()
    if spec.get("values") is not None and spec["values"] is not INVALID:
        if type_ == "enum":
            values = _enum_values(c, spec, path)
        elif type_ is not None:
            c.error(
                spec.value_lines["values"],
                f"{path}.values",
                f"is only allowed for type enum, not {type_}",
            )
    elif type_ == "enum":
        c.error(
            spec.key_lines.get("values", line),
            f"{path}.values",
            "is required for type enum: a comma-separated string like 'fast, thorough'",
        )
        values = None

    default = spec.get("default")
    has_default = default is not None and default is not INVALID
    if has_default and type_ is not None and values is not None:
        why = _default_matches(type_, default, values)
        if why:
            c.error(spec.value_lines["default"], f"{path}.default", why)
        elif sensitive:
            c.warning(
                spec.value_lines["default"],
                f"{path}.default",
                "a sensitive input should not have a default: TOOL.md is not secret",
            )
        elif not optional:
            c.warning(
                spec.value_lines["default"],
                f"{path}.default",
                "an input with a default is never missing; mark it optional: true",
            )
    if type_ is None or description is None or values is None:
        return None
    return InputSpec(
        name=name,
        type=type_,
        description=description,
        optional=optional,
        sensitive=sensitive,
        values=values,
        default=default if has_default else None,
        has_default=has_default,
        visibility=visibility,
    )


def check_inputs(c: Checker, m: Map) -> dict[str, InputSpec]:
    value = m.get("inputs")
    if value is None or value is INVALID:
        return {}
    if not isinstance(value, Map):
        c.error(
            m.value_lines["inputs"],
            "inputs",
            f"must be a mapping of input names to specs, got {kind(value)}",
        )
        return {}
    inputs: dict[str, InputSpec] = {}
    for name, spec in value.items():
        line = value.key_lines[name]
        if not INPUT_NAME_RE.fullmatch(name):
            c.error(
                line,
                f"inputs.{key_label(name)}",
                f"{name!r} is not a valid input name: lowercase letters, digits and _, "
                "not starting with a digit, at most 64 characters",
            )
            continue
        if spec is INVALID:
            continue
        c.lines[f"inputs.{name}"] = line
        checked = _check_input(c, name, spec, line)
        if checked is not None:
            inputs[name] = checked
    return inputs
