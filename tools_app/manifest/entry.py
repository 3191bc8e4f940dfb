"""What a tool folder must hold beside TOOL.md for its language: the entry file (one of
manifest/languages.py's ENTRY_FILES, none for kind: http) and, for Python, code that parses."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping

from tools_app.lib.strictyaml import INVALID, WARNING, Map, Problem, show
from tools_app.manifest.document import Checker
from tools_app.manifest.languages import DEFAULT_LANGUAGE, ENTRY_FILES, LANGUAGES


def check_language(c: Checker, m: Map) -> str:
    language = m.get("language")
    if language is None or language is INVALID:
        return DEFAULT_LANGUAGE
    if not isinstance(language, str) or language not in LANGUAGES:
        c.error(
            m.value_lines["language"],
            "language",
            f"{show(language)} is not one of {', '.join(LANGUAGES)}",
        )
        return DEFAULT_LANGUAGE
    return language


def declares_http(data: bytes) -> bool:
    """An invalid TOOL.md that says kind: http is not missing an entry file."""
    return re.search(rb"(?m)^kind:[ \t]*[\"']?http\b", data) is not None


def entry_problems(
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


def http_entry_problems(files: Mapping[str, bytes], toolmd_path: str) -> list[Problem]:
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


def samples_in_code_tool(files: Mapping[str, bytes], toolmd_path: str) -> list[Problem]:
    if any(name.startswith("samples/") and name.endswith(".json") for name in files):
        message = "samples/*.json are only read for kind: http tools"
        return [Problem(toolmd_path, 1, "samples", message, WARNING)]
    return []


def missing_entry_for_text(files: Mapping[str, bytes], toolmd_path: str) -> list[Problem]:
    """An invalid TOOL.md may still be paired with no entry file at all: say so too."""
    if any(entry in files for names in ENTRY_FILES.values() for entry in names):
        return []
    expected = " or ".join(n for names in ENTRY_FILES.values() for n in names)
    return [Problem(toolmd_path, 1, "entry", f"no entry file: expected one of {expected}")]


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
