"""The editor in a real browser (Debian's Chromium through Playwright) against a live
server: type invalid YAML and see the inline error at its line, fix it, save, see the new
version and its diff, roll back, publish, and see the registry answer change.

Needs the built editor (static/build/editor.js: `npm run build`, which dev.py runs).
Screenshots go to test-artifacts/."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from tests.support import REPO, require, tool_files
from tests.support.browser import ARTIFACTS, browser_context
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.models import AgentToken, Tool

pytestmark = pytest.mark.browser

BUILD = REPO / "static" / "build" / "editor.js"
BODY = (
    "# Demo\n\n## Authentication\n\nNone.\n\n## Usage\n\nCall it.\n\n## Examples\n\n"
    "```json\n{}\n```\n\n## Errors\n\nNone.\n\n## Notes\n\nNone.\n"
)


@pytest.fixture
def admin_page(live_server, console_admin) -> Iterator:
    require(not BUILD.exists(), "static/build/editor.js is not built (npm ci && npm run build)")
    with browser_context(
        live_server, user=console_admin, viewport={"width": 1400, "height": 1000}
    ) as context:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        yield page
    assert errors == [], f"JavaScript errors: {errors}"


def _registry(live_server, token: str) -> httpx.Response:
    response = httpx.get(
        f"{live_server.url}/api/v1/registry", headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200
    return response


def _demo_entry(response: httpx.Response) -> dict:
    return next(t for t in response.json()["tools"] if t["name"] == "demo")


def test_edit_validate_save_diff_roll_back_publish(admin_page, live_server, transactional_db):
    from playwright.sync_api import expect

    page = admin_page
    system = Actor.system()
    save_version("demo", tool_files("demo", description="Old description.", body=BODY),
                 actor=system, publish=True)  # fmt: skip
    save_version("demo", tool_files("demo", description="Good description.", body=BODY),
                 actor=system, note="the good one")  # fmt: skip
    _, token = AgentToken.issue("browser-test", ["registry:read"])
    before = _registry(live_server, token)
    assert _demo_entry(before)["description"] == "Old description."

    # The editor: CodeMirror replaces both textareas, with line numbers.
    page.goto("/tools/demo/edit/")
    expect(page.locator("html[data-code-editor=ready]")).to_have_count(1)
    editors = page.locator(".code-editor .cm-editor")
    expect(editors).to_have_count(2)
    expect(page.locator("#id_toolmd")).to_be_hidden()
    toolmd_editor = editors.nth(0)
    numbers = toolmd_editor.locator(".cm-lineNumbers .cm-gutterElement")
    expect(numbers.filter(has_text=re.compile(r"^4$"))).to_have_count(1)

    # Type invalid YAML on line 2: the inline error appears at that line.
    toolmd_editor.locator(".cm-content").click()
    page.keyboard.press("Control+Home")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("End")
    page.keyboard.type(": oops")
    error = page.locator("#problems li.problem.error")
    expect(error).to_have_count(1)
    expect(error).to_contain_text("demo/TOOL.md:2: frontmatter: YAML syntax error")
    expect(page.locator("#problems")).to_contain_text("1 error")
    expect(toolmd_editor.locator(".cm-lint-marker-error")).to_have_count(1)
    expect(toolmd_editor.locator(".cm-lintRange-error")).to_have_count(1)
    marker_top = toolmd_editor.locator(".cm-lint-marker-error").bounding_box()["y"]
    line_two = toolmd_editor.locator(".cm-line").nth(1).bounding_box()
    assert line_two["y"] - 2 <= marker_top <= line_two["y"] + line_two["height"]
    page.screenshot(path=str(ARTIFACTS / "editor-1-invalid-yaml.png"), full_page=True)

    # Fix it, then change the description on line 4.
    for _ in range(len(": oops")):
        page.keyboard.press("Backspace")
    expect(page.locator("#problems li.problem.error")).to_have_count(0)
    expect(page.locator("#problems")).to_contain_text("No problems found.")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("End")
    page.keyboard.press("Shift+Home")
    page.keyboard.type("description: A broken idea.")
    page.fill("#id_note", "try another description")
    page.screenshot(path=str(ARTIFACTS / "editor-2-fixed.png"), full_page=True)
    # Ctrl+S saves from wherever focus is (here the note field), as in any editor.
    page.keyboard.press("Control+s")

    expect(page.locator(".messages")).to_contain_text("Saved version 3.")
    tool = Tool.objects.get(name="demo")
    latest = tool.versions.get(number=3)
    assert latest.manifest["description"] == "A broken idea."
    assert latest.note == "try another description"
    assert latest.author.username == "ada"

    # The new version in the history, and its diff.
    page.goto("/tools/demo/versions/")
    row = page.locator("tr#v3")
    expect(row).to_contain_text("try another description")
    expect(row.locator(".badge")).to_have_text("draft")
    row.get_by_role("link", name="diff").click()
    expect(page.locator("h1")).to_have_text("Version 2 → version 3")
    # Two changed lines, marked: the version number and the description.
    changed = page.locator("table.diff tr.replace")
    expect(changed).to_have_count(2)
    expect(changed.nth(0).locator("td.code.old")).to_contain_text("version: 2")
    expect(changed.nth(0).locator("td.code.new")).to_contain_text("version: 3")
    expect(changed.nth(1).locator("td.code.old")).to_contain_text("Good description.")
    expect(changed.nth(1).locator("td.code.new")).to_contain_text("A broken idea.")
    page.screenshot(path=str(ARTIFACTS / "editor-3-diff.png"), full_page=True)

    # Roll back to version 2, through its confirm page: a new version 4 with its content.
    page.goto("/tools/demo/versions/")
    page.locator("tr#v2").get_by_role("link", name="roll back to v2").click()
    expect(page.locator("h1")).to_have_text("Roll demo back to version 2?")
    page.get_by_role("button", name="Roll back").click()
    expect(page.locator(".messages")).to_contain_text("version 4 has the content of version 2")
    assert tool.versions.get(number=4).manifest["description"] == "Good description."

    # Publish version 4: the registry answer changes.
    page.locator("tr#v4").get_by_role("link", name="publish").click()
    expect(page.locator("h1")).to_have_text("Publish version 4 of demo?")
    page.get_by_role("button", name="Publish").click()
    expect(page.locator(".messages")).to_contain_text("Published version 4.")
    expect(page.locator("tr#v4 .badge")).to_have_text("published")
    page.screenshot(path=str(ARTIFACTS / "editor-4-published.png"), full_page=True)
    after = _registry(live_server, token)
    assert after.headers["ETag"] != before.headers["ETag"]
    entry = _demo_entry(after)
    assert entry["description"] == "Good description."
    assert entry["sha256"] == tool.versions.get(number=4).sha256
    assert Tool.objects.get(name="demo").published_version.number == 4


def test_the_editor_works_without_its_script(admin_page, transactional_db):
    """Progressive enhancement: with the script blocked, the textareas post the form."""
    from playwright.sync_api import expect

    page = admin_page
    save_version("demo", tool_files("demo", body=BODY), actor=Actor.system())
    page.route("**/build/editor.js", lambda route: route.abort())

    page.goto("/tools/demo/edit/")
    expect(page.locator("textarea#id_toolmd")).to_be_visible()
    assert page.locator(".cm-editor").count() == 0
    text = page.input_value("#id_toolmd")
    page.fill("#id_toolmd", text.replace("The demo tool.", "Edited without a script."))
    page.click("button[name=save]")

    expect(page.locator(".messages")).to_contain_text("Saved version 2.")
    version = Tool.objects.get(name="demo").versions.get(number=2)
    assert version.manifest["description"] == "Edited without a script."


def test_it_keeps_unsaved_edits_from_being_lost(admin_page, transactional_db):
    """Changing the editor arms a beforeunload prompt and a confirm on in-app links, and
    holds back "Publish saved vN", which would publish the saved version, not the edits."""
    from playwright.sync_api import expect

    page = admin_page
    save_version("demo", tool_files("demo", body=BODY), actor=Actor.system(), publish=True)
    save_version("demo", tool_files("demo", description="Two.", body=BODY), actor=Actor.system())
    page.goto("/tools/demo/edit/")
    expect(page.locator("html[data-code-editor=ready]")).to_have_count(1)
    publish = page.get_by_role("link", name="Publish saved v2")
    expect(publish).to_be_visible()

    page.locator(".code-editor .cm-content").first.click()
    page.keyboard.type("x")
    expect(page.locator("#unsaved-note")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "editor-unsaved-1280.png"), full_page=True)

    dialogs: list[str] = []

    def answer(dialog) -> None:
        dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", answer)
    expect(publish).to_have_attribute("aria-disabled", "true")
    publish.click(force=True)
    assert dialogs and dialogs[-1].startswith("alert: Unsaved changes")
    assert page.url.endswith("/tools/demo/edit/")
    page.get_by_role("link", name="Versions").first.click()
    assert dialogs[-1].startswith("confirm: You have unsaved changes")
    assert page.url.endswith("/tools/demo/edit/")
    assert Tool.objects.get(name="demo").published_version.number == 1
    # Closing (or reloading) the tab: the browser's own "leave site?" prompt; accepted here,
    # so the page closes.
    page.remove_listener("dialog", answer)
    page.on("dialog", lambda dialog: dialogs.append(dialog.type) or dialog.accept())
    with page.expect_event("close"):
        page.close(run_before_unload=True)
    assert dialogs[-1] == "beforeunload"
