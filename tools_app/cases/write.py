"""cases.yaml rewritten one case at a time, for the console's saves (a run saved as a case,
"Accept the new output", a case removed).

The other cases' text is kept byte for byte: the case's lines are spliced out of the file
and the new case's lines in, its dash at the column the file's cases use. A case's span
runs from the comment lines right above its dash to the last line of its own content, so
comments between cases stay put. The result always re-parses to the same cases plus the
change; a file laid out in a way no splice can respect (a flow-style list, `cases: [...]`)
is written out anew from its parsed cases instead (its comments are then lost)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from tools_app.lib import strictyaml
from tools_app.lib.strictyaml import INVALID

HEADER = "# This tool's test cases: docs/cases.md describes the format.\n"
INDENT = 2  # the dash column of a new file's cases


class _Dumper(yaml.SafeDumper):
    """Block style with lists indented under their key, multi-line text as `|` blocks."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        return super().increase_indent(flow, False)


# Line breaks YAML reads as such in plain and block text: only double quotes keep them.
_ODD_BREAKS = ("\r", "\x85", "\u2028", "\u2029")


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if any(c in value for c in _ODD_BREAKS):
        style: str | None = '"'
    else:
        style = "|" if "\n" in value.rstrip("\n") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def _plain(value: Any) -> Any:
    """Mappings and tuples as the dicts and lists YAML writes; values JSON-checked."""
    return json.loads(json.dumps(value, default=_unjsonable, allow_nan=False))


def _unjsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def render_case(case: Mapping[str, Any], column: int = INDENT, newline: str = "\n") -> str:
    """The YAML lines of one case as an item of the cases list, its dash at `column`."""
    text = yaml.dump(
        [_plain(case)],
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=100,
    )
    pad = " " * column
    return "".join((pad + line if line.strip() else line) + newline for line in text.splitlines())


@dataclass
class _Item:
    name: str | None
    first: int  # the dash's line (0-based)
    top: int  # the first of the comment lines right above the dash
    last: int  # the last line of the case's content
    column: int  # the dash's column


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith("#")


def _content_end(node: Node) -> int:
    """The last line (0-based) holding the node's own text."""
    while isinstance(node, MappingNode | SequenceNode) and not node.flow_style and node.value:
        last = node.value[-1]
        node = last[1] if isinstance(last, tuple) else last
    mark = node.end_mark
    return mark.line - 1 if mark.column == 0 and mark.line > node.start_mark.line else mark.line


def _name_of(node: Node) -> str | None:
    if isinstance(node, MappingNode):
        for key, value in node.value:
            if (
                isinstance(key, ScalarNode)
                and key.value == "name"
                and isinstance(value, ScalarNode)
            ):
                return value.value
    return None


class _Document:
    """The parts of a cases.yaml text a splice needs; ValueError when it is not YAML."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        if self.lines and not self.lines[-1].endswith(("\n", "\r")):
            self.lines[-1] += "\n"
        first = self.lines[0] if self.lines else "\n"
        self.newline = "\r\n" if first.endswith("\r\n") else "\n"
        try:
            self.root = strictyaml.compose(text)
        except (yaml.YAMLError, strictyaml.Refused, UnicodeError, RecursionError) as exc:
            raise ValueError(f"cases.yaml is not readable YAML: {exc}") from exc
        self.key: ScalarNode | None = None
        self.value: Node | None = None
        if self.root is not None and not isinstance(self.root, MappingNode):
            raise ValueError("cases.yaml is not a YAML mapping with the key cases")
        for key, value in self.root.value if self.root is not None else ():
            if isinstance(key, ScalarNode) and key.value == "cases":
                self.key, self.value = key, value
        self.items: list[_Item] = []
        if isinstance(self.value, SequenceNode) and not self.value.flow_style:
            self._find_items(self.value)

    def _find_items(self, seq: SequenceNode) -> None:
        floor = self.key.start_mark.line + 1 if self.key is not None else 0
        for node in seq.value:
            index = node.start_mark.index
            while index > 0 and self.text[index - 1] in " \t\r\n":
                index -= 1
            dash = index - 1  # the `-` that opens the item
            first = self.text.count("\n", 0, dash) if dash >= 0 else node.start_mark.line
            column = dash - (self.text.rfind("\n", 0, dash) + 1)
            top = first
            while top - 1 >= floor and _is_comment(self.lines[top - 1]):
                top -= 1
            last = max(first, _content_end(node))
            self.items.append(_Item(_name_of(node), first, top, last, column))
            floor = last + 1

    @property
    def names(self) -> list[str | None]:
        return [item.name for item in self.items]

    def item(self, name: str) -> _Item:
        for item in self.items:
            if item.name == name:
                return item
        raise KeyError(name)

    @property
    def column(self) -> int:
        return self.items[0].column if self.items else INDENT

    def render(self, case: Mapping[str, Any]) -> str:
        return render_case(case, self.column, self.newline)

    def key_line(self, value: str) -> list[str]:
        """The lines with the `cases:` key line rewritten to `cases:<value>`."""
        assert self.key is not None
        lines = list(self.lines)
        line = self.key.start_mark.line
        indent = " " * self.key.start_mark.column
        lines[line] = f"{indent}cases:{value}{self.newline}"
        return lines


def _cases(text: str) -> list[dict[str, Any]]:
    """The file's cases as plain values (whatever the file's problems)."""
    root = strictyaml.compose(text)
    if root is None:
        return []
    value = strictyaml.Reader(lambda *_: None).convert(root)
    cases = value.get("cases") if isinstance(value, dict) else None
    if not isinstance(cases, list):
        return []
    return [_strip_invalid(c) for c in cases if isinstance(c, dict)]


def _strip_invalid(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_invalid(v) for k, v in value.items() if v is not INVALID}
    if isinstance(value, list):
        return [_strip_invalid(v) for v in value if v is not INVALID]
    return value


def new_file(cases: list[Mapping[str, Any]]) -> str:
    if not cases:
        return HEADER + "cases: []\n"
    return HEADER + "cases:\n" + "".join(render_case(c) for c in cases)


def _rewritten(doc: _Document, cases: list[Mapping[str, Any]], lines: list[str] | None) -> str:
    """The spliced text when it reads back as `cases`' names, else the file written anew."""
    if lines is not None:
        text = "".join(lines)
        try:
            names = [c.get("name") for c in _cases(text)]
        except (yaml.YAMLError, strictyaml.Refused, UnicodeError, RecursionError):
            names = None
        if names == [c.get("name") for c in cases]:
            return text
    return new_file(cases)


