"""Live validation while typing: the htmx partial and its messages."""

from __future__ import annotations

import contextlib
import io
import json
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils.html import escape

from tests.support.editor import editor_data, file_index
from tools_app.models import AuditEvent, ToolVersion

HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "problems", "HTTP_HX_TRIGGER": "problems"}


def _validate(client, data: dict) -> tuple[str, list[dict]]:
    response = client.post("/tools/alpha/validate/", data, **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    match = re.search(
        r'<script id="problems-data" type="application/json">(.*?)</script>', html, re.S
    )
    assert match, html
    return html, json.loads(match.group(1))


def _validate_tools_output(tmp_path, monkeypatch, files: dict[str, str]) -> list[str]:
    """What `manage.py validate_tools alpha` prints for the same files."""
    folder = tmp_path / "alpha"
    folder.mkdir()
    for path, text in files.items():
        (folder / path).write_text(text.replace("\r\n", "\n"))
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.suppress(CommandError):  # exit 1: the tool has errors
        call_command("validate_tools", "alpha", stdout=out)
    return [line for line in out.getvalue().splitlines() if line.startswith("alpha/")]


BROKEN = {
    "yaml syntax": ("description: The alpha tool.", "description: [unclosed"),
    "bad input type": (
        "language: typescript",
        "language: typescript\ninputs:\n  city:\n    type: strng\n    description: A city.",
    ),
    "bad language": ("language: typescript", "language: cobol"),
    "anchors": ("description: The alpha tool.", "description: &a The alpha tool.\nlabel: *a"),
    "unknown key (a warning)": ("language: typescript", "language: typescript\ncolour: blue"),
}


@pytest.mark.parametrize("case", BROKEN)
def test_it_shows_the_same_messages_as_validate_tools(
    developer_client, make_tool, tmp_path, monkeypatch, case
):
    make_tool("alpha", publish=False)
    data = editor_data(developer_client, "alpha")
    old, new = BROKEN[case]
    data["toolmd"] = data["toolmd"].replace(old, new.replace("\n", "\r\n"))

    html, problems = _validate(developer_client, data)

    expected = _validate_tools_output(
        tmp_path,
        monkeypatch,
        {
            "TOOL.md": data["toolmd"],
            "index.ts": data[f"files-{file_index(data, 'index.ts')}-content"],
        },
    )
    assert expected
    frontmatter_problems = [p["message"] for p in problems if p["key"] not in ("body",)]
    assert frontmatter_problems == expected
    for line in expected:
        assert escape(line) in html
    # Each problem names its file and line, for the inline markers.
    for problem in problems:
        assert problem["file"] == "TOOL.md"
        assert problem["line"] == int(problem["message"].split(":")[1])


def test_a_yaml_error_is_reported_at_its_line(developer_client, make_tool):
    make_tool("alpha", publish=False)
    data = editor_data(developer_client, "alpha")
    lines = data["toolmd"].split("\r\n")
    lines.insert(3, "  bad: indentation: here")
    data["toolmd"] = "\r\n".join(lines)

    html, problems = _validate(developer_client, data)

    assert [p["severity"] for p in problems] == ["error"]
    assert problems[0]["line"] == 4
    assert problems[0]["message"].startswith("alpha/TOOL.md:4: frontmatter: YAML syntax error")
    assert "1 error" in html and "to save a version" in html


def test_a_missing_entry_file_is_an_error(developer_client, make_tool):
    make_tool("alpha", publish=False)
    data = editor_data(developer_client, "alpha")
    data[f"files-{file_index(data, 'index.ts')}-DELETE"] = "on"

    _, problems = _validate(developer_client, data)

    assert [(p["key"], p["severity"]) for p in problems] == [("entry", "error")]
    assert "index.ts is missing" in problems[0]["message"]


def test_valid_text_shows_only_the_static_check_warnings(developer_client, make_tool):
    make_tool("alpha", publish=False)
    data = editor_data(developer_client, "alpha")
    index = file_index(data, "index.ts")
    data[f"files-{index}-content"] = (
        "export async function execute(id, params, signal, onUpdate) {\r\n"
        "  const key = process.env.SECRET_KEY;\r\n"
        "  return { content: [{ type: 'text', text: String(key) }] };\r\n}\r\n"
    )

    html, problems = _validate(developer_client, data)

    assert {p["severity"] for p in problems} == {"warning"}
    env = next(p for p in problems if p["key"] == "env")
    assert env["file"] == "index.ts" and env["line"] == 2
    assert "SECRET_KEY" in env["message"]
    assert "No errors." in html and "Warnings never block saving." in html


def test_form_errors_are_listed_too(developer_client, make_tool):
    make_tool("alpha", publish=False)
    data = editor_data(developer_client, "alpha")
    data["files-TOTAL_FORMS"] = "2"
    data["files-1-path"] = "/etc/passwd"
    data["files-1-content"] = "x"

    html, problems = _validate(developer_client, data)

    assert problems == []
    assert "absolute paths are not allowed" in html


def test_it_returns_only_the_fragment_and_stores_nothing(developer_client, make_tool):
    make_tool("alpha", publish=False)
    events = AuditEvent.objects.count()
    data = editor_data(developer_client, "alpha")
    data["toolmd"] += "\r\nchanged\r\n"

    html, _ = _validate(developer_client, data)

    assert "<html" not in html and 'id="problems"' in html
    # The fragment replaces itself, so it carries its own htmx wiring.
    assert 'hx-post="/tools/alpha/validate/"' in html
    assert ToolVersion.objects.count() == 1
    assert AuditEvent.objects.count() == events


def test_the_editor_page_validates_while_typing(developer_client, make_tool):
    make_tool("alpha", publish=False)
    html = developer_client.get("/tools/alpha/edit/").content.decode()

    assert 'hx-post="/tools/alpha/validate/"' in html
    assert 'hx-trigger="input delay:500ms from:#tool-form"' in html
    assert 'hx-include="#tool-form"' in html
    # Progressive enhancement: plain textareas, upgraded by the editor script.
    assert re.search(r'<textarea name="toolmd"[^>]*data-code-editor', html)
    assert "build/editor.js" in html


def test_a_tool_with_errors_cannot_be_saved(developer_client, make_tool):
    make_tool("alpha", publish=False)
    data = editor_data(developer_client, "alpha")
    data["toolmd"] = data["toolmd"].replace("name: alpha", "name: beta")

    response = developer_client.post("/tools/alpha/edit/", data)

    assert response.status_code == 422
    assert "alpha/TOOL.md:2: name: " in response.content.decode()
    assert ToolVersion.objects.count() == 1


@pytest.mark.parametrize(
    ("entry", "source", "line", "expected"),
    [
        (
            "index.ts",
            "export async function execute(id: string) {\r\n  const x: = 1;\r\n}\r\n",
            2,
            "alpha/index.ts:2: typescript: Syntax error: Unexpected token `=`.",
        ),
        (
            "index.js",
            "export async function execute(id) {\r\n  return 1;\r\n}\r\nconst y = (;\r\n",
            4,
            "alpha/index.js:4: javascript: Syntax error: Unexpected token ';' (column 12)",
        ),
    ],
)
def test_a_code_syntax_error_is_shown_at_its_line_as_validate_tools_says(
    developer_client, make_tool, tmp_path, monkeypatch, entry, source, line, expected
):
    language = "typescript" if entry == "index.ts" else "javascript"
    make_tool("alpha", publish=False, language=language)
    data = editor_data(developer_client, "alpha")
    data[f"files-{file_index(data, entry)}-content"] = source

    html, problems = _validate(developer_client, data)

    [problem] = [p for p in problems if p["severity"] == "error"]
    assert problem["file"] == entry and problem["line"] == line
    assert problem["message"].startswith(expected), problem
    assert "No problems found" not in html and "1 error" in html
    printed = _validate_tools_output(
        tmp_path, monkeypatch, {"TOOL.md": data["toolmd"], entry: source}
    )
    assert printed == [problem["message"]]


def test_an_empty_input_description_is_a_warning_that_does_not_block_saving(
    developer_client, make_tool
):
    make_tool("alpha", publish=False)
    data = editor_data(developer_client, "alpha")
    data["toolmd"] = data["toolmd"].replace(
        "language: typescript",
        "language: typescript\r\ninputs:\r\n  city:\r\n    type: string\r\n    description: ''",
    )

    html, problems = _validate(developer_client, data)

    [empty] = [p for p in problems if p["key"] == "inputs.city.description"]
    assert empty["severity"] == "warning" and empty["line"] == 9
    assert "is empty: say what the input is for" in empty["message"]
    assert {p["severity"] for p in problems} == {"warning"}
    assert "No errors." in html
