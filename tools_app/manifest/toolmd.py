"""TOOL.md: parse and validate a tool's manifest (docs/tool-format.md).

A TOOL.md is YAML frontmatter between `---` lines followed by a Markdown body. Parsing never
raises on bad input: it returns a ParseResult holding a Manifest when there is no error, and
every problem found, each naming the file, the 1-based line in TOOL.md and the key.

Choices docs/tool-format.md leaves open, fixed here:

- The YAML is only composed into nodes (libyaml's parser where PyYAML has it, else
  SafeLoader's), by a composer that refuses anchors and aliases (an error, never an
  expansion) and nesting deeper than MAX_DEPTH; then custom tags, merge keys, non-string
  and duplicate keys are refused. Size caps are checked before any YAML is read.
- An optional key given as an empty value (`label:`) or `null` means "not set": the default
  applies. A required key given that way is missing.
- Enum `values` is a comma-separated string (`values: fast, thorough`; items are stripped).
  A YAML list of strings is accepted too, with a warning, because agents' loaders read the
  same file and the documented form is the string.
- `version` is at most 2**31 - 1 (it is stored in a database integer column).
- Integration slugs match SLUG_RE.
- Problems about the file as a whole use the key `file` (size, encoding); a missing
  TOOL.md uses the key `TOOL.md`; a missing entry file `entry`; a folder over bundle's
  limits or holding links `files`; a path given to scan() that is missing or empty `path`.
"""

from __future__ import annotations

import ast
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

from tools_app.catalog import bundle
from tools_app.http_tools import checks as http_checks
from tools_app.http_tools.checks import ValidationContext
from tools_app.lib import strictyaml
from tools_app.lib.strictyaml import ERROR, WARNING, Problem
from tools_app.manifest import jssyntax
from tools_app.manifest.languages import DEFAULT_LANGUAGE, ENTRY_FILES, LANGUAGES, TOOL_KINDS

# A list of scalars, written like `file[]`: an http tool's whole-string query template
# repeats the key for each item (`?id=1&id=2`); code tools get a JSON array.
ARRAY_TYPES = ("string[]", "number[]", "integer[]", "boolean[]")
INPUT_TYPES = ("string", "number", "integer", "boolean", "enum", "json", "file", "file[]")
INPUT_TYPES += ARRAY_TYPES
VISIBILITIES = ("user-or-llm", "llm-only", "user-only", "hidden")
# What a model sees (registry formats, MCP): user-only and hidden inputs never.
MODEL_VISIBILITIES = ("user-or-llm", "llm-only")
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
BODY_METHODS = ("POST", "PUT", "PATCH")
RESPONSES = ("json", "text", "binary")
OUTPUT_TYPES = ("string", "number", "integer", "boolean", "json")
REQUEST_KEYS = ("method", "url", "query", "headers", "body", "response", "timeout")
OUTPUT_KEYS = ("type", "path", "description", "nullable")
MAX_URL = 2048
# `{{name}}` (an input) or `{{slug.FIELD}}` (an integration value, the redaction label).
TEMPLATE_RE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
TEMPLATE_INPUT_RE = re.compile(r"[a-z_][a-z0-9_]{0,63}")
TEMPLATE_FIELD_RE = re.compile(r"([a-z0-9][a-z0-9_-]{0,63})\.([A-Za-z_][A-Za-z0-9_]{0,127})")
INPUT_KEYS = ("type", "description", "optional", "sensitive", "values", "default", "visibility")
TOP_KEYS = (
    "name",
    "label",
    "description",
    "version",
    "language",
    "inputs",
    "integrations",
    "timeout",
    "network",
    "kind",
    "request",
    "outputs",
    "annotations",
)
# MCP tool annotations a TOOL.md may state (served by /mcp; `network: false` always makes
# openWorldHint false).
ANNOTATION_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")

MAX_FRONTMATTER = 64 * 1024
MAX_TOOLMD = 256 * 1024
MAX_DESCRIPTION = 2000
MAX_VERSION = 2**31 - 1
MAX_TIMEOUT = 900
MAX_DEPTH = strictyaml.MAX_DEPTH
DEFAULT_TIMEOUT = 60

NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")
INPUT_NAME_RE = re.compile(r"[a-z_][a-z0-9_]{0,63}")
SLUG_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")

# The frontmatter starts on the line after the opening `---`.
FIRST_FRONTMATTER_LINE = 2

_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_DELIMITER_RE = re.compile(r"---[ \t]*(?:\r\n|\r|\n)?")
_INVALID = strictyaml.INVALID


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


