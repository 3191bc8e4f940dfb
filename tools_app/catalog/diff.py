"""Side-by-side diffs of two tool versions (or of any two file sets), built with difflib.

A tool diff has one section for the TOOL.md frontmatter, one for its Markdown body and one
per other file (added, removed, changed or unchanged). Each section is a list of rows: a
pair of (line number, highlighted HTML) cells, a `kind` the template marks (equal, delete,
insert, replace), and "skipped" rows standing for long unchanged runs, so a one-line change
in a 2,000-line file stays readable. Lines are highlighted by Pygments token by token, so
a multi-line token (a docstring) never leaves a <span> open across rows."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from pygments.token import STANDARD_TYPES, _TokenType

from tools_app.catalog.rendering import MAX_HIGHLIGHT_CHARS, lexer_for

# Unchanged lines kept around each change; longer unchanged runs collapse into one row.
CONTEXT = 3
# Lines above this are compared without highlighting, and files above MAX_DIFF_LINES are
# not compared line by line at all (difflib is quadratic in the worst case).
MAX_DIFF_LINES = 20_000

_FRONTMATTER_RE = re.compile(r"\A(?:\ufeff)?---[ \t]*\r?\n(.*?^)---[ \t]*(?:\r?\n|\Z)", re.S | re.M)


@dataclass(frozen=True)
class Cell:
    number: int | None  # 1-based line number, None for the empty side
    html: SafeString


@dataclass(frozen=True)
class Row:
    kind: str  # equal | delete | insert | replace | skipped
    left: Cell | None = None
    right: Cell | None = None
    skipped: int = 0  # for "skipped" rows: how many unchanged lines are hidden


@dataclass
class Section:
    title: str
    filename: str  # for highlighting: "TOOL.md", "index.ts", "frontmatter.yaml"...
    status: str  # changed | added | removed | unchanged | binary
    rows: list[Row] = field(default_factory=list)
    added: int = 0
    removed: int = 0
    note: str = ""

    @property
    def changed(self) -> bool:
        return self.status != "unchanged"


def split_toolmd(text: str) -> tuple[str, str]:
    """(frontmatter YAML, body) of a TOOL.md; ("", text) when it has no frontmatter."""
    front, body, _ = _split_toolmd_lines(text)
    return front, body


def _split_toolmd_lines(text: str) -> tuple[str, str, int]:
    """split_toolmd, and how many of the file's lines come before the body (the
    frontmatter and its two fences), so the diff numbers lines as the editor does."""
    match = _FRONTMATTER_RE.match(text)
    if match is None:
        return "", text, 0
    return match.group(1), text[match.end() :], text[: match.end()].count("\n")


def highlight_lines(text: str, filename: str) -> list[SafeString]:
    """One HTML string per line of `text`, with Pygments token classes."""
    lines = text.splitlines()
    if len(text) > MAX_HIGHLIGHT_CHARS:
        return [escape(line) for line in lines]
    out: list[list[str]] = [[]]
    for ttype, value in lexer_for(filename, text).get_tokens(text):
        css = _css_class(ttype)
        for i, piece in enumerate(value.split("\n")):
            if i:
                out.append([])
            if piece:
                escaped = escape(piece)
                out[-1].append(f'<span class="{css}">{escaped}</span>' if css else escaped)
    html = [mark_safe("".join(parts)) for parts in out]  # noqa: S308 - every piece escaped
    # Pygments ends its token stream with a newline; keep exactly one entry per line.
    return (html + [mark_safe("")] * len(lines))[: len(lines)]


def _css_class(ttype: _TokenType) -> str:
    while ttype not in STANDARD_TYPES:
        ttype = ttype.parent
    return STANDARD_TYPES[ttype]


def diff_text(
    a: str, b: str, filename: str, context: int = CONTEXT, *, a_first: int = 1, b_first: int = 1
) -> tuple[list[Row], int, int]:
    """Side-by-side rows for two texts, and the counts of removed and added lines. Lines
    are numbered from `a_first` and `b_first` (a part of a file starts further down)."""
    a_lines, b_lines = a.splitlines(), b.splitlines()
    if len(a_lines) > MAX_DIFF_LINES or len(b_lines) > MAX_DIFF_LINES:
        return [], 0, 0
    a_html, b_html = highlight_lines(a, filename), highlight_lines(b, filename)
    matcher = difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False)
    rows: list[Row] = []
    removed = added = 0
    opcodes = matcher.get_opcodes()
    a_shift, b_shift = a_first - 1, b_first - 1
    for index, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag == "equal":
            rows += _equal_rows(
                a_html,
                b_html,
                i1,
                i2,
                j1,
                j2,
                context,
                first=index == 0,
                last=index == len(opcodes) - 1,
                shift=(a_shift, b_shift),
            )
            continue
        removed += i2 - i1
        added += j2 - j1
        for k in range(max(i2 - i1, j2 - j1)):
            left = Cell(a_shift + i1 + k + 1, a_html[i1 + k]) if i1 + k < i2 else None
            right = Cell(b_shift + j1 + k + 1, b_html[j1 + k]) if j1 + k < j2 else None
            kind = "replace" if left and right else ("delete" if left else "insert")
            rows.append(Row(kind, left, right))
    return rows, removed, added


def _equal_rows(
    a_html: list[SafeString],
    b_html: list[SafeString],
    i1: int,
    i2: int,
    j1: int,
    j2: int,
    context: int,
    *,
    first: bool,
    last: bool,
    shift: tuple[int, int] = (0, 0),
) -> list[Row]:
    """Unchanged lines: `context` lines next to each change, the rest as one skipped row."""
    count = i2 - i1
    keep_head = 0 if first else context
    keep_tail = 0 if last else context
    if count <= keep_head + keep_tail + 1:
        keep = list(range(count))
        hidden = 0
    else:
        keep = [*range(keep_head), *range(count - keep_tail, count)]
        hidden = count - keep_head - keep_tail
    rows: list[Row] = []
    for position, k in enumerate(keep):
        if hidden and position == keep_head:
            rows.append(Row("skipped", skipped=hidden))
        rows.append(
            Row(
                "equal",
                Cell(shift[0] + i1 + k + 1, a_html[i1 + k]),
                Cell(shift[1] + j1 + k + 1, b_html[j1 + k]),
            )
        )
    if hidden and keep_head == len(keep):
        rows.append(Row("skipped", skipped=hidden))
    return rows


def _text(data: bytes | None) -> str | None:
    """The file as text; None when it is not UTF-8 (shown as a binary file)."""
    if data is None:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


def _text_section(
    title: str, filename: str, a: str | None, b: str | None, firsts: tuple[int, int] = (1, 1)
) -> Section:
    """A section comparing two texts; None on a side means the file is absent there.
    `firsts`: the file's line numbers of each side's first line."""
    if a == b:
        status = "unchanged"
    else:
        status = "added" if a is None else "removed" if b is None else "changed"
    rows, removed, added = diff_text(
        a or "", b or "", filename, a_first=firsts[0], b_first=firsts[1]
    )
    section = Section(title, filename, status, rows, added, removed)
    if not rows and status != "unchanged" and (a or b):
        section.note = f"too long to compare line by line (more than {MAX_DIFF_LINES} lines)"
    return section


def _toolmd_parts(files: Mapping[str, bytes]) -> tuple[str | None, str | None, int]:
    """(frontmatter, body, lines before the body) of a folder's TOOL.md."""
    data = files.get("TOOL.md")
    if data is None:
        return None, None, 0
    # A TOOL.md that is not UTF-8 is invalid anyway; show what can be read of it.
    return _split_toolmd_lines(data.decode("utf-8-sig", errors="replace"))