def _name(case: Mapping[str, Any]) -> str:
    name = case.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("a case needs a name")
    return name


def add_case(text: str | None, case: Mapping[str, Any]) -> str:
    """cases.yaml text with `case` (file form) appended; ValueError on a duplicate name.
    No text (None or blank) gives a new file with a short header."""
    name = _name(case)
    if not text or not text.strip():
        return new_file([case])
    doc = _Document(text)
    existing = _cases(text)
    if name in [c.get("name") for c in existing]:
        raise ValueError(f"a case named {name!r} exists already")
    wanted = [*existing, case]
    rendered = doc.render(case)
    lines: list[str] | None = None
    if doc.root is None:  # comments only
        lines = [*doc.lines, f"cases:{doc.newline}", rendered]
    elif doc.key is None:
        lines = None if doc.root.flow_style else [*doc.lines, f"cases:{doc.newline}", rendered]
    elif _empty(doc.value) and _on_key_line(doc):
        lines = doc.key_line("")
        at = doc.key.start_mark.line + 1
        lines[at:at] = [rendered]
    elif doc.items:
        at = doc.items[-1].last + 1
        lines = list(doc.lines)
        lines[at:at] = [rendered]
    return _rewritten(doc, wanted, lines)


def _empty(value: Node | None) -> bool:
    """`cases:` with nothing, `cases: null` or `cases: []`."""
    if isinstance(value, ScalarNode):
        return value.tag == "tag:yaml.org,2002:null"
    return isinstance(value, SequenceNode) and not value.value


def _on_key_line(doc: _Document) -> bool:
    assert doc.key is not None and doc.value is not None
    return doc.value.end_mark.line == doc.key.start_mark.line or (
        doc.value.end_mark.line == doc.key.start_mark.line + 1 and doc.value.end_mark.column == 0
    )


def replace_case(text: str, name: str, case: Mapping[str, Any]) -> str:
    """cases.yaml text with the case `name` replaced by `case` (its comments kept);
    KeyError when there is no such case, ValueError when `case` renames it onto another."""
    new_name = _name(case)
    doc = _Document(text)
    existing = _cases(text)
    if name not in [c.get("name") for c in existing]:
        raise KeyError(name)
    if new_name != name and new_name in [c.get("name") for c in existing]:
        raise ValueError(f"a case named {new_name!r} exists already")
    wanted = [case if c.get("name") == name else c for c in existing]
    lines: list[str] | None = None
    if name in doc.names:
        item = doc.item(name)
        lines = list(doc.lines)
        lines[item.first : item.last + 1] = [doc.render(case)]
    return _rewritten(doc, wanted, lines)


def remove_case(text: str, name: str) -> str:
    """cases.yaml text without the case `name` (nor the comments right above it); KeyError
    when there is no such case."""
    doc = _Document(text)
    existing = _cases(text)
    if name not in [c.get("name") for c in existing]:
        raise KeyError(name)
    wanted = [c for c in existing if c.get("name") != name]
    lines: list[str] | None = None
    if name in doc.names:
        item = doc.item(name)
        lines = doc.key_line(" []") if len(doc.items) == 1 else list(doc.lines)
        del lines[item.top : item.last + 1]
    return _rewritten(doc, wanted, lines)
