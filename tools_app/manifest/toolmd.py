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
- Problems about the file as a whole use the key `file` (size, encoding).

The folder around TOOL.md (entry file, samples, cases.yaml) is checked by folder.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode

from tools_app.http_tools.spec import check_request
from tools_app.lib import strictyaml
from tools_app.lib.strictyaml import (
    INVALID,
    Map,
    Problem,
    Refused,
    Seq,
    key_label,
    kind,
    show,
)
from tools_app.manifest.document import (
    FIRST_FRONTMATTER_LINE,
    Checker,
    byte_len,
    compose_frontmatter,
    is_int,
    read_boolean,
    read_integer,
    read_string,
    split_frontmatter,
)
from tools_app.manifest.entry import (
    check_language,
)
from tools_app.manifest.inputs import InputSpec, check_inputs
from tools_app.manifest.languages import DEFAULT_LANGUAGE, ENTRY_FILES, TOOL_KINDS
from tools_app.manifest.limits import (
    DEFAULT_TIMEOUT,
    MAX_DESCRIPTION,
    MAX_FRONTMATTER,
    MAX_TIMEOUT,
    MAX_TOOLMD,
    MAX_VERSION,
)
from tools_app.manifest.outputs import check_outputs

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
NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")
SLUG_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


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
    # name -> {type, description, nullable} (and path, kind http): tools_app/manifest/outputs.py
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
            # A code tool's outputs are stored only when it declares some, so versions
            # stored before code tools could have them keep their exact form (and hashes).
            **({"outputs": self.outputs} if self.kind != "http" and self.outputs else {}),
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
class ParseResult(strictyaml.Checked):
    manifest: Manifest | None
    problems: list[Problem] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)  # "outputs.x" -> its TOOL.md line


# --- Validation -------------------------------------------------------------------------


def _check_name(c: Checker, m: Map, folder_name: str | None) -> str | None:
    name = m.get("name")
    if name is INVALID:
        return None
    if name is None:
        c.error(m.key_lines.get("name", 1), "name", "is required")
        return None
    line = m.value_lines["name"]
    if not isinstance(name, str):
        c.error(line, "name", f"must be a string, got {kind(name)}")
        return None
    if not NAME_RE.fullmatch(name):
        c.error(
            line,
            "name",
            f"{show(name)} is not a valid name: lowercase letters, digits and _, "
            "starting with a letter, at most 64 characters",
        )
        return None
    if folder_name is not None and name != folder_name:
        c.error(line, "name", f"{name!r} must equal the folder name {folder_name!r}")
    return name


def _check_description(c: Checker, m: Map) -> str | None:
    if "description" not in m:
        c.error(1, "description", "is required")
        return None
    description = read_string(c, m, "description", path="description", required=True)
    if description is not None and len(description) > MAX_DESCRIPTION:
        c.error(
            m.value_lines["description"],
            "description",
            f"is {len(description)} characters long; at most {MAX_DESCRIPTION} are allowed",
        )
        return None
    return description


def _check_integrations(c: Checker, m: Map) -> tuple[str, ...]:
    value = m.get("integrations")
    if value is None or value is INVALID:
        return ()
    if not isinstance(value, Seq):
        c.error(
            m.value_lines["integrations"],
            "integrations",
            f"must be a list of integration slugs like [github], got {kind(value)}",
        )
        return ()
    slugs: list[str] = []
    for i, (slug, line) in enumerate(zip(value, value.item_lines, strict=True)):
        key = f"integrations[{i}]"
        if slug is INVALID:
            continue
        if not isinstance(slug, str) or not SLUG_RE.fullmatch(slug):
            c.error(
                line,
                key,
                f"{show(slug)} is not an integration slug (lowercase letters, digits, _ and -)",
            )
        elif slug in slugs:
            c.error(line, key, f"{slug!r} is listed twice")
        else:
            slugs.append(slug)
    return tuple(slugs)


def _check_annotations(c: Checker, m: Map) -> dict[str, bool] | None:
    """`annotations:`, a mapping of MCP hints to true or false."""
    value = m["annotations"]
    if not isinstance(value, Map):
        c.error(
            m.value_lines["annotations"], "annotations", f"must be a mapping, got {kind(value)}"
        )
        return None
    hints: dict[str, bool] = {}
    for key, hint in value.items():
        line = value.value_lines[key]
        if key not in ANNOTATION_HINTS:
            c.warning(
                value.key_lines[key],
                f"annotations.{key_label(key)}",
                f"unknown hint is ignored; hints are {', '.join(ANNOTATION_HINTS)}",
            )
        elif not isinstance(hint, bool):
            c.error(line, f"annotations.{key}", f"must be true or false, got {kind(hint)}")
        else:
            hints[key] = hint
    return hints


def _check_kind(c: Checker, m: Map) -> str:
    kind = m.get("kind")
    if kind is None or kind is INVALID:
        return "code"
    if not isinstance(kind, str) or kind not in TOOL_KINDS:
        c.error(
            m.value_lines["kind"], "kind", f"{show(kind)} is not one of {', '.join(TOOL_KINDS)}"
        )
        return "code"
    return kind


