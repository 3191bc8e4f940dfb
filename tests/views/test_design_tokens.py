"""The stylesheets take every colour from the custom properties of console.css's :root,
and docs/design-system.md documents each of those properties."""

from __future__ import annotations

import re

from tests.support import REPO

CSS = REPO / "static" / "css"
COLOUR = re.compile(r"#[0-9a-fA-F]{3,8}\b|\brgba?\(|\bhsla?\(")


def root_block(text: str) -> str:
    return text[text.index(":root {") : text.index("}", text.index(":root {"))]


def test_it_takes_every_colour_from_a_custom_property():
    for name in ("console.css", "runs.css"):
        text = re.sub(r"/\*.*?\*/", "", (CSS / name).read_text(), flags=re.S)
        if ":root {" in text:
            text = text.replace(root_block(text), "")
        assert COLOUR.findall(text) == [], name


def test_the_design_system_documents_every_custom_property():
    defined = re.findall(r"(--[a-z0-9-]+):", root_block((CSS / "console.css").read_text()))
    documented = (REPO / "docs" / "design-system.md").read_text()
    assert len(defined) > 40
    assert [name for name in defined if f"`{name}`" not in documented] == []
