"""One strict YAML reader for every YAML file the console reads (TOOL.md frontmatter,
integration type files). No Django.

The YAML is only composed into nodes (libyaml's parser where PyYAML has it, else
SafeLoader's), by a composer that refuses anchors and aliases (an error, never an
expansion) and nesting deeper than MAX_DEPTH. Nodes are then converted by a Reader into
plain values that remember their lines (Map, Seq); custom tags, merge keys, non-string and
duplicate keys are reported as problems through a callback, never raised, so that a caller
lists every problem of a file with its line and key.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

try:
    from yaml._yaml import CParser
except ImportError:  # pragma: no cover
    CParser = None

MAX_DEPTH = 32

TAG = "tag:yaml.org,2002:"
SCALAR_TAGS = {TAG + t for t in ("str", "int", "float", "bool", "null", "timestamp")}
_PLAIN_KEY_RE = re.compile(r"[A-Za-z0-9_<>-][A-Za-z0-9_.<>-]{0,127}")


class _Invalid:
    def __repr__(self) -> str:
        return "INVALID"


INVALID: Any = _Invalid()  # a value already reported as unreadable


class Refused(Exception):
    """The composer stopped: an anchor, an alias or too deep a nesting."""

    def __init__(self, mark: Any, message: str) -> None:
        super().__init__(message)
        self.mark = mark
        self.message = message


class _Refusing(Composer):
    """Composes a node tree; anchors and aliases are refused before anything expands."""

    _depth = 0
    max_depth = MAX_DEPTH

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise Refused(event.start_mark, "YAML anchors and aliases (& and *) are not allowed")
        if self._depth >= self.max_depth:
            raise Refused(event.start_mark, f"nested deeper than {self.max_depth} levels")
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _PyLoader(_Refusing, yaml.SafeLoader):
    pass


if CParser is not None:

    class _CLoader(_Refusing, CParser, Resolver):  # type: ignore[misc,valid-type]
        """libyaml's parser (about 10x faster) under the same refusing composer."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            Resolver.__init__(self)

    _Loader: type = _CLoader
else:  # pragma: no cover (PyYAML built without libyaml)
    _Loader = _PyLoader


def compose(text: str, max_depth: int = MAX_DEPTH) -> Node | None:
    """Compose YAML into nodes; raises yaml.YAMLError, UnicodeError or Refused.
    (OpenAPI documents nest deeper than a TOOL.md: their reader passes its own max_depth.)"""
    loader = _Loader(text)
    loader.max_depth = max_depth
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Problem:
    """One problem of a checked file (a TOOL.md, an integration type file)."""

    path: str
    line: int
    key: str
    message: str
    severity: str = ERROR  # ERROR | WARNING

    def __str__(self) -> str:
        mark = "warning: " if self.severity == WARNING else ""
        return f"{self.path}:{self.line}: {self.key}: {mark}{self.message}"


class Checked:
    """What a result holding `problems` (a parsed TOOL.md, a cases.yaml) says of them."""

    problems: list[Problem]

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == ERROR]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == WARNING]

    @property
    def ok(self) -> bool:
        return not self.errors


class Map(dict[str, Any]):
    """A YAML mapping's values plus the lines of its keys and values."""

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.key_lines: dict[str, int] = {}
        self.value_lines: dict[str, int] = {}


class Seq(list[Any]):
    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.item_lines: list[int] = []


Report = Callable[[int, str, str], None]  # (line, key, message)


def key_label(raw: str) -> str:
    """A key as problems name it: plain keys as they are, odd ones quoted on one line."""
    if _PLAIN_KEY_RE.fullmatch(raw):
        return raw
    return repr(raw) if len(raw) <= 64 else repr(raw[:61]) + "..."


def report_unknown_keys(
    report: Report,
    m: Map,
    allowed: Sequence[str],
    message: str,
    path: str = "",
    *,
    label: Callable[[str], str] = key_label,
) -> None:
    """Report each key of `m` outside `allowed` at its line, named `path.key` (`key` without
    a path). `message` is formatted with `key` and `allowed` (the allowed keys, listed)."""
    for key in m:
        if key not in allowed:
            name = f"{path}.{label(key)}" if path else label(key)
            report(m.key_lines[key], name, message.format(key=key, allowed=", ".join(allowed)))


def kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, datetime | date):
        return "a date (quote it to make it a string)"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def show(value: Any) -> str:
    text = repr(value) if isinstance(value, str | int | float | bool) else kind(value)
    return text if len(text) <= 80 else text[:77] + "..."


class Reader:
    """Converts composed nodes to Map/Seq/scalars, reporting problems to `report`.

    `first_line` is the file line of the YAML text's first line (TOOL.md frontmatter starts
    on line 2). `scalar_tags` narrows the scalar types accepted; `root_key` names the
    whole document in problems."""

    def __init__(
        self,
        report: Report,
        first_line: int = 1,
        scalar_tags: frozenset[str] | set[str] | None = None,
        root_key: str = "yaml",
    ) -> None:
        self.report = report
        self.first_line = first_line
        self.scalar_tags = scalar_tags or SCALAR_TAGS
        self.root_key = root_key

    def line(self, node: Node) -> int:
        return node.start_mark.line + self.first_line

    def convert(self, node: Node, key: str = "") -> Any:
        line = self.line(node)
        where = key or self.root_key
        if isinstance(node, MappingNode):
            if node.tag != TAG + "map":
                self.report(line, where, f"YAML tag {node.tag!r} is not allowed")
                return INVALID
            return self._mapping(node, key, line)
        if isinstance(node, SequenceNode):
            if node.tag != TAG + "seq":
                self.report(line, where, f"YAML tag {node.tag!r} is not allowed")
                return INVALID
            seq = Seq(line)
            for i, item in enumerate(node.value):
                seq.append(self.convert(item, f"{key}[{i}]"))
                seq.item_lines.append(self.line(item))
            return seq
        if node.tag not in self.scalar_tags:
            self.report(line, where, f"YAML tag {node.tag!r} is not allowed")
            return INVALID
        try:
            return SafeConstructor().construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError, TypeError) as exc:
            reason = str(exc).splitlines()[0][:100] if str(exc) else type(exc).__name__
            self.report(line, where, f"cannot read {show(node.value)}: {reason}")
            return INVALID

    def _mapping(self, node: MappingNode, key: str, line: int) -> Map:
        result = Map(line)
        for key_node, value_node in node.value:
            key_line = self.line(key_node)
            raw = key_node.value if isinstance(key_node, ScalarNode) else "?"
            name = f"{key}.{key_label(raw)}" if key else key_label(raw)
            if isinstance(key_node, ScalarNode) and key_node.tag == TAG + "merge":
                self.report(key_line, name, "YAML merge keys (<<) are not allowed")
                continue
            if not isinstance(key_node, ScalarNode) or key_node.tag != TAG + "str":
                what = key_node.tag.removeprefix(TAG) if isinstance(key_node, ScalarNode) else ""
                hint = f" ({raw!r} is read as {what}; quote it)" if what else ""
                self.report(key_line, name, f"keys must be strings{hint}")
                continue
            if raw in result:
                first = result.key_lines[raw]
                self.report(key_line, name, f"duplicate key {raw!r} (first on line {first})")
                continue
            result[raw] = self.convert(value_node, name)
            result.key_lines[raw] = key_line
            result.value_lines[raw] = self.line(value_node)
        return result


def error_line(exc: yaml.YAMLError, text: str, first_line: int = 1) -> int:
    """The file line a YAML syntax error points at."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        return int(mark.line) + first_line
    position = getattr(exc, "position", None)  # a ReaderError (unprintable character)
    if isinstance(position, int):
        return text[:position].count("\n") + first_line
    return first_line


def error_message(exc: yaml.YAMLError, first_line: int = 1) -> str:
    if isinstance(exc, yaml.MarkedYAMLError):
        context = exc.context or ""
        if context and exc.context_mark is not None:
            context += f" (line {exc.context_mark.line + first_line})"
        detail = ", ".join(p for p in (context, exc.problem or "") if p)
    else:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"YAML syntax error: {detail}"
