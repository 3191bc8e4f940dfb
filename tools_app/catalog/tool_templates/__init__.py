"""Starting points for new tools, one per language (the folders beside this file).

Each is a valid tool once rendered: TOOL.md (from toolmd.tmpl, shared by all languages)
with the name, label and description filled in, and an entry file that reports progress
updates and honours cancellation the way its language's contract says (docs/tool-format.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from tools_app.catalog import bundle
from tools_app.manifest.languages import LANGUAGES

HERE = Path(__file__).resolve().parent


def render(language: str, name: str, label: str = "", description: str = "") -> dict[str, bytes]:
    """The files of a new tool `name` made from the `language` template."""
    if language not in LANGUAGES:
        raise ValueError(f"no template for language {language!r}")
    label = label.strip() or name.replace("_", " ").capitalize()
    description = description.strip() or (
        f"{label}: describe what the tool does and when an agent should use it."
    )
    replacements = {
        # JSON strings are valid YAML double-quoted scalars: any text is safe in them.
        "__LABEL_YAML__": json.dumps(label, ensure_ascii=False),
        "__DESCRIPTION_YAML__": json.dumps(description, ensure_ascii=False),
        "__LABEL__": label,
        "__LANGUAGE__": language,
        "__NAME__": name,
    }
    toolmd = (HERE / "toolmd.tmpl").read_text(encoding="utf-8")
    for placeholder, value in replacements.items():
        toolmd = toolmd.replace(placeholder, value)
    files = bundle.read_tool_dir(HERE / language)
    return {"TOOL.md": toolmd.encode("utf-8"), **files}