def diff_files(a: Mapping[str, bytes], b: Mapping[str, bytes]) -> list[Section]:
    """Sections for two tool folders: frontmatter, body, then every other file by path.
    TOOL.md's lines keep the numbers they have in the file (and the editor): the
    frontmatter starts at line 2, after its fence, and the body after the closing one."""
    (a_front, a_body, a_before), (b_front, b_body, b_before) = _toolmd_parts(a), _toolmd_parts(b)
    front_firsts = (2 if a_before else 1, 2 if b_before else 1)
    sections = [
        _text_section("TOOL.md frontmatter", "frontmatter.yaml", a_front, b_front, front_firsts),
        _text_section("TOOL.md body", "TOOL.md", a_body, b_body, (a_before + 1, b_before + 1)),
    ]
    for path in sorted((set(a) | set(b)) - {"TOOL.md"}):
        left, right = a.get(path), b.get(path)
        a_text, b_text = _text(left), _text(right)
        if (left is not None and a_text is None) or (right is not None and b_text is None):
            if left == right:
                status = "unchanged"
            else:
                status = "added" if left is None else "removed" if right is None else "changed"
            section = Section(path, path, status)
            section.note = "binary file, not compared line by line"
            sections.append(section)
            continue
        sections.append(_text_section(path, path, a_text, b_text))
    return sections


def summary(sections: list[Section]) -> tuple[int, int, int]:
    """(changed sections, lines removed, lines added)."""
    changed = [s for s in sections if s.changed]
    return len(changed), sum(s.removed for s in changed), sum(s.added for s in changed)
