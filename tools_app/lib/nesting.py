"""One nesting cap for every JSON value that enters the console (API and MCP params, the
run form, presets, HTTP-tool samples, imports, OpenAPI documents).

Nothing deeper than MAX_DEPTH levels of arrays and objects is accepted, and the refusal
names the path where the value got too deep (`params.a.b[0]`). Deep values are not only
useless: every recursive walk over them (json.dumps, jsonschema, the template that renders
a run, Django's JSONField) can raise RecursionError, a 500 far from where the value came
in. Measuring is iterative, so the check itself cannot run out of stack, and `loads`
turns the parser's own RecursionError into the same refusal."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

MAX_DEPTH = 64
# A path in a message: its start names the input, its end where it got too deep.
PATH_HEAD = 120
PATH_TAIL = 120
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,39}")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{},:]')
_CONTAINERS = (dict, list, tuple)


class TooDeep(ValueError):
    """A JSON value nested deeper than the cap; `path` says where."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"{path}: nested deeper than {MAX_DEPTH} levels")


def too_deep(value: Any, root: str = "params", level: int = 1) -> str | None:
    """The path of the first array or object deeper than MAX_DEPTH levels, or None.

    `level` is the value's own level when it is a container: 1 for a whole params
    object, 2 for one input's value (the form's `json` field: refused exactly where the
    params holding it are), 0 for the API's {"params": ...} envelope."""
    if not isinstance(value, _CONTAINERS):
        return None
    # Each entry: (container, its level, its trail); a trail is (parent trail, key),
    # built only as linked pairs so the walk costs no string work until it refuses.
    stack: list[tuple[Any, int, Any]] = [(value, level, None)]
    while stack:
        node, depth, trail = stack.pop()
        if depth > MAX_DEPTH:
            return format_path(root, _unlink(trail))
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            if isinstance(child, _CONTAINERS):
                stack.append((child, depth + 1, (trail, key)))
    return None


def check(value: Any, root: str = "params", level: int = 1) -> None:
    """Raise TooDeep when `value` nests deeper than the cap (see too_deep)."""
    path = too_deep(value, root, level)
    if path is not None:
        raise TooDeep(path)


def loads(text: str | bytes, root: str = "params", level: int = 1, **kwargs: Any) -> Any:
    """json.loads, then the cap. Other parse errors (JSONDecodeError, ValueError for a
    number past Python's digit limit) pass through for the caller to word."""
    try:
        value = json.loads(text, **kwargs)
    except RecursionError:
        # Thousands of levels: the parser ran out of stack. Name the path from the text.
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        raise TooDeep(format_path(root, scan_path(text, MAX_DEPTH - level + 1))) from None
    check(value, root, level)
    return value


def scan_path(text: str, limit: int) -> list[Any]:
    """The keys leading to the first container deeper than `limit` in JSON text, read
    token by token (iterative, and it stops there: a megabyte of `[` costs 65 tokens)."""
    frames: list[list[Any]] = []  # [is_object, current key or index]
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            if len(frames) >= limit:
                return [frame[1] for frame in frames]
            frames.append([token == "{", None if token == "{" else 0])
        elif token in "]}":
            if frames:
                frames.pop()
        elif not frames:
            continue
        elif token == ",":
            frame = frames[-1]
            frame[1] = None if frame[0] else frame[1] + 1
        elif token.startswith('"') and frames[-1][0] and frames[-1][1] is None:
            try:
                frames[-1][1] = json.loads(token)
            except ValueError:
                frames[-1][1] = token.strip('"')
    return [frame[1] for frame in frames]


def format_path(root: str, keys: list[Any]) -> str:
    parts = [root]
    for key in keys:
        if isinstance(key, int):
            parts.append(f"[{key}]")
        elif key is None:
            parts.append("[?]")
        elif _KEY.fullmatch(str(key)):
            parts.append(f".{key}" if parts != [""] else str(key))
        else:
            parts.append("[" + json.dumps(str(key)[:40], ensure_ascii=False) + "]")
    path = "".join(parts) or "(the top level)"
    if len(path) > PATH_HEAD + PATH_TAIL:
        path = path[:PATH_HEAD] + "…" + path[-PATH_TAIL:]
    return path


def _unlink(trail: Any) -> list[Any]:
    keys = []
    while trail is not None:
        trail, key = trail
        keys.append(key)
    keys.reverse()
    return keys


def loads_on_fresh_stack(text: str | bytes, **kwargs: Any) -> Any:
    """json.loads with a whole recursion budget: a value stored before the cap (up to the
    ~900 levels the API once took) must still load wherever the caller's stack is, and
    the recursion limit counts per thread, so a new thread starts with all of it."""
    outcome: list[Any] = []

    def decode() -> None:
        try:
            outcome.append((True, json.loads(text, **kwargs)))
        except BaseException as exc:  # re-raised in the caller's thread
            outcome.append((False, exc))

    thread = threading.Thread(target=decode, name="json-fresh-stack")
    thread.start()
    thread.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
