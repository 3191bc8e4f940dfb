"""A tool folder checked as a whole: TOOL.md (toolmd.py), the entry file and code beside
it (entry.py, jssyntax.py), a kind: http tool's checks and samples (http_tools/checks.py)
and the test cases in cases.yaml (tools_app/cases/document.py, against the parsed inputs,
kind and samples). validate_tools, editor saves, saving and publishing versions, seed sync
and imports all go through validate_files, so they refuse the same folders.

Problems about the folder use these keys: a missing TOOL.md `TOOL.md`; a missing entry
file `entry`; a folder over bundle's limits or holding links `files`; a path given to
scan() that is missing or empty `path`. Problems of cases.yaml name `<tool>/cases.yaml`
and its line, like TOOL.md's.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path, PurePosixPath

from tools_app.cases.document import CASES_FILE, cases_of, parse_cases
from tools_app.catalog import bundle
from tools_app.http_tools import checks as http_checks
from tools_app.http_tools.checks import ValidationContext
from tools_app.lib.strictyaml import ERROR, Problem
from tools_app.manifest import jssyntax
from tools_app.manifest.entry import (
    declares_http,
    entry_problems,
    http_entry_problems,
    missing_entry_for_text,
    python_syntax_problems,
    samples_in_code_tool,
)
from tools_app.manifest.limits import MAX_TOOLMD
from tools_app.manifest.toolmd import ParseResult, parse_toolmd


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
        # The cases cannot be checked against inputs no one could read: the file alone.
        problems += _cases_problems(files, toolmd_path, None)
        if declares_http(files["TOOL.md"]):
            return ParseResult(None, problems)
        return ParseResult(None, problems + missing_entry_for_text(files, toolmd_path))
    if result.manifest.kind == "http":
        problems += http_entry_problems(files, toolmd_path)
        problems += http_checks.check(result.manifest, files, toolmd_path, result.lines, context)
    else:
        problems += entry_problems(files, result.manifest.language, toolmd_path, 1)
        problems += samples_in_code_tool(files, toolmd_path)
        if result.manifest.language == "python":
            problems += python_syntax_problems(files, toolmd_path)
        elif result.manifest.language in ("typescript", "javascript"):
            problems += jssyntax.problems(files, toolmd_path)
    problems += _cases_problems(files, toolmd_path, result)
    if any(p.severity == ERROR for p in problems):
        return ParseResult(None, problems, result.lines)
    return ParseResult(result.manifest, problems, result.lines)


def cases_path(toolmd_path: str) -> str:
    """Where problems of the folder's cases.yaml point: beside its TOOL.md."""
    folder = toolmd_path.rpartition("/")[0]
    return f"{folder}/{CASES_FILE}" if folder else CASES_FILE


def _cases_problems(
    files: Mapping[str, bytes], toolmd_path: str, result: ParseResult | None
) -> list[Problem]:
    if CASES_FILE not in files:
        return []
    path = cases_path(toolmd_path)
    if result is None or result.manifest is None:
        return parse_cases(files[CASES_FILE], path).problems
    return cases_of(files, result.manifest, path.rpartition("/")[0]).problems


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
            if path.name in ("TOOL.md", CASES_FILE):
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