def _jsonable(value: Any) -> Any:
    """Unknown keys are kept in `extra`; make their values JSON-able."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items() if v is not INVALID}
    if isinstance(value, list):
        return [_jsonable(v) for v in value if v is not INVALID]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _check_manifest(c: Checker, m: Map, folder_name: str | None, body: str) -> Manifest | None:
    name = _check_name(c, m, folder_name)
    label = read_string(c, m, "label", path="label", required=False)
    description = _check_description(c, m)
    version = read_integer(c, m, "version", low=1, high=MAX_VERSION, default=1)
    language = check_language(c, m)
    inputs = check_inputs(c, m)
    integrations = _check_integrations(c, m)
    timeout = read_integer(c, m, "timeout", low=1, high=MAX_TIMEOUT, default=DEFAULT_TIMEOUT)
    network = read_boolean(c, m, "network", path="network", default=True)
    kind = _check_kind(c, m)
    request: dict[str, Any] | None = None
    outputs: dict[str, dict[str, Any]] = {}
    if kind == "http":
        request = check_request(c, m, inputs, integrations)
        outputs = check_outputs(c, m, http=True, request=request)
    else:
        if "request" in m:
            c.error(
                m.key_lines["request"], "request", "is only for kind: http (this tool runs code)"
            )
        outputs = check_outputs(c, m, http=False, language=language)
    extra: dict[str, Any] = {}
    if "annotations" in m and (hints := _check_annotations(c, m)) is not None:
        extra["annotations"] = hints
    for key in m:
        if key not in TOP_KEYS:
            c.warning(m.key_lines[key], key_label(key), f"unknown key {key!r} is ignored")
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


def _decode(data: bytes, c: Checker) -> str | None:
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
    c = Checker(path)
    try:
        return _parse(text, c, folder_name)
    except RecursionError:  # belt and braces: MAX_DEPTH should prevent it
        c.error(1, "frontmatter", "YAML nested too deeply")
        return ParseResult(None, c.problems)


def _parse(text: str | bytes, c: Checker, folder_name: str | None) -> ParseResult:
    size = len(text) if isinstance(text, bytes) else byte_len(text)
    if size > MAX_TOOLMD:
        c.error(1, "file", f"is {size} bytes; a TOOL.md may have at most {MAX_TOOLMD}")
        return ParseResult(None, c.problems)
    if isinstance(text, bytes):
        decoded = _decode(text, c)
        if decoded is None:
            return ParseResult(None, c.problems)
        text = decoded
    text = text.removeprefix("\ufeff")

    split = split_frontmatter(text)
    if isinstance(split, str):
        c.error(1, "frontmatter", split)
        return ParseResult(None, c.problems)
    frontmatter = text[split.fm_start : split.fm_end]
    if byte_len(frontmatter) > MAX_FRONTMATTER:
        c.error(
            1,
            "frontmatter",
            f"is {byte_len(frontmatter)} bytes; at most {MAX_FRONTMATTER} are allowed",
        )
        return ParseResult(None, c.problems)
    body = text[split.body_start :].replace("\r\n", "\n").replace("\r", "\n")

    try:
        root = compose_frontmatter(frontmatter)
    except Refused as exc:
        c.error(exc.mark.line + FIRST_FRONTMATTER_LINE, "frontmatter", exc.message)
        return ParseResult(None, c.problems)
    except yaml.YAMLError as exc:
        c.error(_yaml_error_line(exc, frontmatter), "frontmatter", _yaml_message(exc))
        return ParseResult(None, c.problems)
    except UnicodeError:  # lone surrogates in a str: not text any parser can read
        c.error(1, "frontmatter", "YAML syntax error: the text is not valid Unicode")
        return ParseResult(None, c.problems)

    if root is None:
        value: Any = Map(FIRST_FRONTMATTER_LINE)
    else:
        value = c.convert(root, "")
    if value is INVALID:
        return ParseResult(None, c.problems)
    if not isinstance(value, Map):
        c.error(
            FIRST_FRONTMATTER_LINE,
            "frontmatter",
            f"must be a YAML mapping of keys to values, got {kind(value)}",
        )
        return ParseResult(None, c.problems)
    manifest = _check_manifest(c, value, folder_name, body)
    return ParseResult(manifest, c.problems, c.lines)


def _yaml_error_line(exc: yaml.YAMLError, frontmatter: str) -> int:
    return strictyaml.error_line(exc, frontmatter, FIRST_FRONTMATTER_LINE)


def _yaml_message(exc: yaml.YAMLError) -> str:
    return strictyaml.error_message(exc, FIRST_FRONTMATTER_LINE)


# --- Rewriting the version --------------------------------------------------------------


def set_frontmatter_version(text: str, version: int) -> str:
    """Return `text` with `version: <version>` in its frontmatter; all else byte for byte.

    An existing `version` value is replaced in place; otherwise a line is inserted after
    the `name` line (or first in the frontmatter). Raises ValueError when the text has no
    readable block-style frontmatter mapping."""
    if not is_int(version) or not 1 <= version <= MAX_VERSION:
        raise ValueError(f"version must be an integer between 1 and {MAX_VERSION}")
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    content = text[len(bom) :]
    split = split_frontmatter(content)
    if isinstance(split, str):
        raise ValueError(split)
    frontmatter = content[split.fm_start : split.fm_end]
    try:
        root = compose_frontmatter(frontmatter)
    except (yaml.YAMLError, UnicodeError, Refused, RecursionError) as exc:
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
