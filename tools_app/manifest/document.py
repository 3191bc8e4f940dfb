"""The TOOL.md document: its frontmatter split from the body, composed as strict YAML
(tools_app.lib.strictyaml), and the Checker that collects every problem found in it with the
readers of plain values (strings, booleans, integers) each part of the manifest uses."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from yaml.nodes import Node

from tools_app.lib import strictyaml
from tools_app.lib.strictyaml import ERROR, INVALID, WARNING, Map, Problem, kind, show

# The frontmatter starts on the line after the opening `---`.
FIRST_FRONTMATTER_LINE = 2
_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_DELIMITER_RE = re.compile(r"---[ \t]*(?:\r\n|\r|\n)?")


@dataclass(frozen=True)
class Split:
    """Character offsets of the frontmatter in a TOOL.md text (BOM already removed)."""

    fm_start: int  # first character after the opening `---` line
    fm_end: int  # first character of the closing `---` line
    body_start: int  # first character after the closing `---` line
    newline: str  # the opening line's line ending


def split_frontmatter(text: str) -> Split | str:
    """Locate the frontmatter, or return why there is none."""
    lines = _LINE_RE.finditer(text)
    first = next(lines, None)
    if first is None or not _DELIMITER_RE.fullmatch(first.group()):
        return "TOOL.md must start with a '---' line, then YAML frontmatter and a '---' line"
    opening = first.group()
    newline = opening[len(opening.rstrip("\r\n")) :] or "\n"
    for line in lines:
        if _DELIMITER_RE.fullmatch(line.group()):
            return Split(first.end(), line.start(), line.end(), newline)
    return "the frontmatter is not closed: no '---' line after it"


def byte_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def compose_frontmatter(text: str) -> Node | None:
    """Compose frontmatter YAML into nodes; raises yaml.YAMLError, UnicodeError or Refused."""
    return strictyaml.compose(text)


class Checker:
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


def unknown_keys(c: Checker, spec: Map, path: str, what: str, allowed: tuple[str, ...]) -> None:
    """An error for each key of `spec` outside `allowed` (an input's, output's, request's)."""
    message = f"unknown {what} key {{key!r}} (allowed: {{allowed}})"
    strictyaml.report_unknown_keys(c.error, spec, allowed, message, path)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return (is_int(value) or isinstance(value, float)) and math.isfinite(value)


def read_string(c: Checker, m: Map, key: str, *, path: str, required: bool) -> str | None:
    """A non-empty string (stripped), or None when absent/invalid (reported)."""
    value = m.get(key)
    if value is INVALID:
        return None
    if value is None:
        if required:
            c.error(m.key_lines.get(key, m.line), path, "is required")
        return None
    if not isinstance(value, str):
        c.error(m.value_lines[key], path, f"must be a string, got {kind(value)}")
        return None
    if not value.strip():
        c.error(m.value_lines[key], path, "must not be empty")
        return None
    return value.strip()


def read_boolean(c: Checker, m: Map, key: str, *, path: str, default: bool) -> bool:
    value = m.get(key)
    if value is None or value is INVALID:
        return default
    if not isinstance(value, bool):
        c.error(m.value_lines[key], path, f"must be true or false, got {show(value)}")
        return default
    return value


def read_integer(c: Checker, m: Map, key: str, *, low: int, high: int, default: int) -> int:
    value = m.get(key)
    if value is None or value is INVALID:
        return default
    if not is_int(value):
        c.error(m.value_lines[key], key, f"must be an integer, got {show(value)}")
        return default
    if not low <= value <= high:
        c.error(m.value_lines[key], key, f"{value} is not between {low} and {high}")
        return default
    return value
