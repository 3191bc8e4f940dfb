"""The languages and kinds a tool is written in, and each language's entry files.

A leaf module: the runner, the models and the new-tool templates take these from here
without importing the TOOL.md parser (which reaches the runner's sandbox through the
JavaScript syntax check)."""

from __future__ import annotations

LANGUAGES = ("typescript", "javascript", "bash", "python")
DEFAULT_LANGUAGE = "typescript"
TOOL_KINDS = ("code", "http")
ENTRY_FILES: dict[str, tuple[str, ...]] = {
    "typescript": ("index.ts",),
    "javascript": ("index.js", "index.mjs"),
    "python": ("index.py",),
    "bash": ("index.sh",),
}