@dataclass(frozen=True)
class Manifest:
    name: str
    label: str
    description: str
    version: int = 1
    language: str = DEFAULT_LANGUAGE
    inputs: dict[str, InputSpec] = field(default_factory=dict)
    integrations: tuple[str, ...] = ()
    timeout: int = DEFAULT_TIMEOUT
    network: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    body: str = ""
    kind: str = "code"
    # kind http: {method, url, query, headers, body (absent: none), response, timeout}
    request: dict[str, Any] | None = None
    # kind http: name -> {type, path, description, nullable}
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def entry_candidates(self) -> tuple[str, ...]:
        return () if self.kind == "http" else ENTRY_FILES[self.language]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, stable key order; the body is left out (it is stored as TOOL.md)."""
        return {
            "name": self.name,
            "label": self.label,
            "description": self.description,
            "version": self.version,
            "language": self.language,
            "inputs": {name: spec.to_dict() for name, spec in self.inputs.items()},
            "integrations": list(self.integrations),
            "timeout": self.timeout,
            "network": self.network,
            "extra": dict(self.extra),
            **(
                {"kind": "http", "request": self.request, "outputs": self.outputs}
                if self.kind == "http"
                else {}
            ),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], body: str = "") -> Manifest:
        """Rebuild a manifest stored with to_dict() (trusted data, not validated again)."""
        inputs = {
            name: InputSpec(
                name=name,
                type=spec["type"],
                description=spec.get("description", ""),
                optional=bool(spec.get("optional", False)),
                sensitive=bool(spec.get("sensitive", False)),
                values=tuple(spec.get("values", ())),
                default=spec.get("default"),
                has_default="default" in spec,
                visibility=spec.get("visibility", "user-or-llm"),
            )
            for name, spec in (data.get("inputs") or {}).items()
        }
        return cls(
            name=data["name"],
            label=data.get("label") or data["name"],
            description=data.get("description", ""),
            version=int(data.get("version", 1)),
            language=data.get("language", DEFAULT_LANGUAGE),
            inputs=inputs,
            integrations=tuple(data.get("integrations") or ()),
            timeout=int(data.get("timeout", DEFAULT_TIMEOUT)),
            network=bool(data.get("network", True)),
            extra=dict(data.get("extra") or {}),
            body=body,
            kind=data.get("kind", "code"),
            request=data.get("request"),
            outputs=dict(data.get("outputs") or {}),
        )


@dataclass
class ParseResult:
    manifest: Manifest | None
    problems: list[Problem] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)  # "outputs.x" -> its TOOL.md line

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == ERROR]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == WARNING]

    @property
    def ok(self) -> bool:
        return not self.errors


# --- Splitting frontmatter and body -------------------------------------------------------


@dataclass(frozen=True)
class _Split:
    """Character offsets of the frontmatter in a TOOL.md text (BOM already removed)."""

    fm_start: int  # first character after the opening `---` line
    fm_end: int  # first character of the closing `---` line
    body_start: int  # first character after the closing `---` line
    newline: str  # the opening line's line ending


def _split(text: str) -> _Split | str:
    """Locate the frontmatter, or return why there is none."""
    lines = _LINE_RE.finditer(text)
    first = next(lines, None)
    if first is None or not _DELIMITER_RE.fullmatch(first.group()):
        return "TOOL.md must start with a '---' line, then YAML frontmatter and a '---' line"
    opening = first.group()
    newline = opening[len(opening.rstrip("\r\n")) :] or "\n"
    for line in lines:
        if _DELIMITER_RE.fullmatch(line.group()):
            return _Split(first.end(), line.start(), line.end(), newline)
    return "the frontmatter is not closed: no '---' line after it"


def _byte_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


# --- YAML: the shared strict reader (tools_app.lib.strictyaml) ------------------------------

_Refused = strictyaml.Refused
_Map = strictyaml.Map
_Seq = strictyaml.Seq
_key_label = strictyaml.key_label


def _unknown_keys(c: _Checker, spec: _Map, path: str, what: str, allowed: tuple[str, ...]) -> None:
    """An error for each key of `spec` outside `allowed` (an input's, output's, request's)."""
    message = f"unknown {what} key {{key!r}} (allowed: {{allowed}})"
    strictyaml.report_unknown_keys(c.error, spec, allowed, message, path)


_kind = strictyaml.kind
_show = strictyaml.show


def compose_frontmatter(text: str) -> Node | None:
    """Compose frontmatter YAML into nodes; raises yaml.YAMLError, UnicodeError or Refused."""
    return strictyaml.compose(text)


class _Checker:
    """Collects problems for one TOOL.md."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.problems: list[Problem] = []
        self.lines: dict[str, int] = {}  # key -> line, for checks made after parsing

    def error(self, line: int, key: str, message: str) -> None:
        self.add(line, key, message, ERROR)

    def warning(self, line: int, key: str, message: str) -> None:
        self.add(line, key, message, WARNING)

    def add(self, line: int, key: str, message: str, severity: str) -> None:
        # One problem, one output line, whatever odd text the file held.
        message = " ".join(message.split())
        self.problems.append(Problem(self.path, line, key, message, severity))

    @property
    def failed(self) -> bool:
        return any(p.severity == ERROR for p in self.problems)

    def convert(self, node: Node, key: str) -> Any:
        reader = strictyaml.Reader(
            self.error, first_line=FIRST_FRONTMATTER_LINE, root_key="frontmatter"
        )
        return reader.convert(node, key)


# --- Validation -------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


def _string(c: _Checker, m: _Map, key: str, *, path: str, required: bool) -> str | None:
    """A non-empty string (stripped), or None when absent/invalid (reported)."""
    value = m.get(key)
    if value is _INVALID:
        return None
    if value is None:
        if required:
            c.error(m.key_lines.get(key, m.line), path, "is required")
        return None
    if not isinstance(value, str):
        c.error(m.value_lines[key], path, f"must be a string, got {_kind(value)}")
        return None
    if not value.strip():
        c.error(m.value_lines[key], path, "must not be empty")
        return None
    return value.strip()


def _boolean(c: _Checker, m: _Map, key: str, *, path: str, default: bool) -> bool:
    value = m.get(key)
    if value is None or value is _INVALID:
        return default
    if not isinstance(value, bool):
        c.error(m.value_lines[key], path, f"must be true or false, got {_show(value)}")
        return default
    return value


def _integer(c: _Checker, m: _Map, key: str, *, low: int, high: int, default: int) -> int:
    value = m.get(key)
    if value is None or value is _INVALID:
        return default
    if not _is_int(value):
        c.error(m.value_lines[key], key, f"must be an integer, got {_show(value)}")
        return default
    if not low <= value <= high:
        c.error(m.value_lines[key], key, f"{value} is not between {low} and {high}")
        return default
    return value


def _check_name(c: _Checker, m: _Map, folder_name: str | None) -> str | None:
    name = m.get("name")
    if name is _INVALID:
        return None
    if name is None:
        c.error(m.key_lines.get("name", 1), "name", "is required")
        return None
    line = m.value_lines["name"]
    if not isinstance(name, str):
        c.error(line, "name", f"must be a string, got {_kind(name)}")
        return None
    if not NAME_RE.fullmatch(name):
        c.error(
            line,
            "name",
            f"{_show(name)} is not a valid name: lowercase letters, digits and _, "
            "starting with a letter, at most 64 characters",
        )
        return None
    if folder_name is not None and name != folder_name:
        c.error(line, "name", f"{name!r} must equal the folder name {folder_name!r}")
    return name


def _check_description(c: _Checker, m: _Map) -> str | None:
    if "description" not in m:
        c.error(1, "description", "is required")
        return None
    description = _string(c, m, "description", path="description", required=True)
    if description is not None and len(description) > MAX_DESCRIPTION:
        c.error(
            m.value_lines["description"],
            "description",
            f"is {len(description)} characters long; at most {MAX_DESCRIPTION} are allowed",
        )
        return None
    return description


def _check_language(c: _Checker, m: _Map) -> str:
    language = m.get("language")
    if language is None or language is _INVALID:
        return DEFAULT_LANGUAGE
    if not isinstance(language, str) or language not in LANGUAGES:
        c.error(
            m.value_lines["language"],
            "language",
            f"{_show(language)} is not one of {', '.join(LANGUAGES)}",
        )
        return DEFAULT_LANGUAGE
    return language


def _check_integrations(c: _Checker, m: _Map) -> tuple[str, ...]:
    value = m.get("integrations")
    if value is None or value is _INVALID:
        return ()
    if not isinstance(value, _Seq):
        c.error(
            m.value_lines["integrations"],
            "integrations",
            f"must be a list of integration slugs like [github], got {_kind(value)}",
        )
        return ()
    slugs: list[str] = []
    for i, (slug, line) in enumerate(zip(value, value.item_lines, strict=True)):
        key = f"integrations[{i}]"
        if slug is _INVALID:
            continue
        if not isinstance(slug, str) or not SLUG_RE.fullmatch(slug):
            c.error(
                line,
                key,
                f"{_show(slug)} is not an integration slug (lowercase letters, digits, _ and -)",
            )
        elif slug in slugs:
            c.error(line, key, f"{slug!r} is listed twice")
        else:
            slugs.append(slug)
    return tuple(slugs)


def _enum_values(c: _Checker, spec: _Map, path: str) -> tuple[str, ...] | None:
    value = spec["values"]
    line = spec.value_lines["values"]
    key = f"{path}.values"
    items: list[Any]
    if isinstance(value, str):
        items = [item.strip() for item in value.split(",")]
    elif isinstance(value, _Seq):
        c.warning(
            line,
            key,
            "a YAML list works here, but the documented form is a comma-separated string "
            "(values: a, b, c) that agents' loaders expect",
        )
        items = [item.strip() if isinstance(item, str) else item for item in value]
    else:
        c.error(line, key, f"must be a comma-separated string like 'a, b', got {_kind(value)}")
        return None
    values: list[str] = []
    for item in items:
        if item is _INVALID:
            return None
        if not isinstance(item, str):
            c.error(line, key, f"every value must be a string, got {_kind(item)}")
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
        return None if isinstance(value, str) else f"must be a string, got {_kind(value)}"
    if type_ == "integer":
        return None if _is_int(value) else f"must be an integer, got {_show(value)}"
    if type_ == "number":
        return None if _is_number(value) else f"must be a number, got {_show(value)}"
    if type_ == "boolean":
        return None if isinstance(value, bool) else f"must be true or false, got {_show(value)}"
    if type_ == "json":
        return None
    if type_ in ARRAY_TYPES:
        if not isinstance(value, list):
            return f"must be a list of {type_[:-2]} values, got {_kind(value)}"
        for item in value:
            why = _default_matches(type_[:-2], item, values)
            if why:
                return f"every item {why}"
        return None
    if type_ in ("file", "file[]"):
        return "a file input cannot have a default"
    if not isinstance(value, str) or value not in values:
        return f"{_show(value)} is not one of the values {', '.join(values)}"
    return None


def _input_description(c: _Checker, spec: _Map, path: str, line: int) -> str | None:
    """The input's description; an empty one (`description: ''`, as an OpenAPI import
    writes for an undocumented parameter) is a warning, not an error: the tool works, but
    a model has only the name to go by. The key itself is required (DESIGN.md), so that
    an empty one is a choice someone can see and fill in."""
    key = f"{path}.description"
    if "description" not in spec:
        c.error(line, key, "is required (description: '' leaves it empty, with a warning)")
        return None
    value = spec["description"]
    if value is _INVALID:
        return None
    if value is not None and not isinstance(value, str):
        c.error(spec.value_lines["description"], key, f"must be a string, got {_kind(value)}")
        return None
    if value is None or not value.strip():
        c.warning(
            spec.value_lines.get("description", line),
            key,
            "is empty: say what the input is for (models read it to fill the input in)",
        )
        return ""
    return value.strip()


def _check_input(c: _Checker, name: str, spec: Any, line: int) -> InputSpec | None:
    path = f"inputs.{name}"
    if not isinstance(spec, _Map):
        c.error(
            line,
            path,
            f"must be a mapping with type and description, got {_kind(spec)}",
        )
        return None
    _unknown_keys(c, spec, path, "input", INPUT_KEYS)
    type_ = spec.get("type")
    if type_ is None:
        c.error(line, f"{path}.type", f"is required: one of {', '.join(INPUT_TYPES)}")
    elif type_ is not _INVALID and (not isinstance(type_, str) or type_ not in INPUT_TYPES):
        c.error(
            spec.value_lines["type"],
            f"{path}.type",
            f"{_show(type_)} is not one of {', '.join(INPUT_TYPES)}",
        )
        type_ = None
    description = _input_description(c, spec, path, line)
    optional = _boolean(c, spec, "optional", path=f"{path}.optional", default=False)
    sensitive = _boolean(c, spec, "sensitive", path=f"{path}.sensitive", default=False)
    visibility = spec.get("visibility")
    if visibility is None or visibility is _INVALID:
        visibility = "user-or-llm"
    elif not isinstance(visibility, str) or visibility not in VISIBILITIES:
        c.error(
            spec.value_lines["visibility"],
            f"{path}.visibility",
            f"{_show(visibility)} is not one of {', '.join(VISIBILITIES)}",
        )
        visibility = "user-or-llm"

    values: tuple[str, ...] | None = ()
    if spec.get("values") is not None and spec["values"] is not _INVALID:
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
    has_default = default is not None and default is not _INVALID
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


def _check_inputs(c: _Checker, m: _Map) -> dict[str, InputSpec]:
    value = m.get("inputs")
    if value is None or value is _INVALID:
        return {}
    if not isinstance(value, _Map):
        c.error(
            m.value_lines["inputs"],
            "inputs",
            f"must be a mapping of input names to specs, got {_kind(value)}",
        )
        return {}
    inputs: dict[str, InputSpec] = {}
    for name, spec in value.items():
        line = value.key_lines[name]
        if not INPUT_NAME_RE.fullmatch(name):
            c.error(
                line,
                f"inputs.{_key_label(name)}",
                f"{name!r} is not a valid input name: lowercase letters, digits and _, "
                "not starting with a digit, at most 64 characters",
            )
            continue
        if spec is _INVALID:
            continue
        c.lines[f"inputs.{name}"] = line
        checked = _check_input(c, name, spec, line)
        if checked is not None:
            inputs[name] = checked
    return inputs


def _check_annotations(c: _Checker, m: _Map) -> dict[str, bool] | None:
    """`annotations:`, a mapping of MCP hints to true or false."""
    value = m["annotations"]
    if not isinstance(value, _Map):
        c.error(
            m.value_lines["annotations"], "annotations", f"must be a mapping, got {_kind(value)}"
        )
        return None
    hints: dict[str, bool] = {}
    for key, hint in value.items():
        line = value.value_lines[key]
        if key not in ANNOTATION_HINTS:
            c.warning(
                value.key_lines[key],
                f"annotations.{_key_label(key)}",
                f"unknown hint is ignored; hints are {', '.join(ANNOTATION_HINTS)}",
            )
        elif not isinstance(hint, bool):
            c.error(line, f"annotations.{key}", f"must be true or false, got {_kind(hint)}")
        else:
            hints[key] = hint
    return hints


def _check_kind(c: _Checker, m: _Map) -> str:
    kind = m.get("kind")
    if kind is None or kind is _INVALID:
        return "code"
    if not isinstance(kind, str) or kind not in TOOL_KINDS:
        c.error(
            m.value_lines["kind"], "kind", f"{_show(kind)} is not one of {', '.join(TOOL_KINDS)}"
        )
        return "code"
    return kind


def template_names(text: str) -> list[str]:
    """The names inside `{{...}}` in `text`, in order (inputs and slug.FIELD labels)."""
    return [match.group(1) for match in TEMPLATE_RE.finditer(text)]


def _check_templates(
    c: _Checker,
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
    c: _Checker,
    value: Any,
    line: int,
    key: str,
    inputs: Mapping[str, InputSpec],
    integrations: tuple[str, ...],
) -> Any:
    """Check every string of a JSON body template; return it JSON-able."""
    if isinstance(value, _Map):
        return {
            k: _walk_json_template(
                c, v, value.value_lines[k], f"{key}.{_key_label(k)}", inputs, integrations
            )
            for k, v in value.items()
        }
    if isinstance(value, _Seq):
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
    c.error(line, key, f"{_kind(value)} cannot be part of a JSON body")
    return None


def _string_map(
    c: _Checker,
    m: _Map,
    key: str,
    inputs: Mapping[str, InputSpec],
    integrations: tuple[str, ...],
) -> dict[str, str]:
    """request.query / request.headers: a mapping of names to template strings."""
    value = m.get(key)
    if value is None or value is _INVALID:
        return {}
    path = f"request.{key}"
    if not isinstance(value, _Map):
        c.error(
            m.value_lines[key], path, f"must be a mapping of names to strings, got {_kind(value)}"
        )
        return {}
    result: dict[str, str] = {}
    for name, item in value.items():
        line = value.value_lines[name]
        item_key = f"{path}.{_key_label(name)}"
        if key == "headers" and not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}", name):
            c.error(line, item_key, "is not a valid header name")
            continue
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            c.error(line, item_key, f"must be a string, got {_kind(item)}")
            continue
        text = str(item)
        _check_templates(c, text, line, item_key, inputs, integrations)
        result[name] = text
    return result


def _check_request(
    c: _Checker, m: _Map, inputs: Mapping[str, InputSpec], integrations: tuple[str, ...]
) -> dict[str, Any] | None:
    value = m.get("request")
    if value is _INVALID:
        return None
    if value is None:
        c.error(m.key_lines.get("request", 1), "request", "is required for kind: http")
        return None
    if not isinstance(value, _Map):
        c.error(m.value_lines["request"], "request", f"must be a mapping, got {_kind(value)}")
        return None
    _unknown_keys(c, value, "request", "request", REQUEST_KEYS)
    method = value.get("method", "GET")
    if method is _INVALID:
        method = "GET"
    if not isinstance(method, str) or method.upper() not in HTTP_METHODS:
        c.error(
            value.value_lines["method"],
            "request.method",
            f"{_show(method)} is not one of {', '.join(HTTP_METHODS)}",
        )
        method = "GET"
    method = method.upper()
    url = _string(c, value, "url", path="request.url", required=True)
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
    if "body" in value and value["body"] is not _INVALID:
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
    if response is None or response is _INVALID:
        response = "json"
    if not isinstance(response, str) or response not in RESPONSES:
        c.error(
            value.value_lines["response"],
            "request.response",
            f"{_show(response)} is not one of {', '.join(RESPONSES)}",
        )
        response = "json"
    request["response"] = response
    timeout = value.get("timeout")
    if timeout is not None and timeout is not _INVALID:
        if not _is_number(timeout) or not 0 < timeout <= MAX_TIMEOUT:
            c.error(
                value.value_lines["timeout"],
                "request.timeout",
                f"must be seconds above 0, at most {MAX_TIMEOUT}, got {_show(timeout)}",
            )
        else:
            request["timeout"] = float(timeout)
    return request


def url_shape_problem(url: str) -> str | None:
    """Why `url` is no absolute http(s) URL with a literal host, or None. (Which hosts
    may be reached is httpchecks' request boundary, given what it knows of the console.)"""
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


def _check_outputs(
    c: _Checker, m: _Map, request: dict[str, Any] | None
) -> dict[str, dict[str, Any]]:
    value = m.get("outputs")
    if value is None or value is _INVALID:
        return {}
    if not isinstance(value, _Map):
        c.error(m.value_lines["outputs"], "outputs", f"must be a mapping, got {_kind(value)}")
        return {}
    if request is not None and request.get("response") != "json":
        c.error(
            m.key_lines["outputs"],
            "outputs",
            f"outputs need response: json (this request's response is {request.get('response')})",
        )
        return {}
    import jmespath
    import jmespath.exceptions

    outputs: dict[str, dict[str, Any]] = {}
    for name, spec in value.items():
        line = value.key_lines[name]
        path = f"outputs.{_key_label(name)}"
        if not INPUT_NAME_RE.fullmatch(name):
            c.error(line, path, f"{name!r} is not a valid output name")
            continue
        if not isinstance(spec, _Map):
            c.error(line, path, f"must be a mapping with type and path, got {_kind(spec)}")
            continue
        _unknown_keys(c, spec, path, "output", OUTPUT_KEYS)
        type_ = spec.get("type")
        if type_ is None:
            c.error(line, f"{path}.type", f"is required: one of {', '.join(OUTPUT_TYPES)}")
            continue
        if type_ is _INVALID:
            continue
        if not isinstance(type_, str) or type_ not in OUTPUT_TYPES:
            c.error(
                spec.value_lines["type"],
                f"{path}.type",
                f"{_show(type_)} is not one of {', '.join(OUTPUT_TYPES)}",
            )
            continue
        expression = _string(c, spec, "path", path=f"{path}.path", required=True)
        if expression is None:
            continue
        try:
            jmespath.compile(expression)
        except jmespath.exceptions.JMESPathError as exc:
            reason = " ".join(str(exc).split())[:160]
            c.error(
                spec.value_lines["path"], f"{path}.path", f"is not a JMESPath expression: {reason}"
            )
            continue
        description = ""
        if spec.get("description") is not None:
            description = (
                _string(c, spec, "description", path=f"{path}.description", required=False) or ""
            )
        nullable = _boolean(c, spec, "nullable", path=f"{path}.nullable", default=False)
        c.lines[path] = line
        outputs[name] = {
            "type": type_,
            "path": expression,
            "description": description,
            "nullable": nullable,
        }
    return outputs


def _jsonable(value: Any) -> Any:
    """Unknown keys are kept in `extra`; make their values JSON-able."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items() if v is not _INVALID}
    if isinstance(value, list):
        return [_jsonable(v) for v in value if v is not _INVALID]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _check_manifest(c: _Checker, m: _Map, folder_name: str | None, body: str) -> Manifest | None:
    name = _check_name(c, m, folder_name)
    label = _string(c, m, "label", path="label", required=False)
    description = _check_description(c, m)
    version = _integer(c, m, "version", low=1, high=MAX_VERSION, default=1)
    language = _check_language(c, m)
    inputs = _check_inputs(c, m)
    integrations = _check_integrations(c, m)
    timeout = _integer(c, m, "timeout", low=1, high=MAX_TIMEOUT, default=DEFAULT_TIMEOUT)
    network = _boolean(c, m, "network", path="network", default=True)
    kind = _check_kind(c, m)
    request: dict[str, Any] | None = None
    outputs: dict[str, dict[str, Any]] = {}
    if kind == "http":
        request = _check_request(c, m, inputs, integrations)
        outputs = _check_outputs(c, m, request)
    else:
        for key in ("request", "outputs"):
            if key in m:
                c.error(m.key_lines[key], key, "is only for kind: http (this tool runs code)")
    extra: dict[str, Any] = {}
    if "annotations" in m and (hints := _check_annotations(c, m)) is not None:
        extra["annotations"] = hints
    for key in m:
        if key not in TOP_KEYS:
            c.warning(m.key_lines[key], _key_label(key), f"unknown key {key!r} is ignored")
            extra[key] = _jsonable(m[key])
    if c.failed or name is None or description is None:
        return None
    return Manifest(
        name=name,
        label=label or name,
        description=description,
        version=version,
        language=language,
        inputs=inputs,
        integrations=integrations,
        timeout=timeout,
        network=network,
        extra=extra,
        body=body,
        kind=kind,
        request=request,
        outputs=outputs,
    )


# --- Public API -------------------------------------------------------------------------


def _decode(data: bytes, c: _Checker) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        c.error(line, "file", f"is not valid UTF-8 (byte {data[exc.start]:#04x} at {exc.start})")
        return None


def parse_toolmd(
    text: str | bytes, path: str = "TOOL.md", folder_name: str | None = None
) -> ParseResult:
    """Parse and validate a TOOL.md; never raises on any input."""
    c = _Checker(path)
    try:
        return _parse(text, c, folder_name)
    except RecursionError:  # belt and braces: MAX_DEPTH should prevent it
        c.error(1, "frontmatter", "YAML nested too deeply")
        return ParseResult(None, c.problems)


def _parse(text: str | bytes, c: _Checker, folder_name: str | None) -> ParseResult:
    size = len(text) if isinstance(text, bytes) else _byte_len(text)
    if size > MAX_TOOLMD:
        c.error(1, "file", f"is {size} bytes; a TOOL.md may have at most {MAX_TOOLMD}")
        return ParseResult(None, c.problems)
    if isinstance(text, bytes):
        decoded = _decode(text, c)
        if decoded is None:
            return ParseResult(None, c.problems)
        text = decoded
    text = text.removeprefix("\ufeff")

    split = _split(text)
    if isinstance(split, str):
        c.error(1, "frontmatter", split)
        return ParseResult(None, c.problems)
    frontmatter = text[split.fm_start : split.fm_end]
    if _byte_len(frontmatter) > MAX_FRONTMATTER:
        c.error(
            1,
            "frontmatter",
            f"is {_byte_len(frontmatter)} bytes; at most {MAX_FRONTMATTER} are allowed",
        )
        return ParseResult(None, c.problems)
    body = text[split.body_start :].replace("\r\n", "\n").replace("\r", "\n")

    try:
        root = compose_frontmatter(frontmatter)
    except _Refused as exc:
        c.error(exc.mark.line + FIRST_FRONTMATTER_LINE, "frontmatter", exc.message)
        return ParseResult(None, c.problems)
    except yaml.YAMLError as exc:
        c.error(_yaml_error_line(exc, frontmatter), "frontmatter", _yaml_message(exc))
        return ParseResult(None, c.problems)
    except UnicodeError:  # lone surrogates in a str: not text any parser can read
        c.error(1, "frontmatter", "YAML syntax error: the text is not valid Unicode")
        return ParseResult(None, c.problems)

    if root is None:
        value: Any = _Map(FIRST_FRONTMATTER_LINE)
    else:
        value = c.convert(root, "")
    if value is _INVALID:
        return ParseResult(None, c.problems)
    if not isinstance(value, _Map):
        c.error(
            FIRST_FRONTMATTER_LINE,
            "frontmatter",
            f"must be a YAML mapping of keys to values, got {_kind(value)}",
        )
        return ParseResult(None, c.problems)
    manifest = _check_manifest(c, value, folder_name, body)
    return ParseResult(manifest, c.problems, c.lines)


def _yaml_error_line(exc: yaml.YAMLError, frontmatter: str) -> int:
    return strictyaml.error_line(exc, frontmatter, FIRST_FRONTMATTER_LINE)


def _yaml_message(exc: yaml.YAMLError) -> str:
    return strictyaml.error_message(exc, FIRST_FRONTMATTER_LINE)


def _folder_and_toolmd(path: str) -> tuple[str, str]:
    """`path` names the folder or its TOOL.md; return (folder name, TOOL.md path)."""
    posix = PurePosixPath(path.replace(os.sep, "/"))
    if posix.name == "TOOL.md":
        return posix.parent.name, path
    return posix.name, f"{path.rstrip('/')}/TOOL.md"


def validate_files(
    files: Mapping[str, bytes], path: str, *, context: ValidationContext
) -> ParseResult:
    """Validate an in-memory tool folder {relative path: bytes}.

    `path` names the folder (`tools/web_fetch`) or its TOOL.md (`tools/web_fetch/TOOL.md`);
    the folder's last component is the name the manifest must carry. The folder must also
    be within bundle's limits (file count and sizes, safe paths). `context` is what a
    kind: http tool's checks know of the console (tools_app/http_tools/context.py)."""
    folder_name, toolmd_path = _folder_and_toolmd(path)
    problems: list[Problem] = []
    try:
        bundle.check_files(files)
    except bundle.BundleError as exc:
        problems.append(Problem(toolmd_path, 1, "files", str(exc)))
    if "TOOL.md" not in files:
        message = "missing: a tool folder holds TOOL.md and an entry file"
        problems.append(Problem(toolmd_path, 1, "TOOL.md", message))
        return ParseResult(None, problems)
    result = parse_toolmd(files["TOOL.md"], toolmd_path, folder_name or None)
    problems += result.problems
    if result.manifest is None:
        if _declares_http(files["TOOL.md"]):
            return ParseResult(None, problems)
        return ParseResult(None, problems + _missing_entry_for_text(files, toolmd_path))
    if result.manifest.kind == "http":
        problems += _http_entry_problems(files, toolmd_path)
        problems += http_checks.check(result.manifest, files, toolmd_path, result.lines, context)
    else:
        problems += _entry_problems(files, result.manifest.language, toolmd_path, 1)
        problems += _samples_in_code_tool(files, toolmd_path)
        if result.manifest.language == "python":
            problems += python_syntax_problems(files, toolmd_path)
        elif result.manifest.language in ("typescript", "javascript"):
            problems += jssyntax.problems(files, toolmd_path)
    if any(p.severity == ERROR for p in problems):
        return ParseResult(None, problems, result.lines)
    return ParseResult(result.manifest, problems, result.lines)


def python_syntax_problems(files: Mapping[str, bytes], toolmd_path: str) -> list[Problem]:
    """Each .py file's first syntax error (bad indentation included), at its line: the
    file is parsed only, never run. A tool whose code cannot even be read fails every
    run, so this is an error, like a missing entry file."""
    folder = toolmd_path.rpartition("/")[0]
    problems = []
    for name, data in sorted(files.items()):
        if not name.endswith(".py"):
            continue
        path = f"{folder}/{name}" if folder else name
        try:
            compile(data, name, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError as exc:  # IndentationError and TabError too
            what = "Syntax error" if type(exc) is SyntaxError else "Indentation error"
            problems.append(Problem(path, exc.lineno or 1, "python", f"{what}: {exc.msg}"))
        except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, deep nesting
            problems.append(Problem(path, 1, "python", f"cannot be parsed: {exc}"))
    return problems


def _declares_http(data: bytes) -> bool:
    """An invalid TOOL.md that says kind: http is not missing an entry file."""
    return re.search(rb"(?m)^kind:[ \t]*[\"']?http\b", data) is not None


def _http_entry_problems(files: Mapping[str, bytes], toolmd_path: str) -> list[Problem]:
    present = [n for names in ENTRY_FILES.values() for n in names if n in files]
    if not present:
        return []
    return [
        Problem(
            toolmd_path,
            1,
            "entry",
            f"a kind: http tool runs no code: remove {', '.join(present)} "
            "(or drop kind: http to make it a code tool)",
        )
    ]


def _samples_in_code_tool(files: Mapping[str, bytes], toolmd_path: str) -> list[Problem]:
    if any(name.startswith("samples/") and name.endswith(".json") for name in files):
        message = "samples/*.json are only read for kind: http tools"
        return [Problem(toolmd_path, 1, "samples", message, WARNING)]
    return []


def _missing_entry_for_text(files: Mapping[str, bytes], toolmd_path: str) -> list[Problem]:
    """An invalid TOOL.md may still be paired with no entry file at all: say so too."""
    if any(entry in files for names in ENTRY_FILES.values() for entry in names):
        return []
    expected = " or ".join(n for names in ENTRY_FILES.values() for n in names)
    return [Problem(toolmd_path, 1, "entry", f"no entry file: expected one of {expected}")]


def _entry_problems(
    files: Mapping[str, bytes], language: str, toolmd_path: str, line: int
) -> list[Problem]:
    candidates = ENTRY_FILES[language]
    present = [name for name in candidates if name in files]
    if len(present) > 1:
        message = f"both {' and '.join(present)} exist; {present[0]} is used"
        return [Problem(toolmd_path, line, "entry", message, WARNING)]
    if present:
        return []
    others = [
        f"{name} (language: {lang})"
        for lang, names in ENTRY_FILES.items()
        if lang != language
        for name in names
        if name in files
    ]
    message = f"{' or '.join(candidates)} is missing (language: {language})"
    if others:
        message += f"; found {', '.join(others)}: set language accordingly"
    return [Problem(toolmd_path, line, "entry", message)]


def validate_tool_dir(path: Path, *, context: ValidationContext) -> ParseResult:
    """Validate a tool folder on disk (read through bundle's limits and refusals)."""
    path = Path(path)
    try:
        files = bundle.read_tool_dir(path)
    except (bundle.BundleError, OSError) as exc:
        problem = Problem(f"{path}/TOOL.md", 1, "files", str(exc))
        return ParseResult(None, [problem])
    # "." or ".." carry no folder name; the resolved path does.
    label = str(path) if path.name not in ("", "..") else str(path.resolve())
    return validate_files(files, label, context=context)


def _is_junk(path: Path) -> bool:
    return path.name in bundle.JUNK_NAMES or path.name.startswith(".")


def scan(
    paths: Iterable[Path | str], *, context: ValidationContext
) -> Iterator[tuple[str, ParseResult]]:
    """Validate each path: a tool folder, a TOOL.md, or a folder of tool folders.

    Yields (tool path, result) for every tool found, and for every folder in a folder of
    tools that is not a tool (missing TOOL.md or entry file): those are never skipped."""
    for raw in paths:
        path = Path(raw)
        label = str(raw)
        if not path.exists():
            problem = Problem(label, 1, "path", "does not exist")
            yield label, ParseResult(None, [problem])
        elif path.is_file():
            if path.name == "TOOL.md":
                yield str(path.parent), validate_tool_dir(path.parent, context=context)
            else:
                yield label, _parse_file(path, label)
        elif (path / "TOOL.md").exists() or not _subfolders(path):
            # A tool folder, or a folder with no subfolders that lacks TOOL.md (reported).
            if not (path / "TOOL.md").exists() and not any(path.iterdir()):
                problem = Problem(label, 1, "path", "is empty: no TOOL.md and no tool folders")
                yield label, ParseResult(None, [problem])
            else:
                yield label, validate_tool_dir(path, context=context)
        else:
            for child in _subfolders(path):
                yield str(child), validate_tool_dir(child, context=context)


def _subfolders(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir() and not _is_junk(p))


def _parse_file(path: Path, label: str) -> ParseResult:
    try:
        with path.open("rb") as f:
            data = f.read(MAX_TOOLMD + 1)
    except OSError as exc:
        return ParseResult(None, [Problem(label, 1, "file", f"cannot be read: {exc}")])
    return parse_toolmd(data, label)


# --- Rewriting the version --------------------------------------------------------------


def set_frontmatter_version(text: str, version: int) -> str:
    """Return `text` with `version: <version>` in its frontmatter; all else byte for byte.

    An existing `version` value is replaced in place; otherwise a line is inserted after
    the `name` line (or first in the frontmatter). Raises ValueError when the text has no
    readable block-style frontmatter mapping."""
    if not _is_int(version) or not 1 <= version <= MAX_VERSION:
        raise ValueError(f"version must be an integer between 1 and {MAX_VERSION}")
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    content = text[len(bom) :]
    split = _split(content)
    if isinstance(split, str):
        raise ValueError(split)
    frontmatter = content[split.fm_start : split.fm_end]
    try:
        root = compose_frontmatter(frontmatter)
    except (yaml.YAMLError, UnicodeError, _Refused, RecursionError) as exc:
        raise ValueError(f"the frontmatter is not readable YAML: {exc}") from exc

    if root is None:
        offset = split.fm_start
        line = f"version: {version}{split.newline}"
        return bom + content[:offset] + line + content[offset:]
    if not isinstance(root, MappingNode):
        raise ValueError("the frontmatter is not a YAML mapping")
    if root.flow_style:
        raise ValueError("the frontmatter is a flow-style mapping ({...}); cannot edit it")

    for key_node, value_node in root.value:
        if isinstance(key_node, ScalarNode) and key_node.value == "version":
            start = split.fm_start + value_node.start_mark.index
            end = split.fm_start + value_node.end_mark.index
            replacement = str(version)
            if content[start - 1 : start] == ":":
                replacement = " " + replacement
            return bom + content[:start] + replacement + content[end:]

    anchor_key = root.value[0][0]
    for key_node, value_node in root.value:
        if isinstance(key_node, ScalarNode) and key_node.value == "name":
            anchor_key = key_node
            offset = split.fm_start + _end_of_line(frontmatter, value_node.end_mark)
            break
    else:
        offset = split.fm_start + anchor_key.start_mark.index - anchor_key.start_mark.column
    indent = " " * anchor_key.start_mark.column
    line = f"{indent}version: {version}{split.newline}"
    return bom + content[:offset] + line + content[offset:]


def _end_of_line(text: str, mark: Any) -> int:
    """Index just after the line on which `mark` ends (a value's end mark)."""
    if mark.column == 0:  # block scalars end at the start of the next line
        return int(mark.index)
    match = re.compile(r"\r\n|\r|\n").search(text, mark.index)
    return match.end() if match else len(text)
