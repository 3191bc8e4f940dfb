"""The editor's run panel in a real browser (Debian's Chromium through Playwright) against
a live server and a real Celery worker: edit the draft's code, Save and run from the
panel, watch its progress arrive live and the result come from the DRAFT code (not the
published version), cancel a long run, and keep editing (Ctrl+S saves on top of the
version the panel saved). At 1280 px the panel sits beside the code; at 390 px it stacks
below it. Screenshots go to test-artifacts/editor-run-panel-*.png."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.support import REPO, require, tool_files
from tests.support.browser import ARTIFACTS, axe_violations, browser_context
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.models import Run, Tool
from tools_app.models.runs import RunStatus

pytestmark = [pytest.mark.browser, pytest.mark.worker]

BUILD = REPO / "static" / "build" / "editor.js"
INPUTS = {
    "who": {"type": "string", "description": "Whom to greet."},
    "steps": {"type": "integer", "description": "How many steps.", "optional": True, "default": 3},
    "delay_ms": {"type": "integer", "description": "Pause after each step, in ms.",
                 "optional": True, "default": 300},
}  # fmt: skip
SOURCE = """export async function execute(toolCallId: string, params: any, signal: AbortSignal,
                              onUpdate: (u: any) => void) {
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  for (let i = 1; i <= params.steps; i++) {
    if (signal.aborted) {
      return { content: [{ type: "text", text: `stopped at step ${i}` }], isError: true };
    }
    onUpdate({ content: [{ type: "text", text: `WHICH step ${i} of ${params.steps}` }] });
    await sleep(params.delay_ms);
  }
  return { content: [{ type: "text", text: `WHICH code greets ${params.who}` }] };
}
"""


def source(which: str) -> str:
    return SOURCE.replace("WHICH", which)


@pytest.fixture
def tool(worker) -> Tool:
    """Published v1 and a draft v2, each saying which code ran."""
    system = Actor.system()
    save_version("greeter", tool_files("greeter", source=source("published"), inputs=INPUTS),
                 actor=system, publish=True)  # fmt: skip
    save_version("greeter", tool_files("greeter", source=source("old draft"), inputs=INPUTS),
                 actor=system)  # fmt: skip
    return Tool.objects.get(name="greeter")


@pytest.fixture
def dev_page(live_server, developer, request) -> Iterator:
    require(not BUILD.exists(), "static/build/editor.js is not built (npm ci && npm run build)")
    width = request.param
    with browser_context(
        live_server,
        user=developer,
        viewport={"width": width, "height": 900},
        timeout_ms=30_000,
    ) as context:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.width = width  # type: ignore[attr-defined]
        yield page
    assert errors == [], f"JavaScript errors: {errors}"


def replace_code(page, which: str) -> None:
    """Replace the entry file's text in its CodeMirror editor, as a paste would."""
    code = page.locator(".code-editor .cm-content").nth(1)
    code.click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(source(which))


@pytest.mark.parametrize("dev_page", [1280, 390], indirect=True, ids=["1280", "390"])
def test_it_runs_the_edited_draft_from_the_panel_live(dev_page, tool, worker):
    from playwright.sync_api import expect

    page = dev_page
    width = page.width
    page.goto("/tools/greeter/edit/")
    expect(page.locator("html[data-code-editor=ready]")).to_have_count(1)
    panel = page.locator("#run-panel")
    expect(panel).to_contain_text("saves what is in the editor as version 3")

    # Where the panel sits: beside the code when wide, below it at phone width.
    editor = page.locator(".editor-main").bounding_box()
    box = panel.bounding_box()
    if width >= 1280:
        assert box["x"] >= editor["x"] + editor["width"], (box, editor)
    else:
        assert box["y"] >= editor["y"] + editor["height"], (box, editor)
        assert page.evaluate("document.documentElement.scrollWidth") <= width

    # Edit the draft's code (not saved), fill in the panel's inputs, Save and run.
    replace_code(page, "edited draft")
    page.fill("#id_run-who", "Grace")
    page.fill("#id_run-steps", "4")
    page.click("#save-and-run")

    # Progress arrives live in the panel, then the result of the DRAFT code, on this page.
    expect(
        page.locator("#run-panel:not(:has(#result)) #run-updates li:nth-child(2)")
    ).to_be_attached(timeout=30_000)
    expect(page.locator("#run-updates li").first).to_contain_text("edited draft step 1")
    expect(page.locator("#run-panel #result")).to_contain_text(
        "edited draft code greets Grace", timeout=30_000
    )
    expect(page.locator("#run-status")).to_have_text("Succeeded")
    expect(page.locator("#run-updates li")).to_have_count(4)
    assert page.url.endswith("/tools/greeter/edit/")
    run = Run.objects.get()
    assert run.version.number == 3 and run.version.is_draft
    assert run.status == RunStatus.SUCCEEDED
    # The editor works from the version it saved now.
    expect(page.locator("#editor-meta")).to_contain_text("Editing from version 3")
    expect(page.locator("#id_base")).to_have_value("3")
    expect(panel).to_contain_text("saves what is in the editor as version 4")
    # TOOL.md shows the number the server wrote into it, as after a reload.
    expect(page.locator(".code-editor .cm-content").first).to_contain_text("version: 3")
    page.locator("#run-panel #result").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / f"editor-run-panel-{width}.png"), full_page=True)
    assert axe_violations(page) == []

    # What was typed is saved: leaving asks nothing (a confirm would be dismissed here and
    # keep the page).
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message) or dialog.dismiss())
    page.locator("#editor-actions").get_by_role("link", name="Versions").click()
    expect(page).to_have_url(re.compile(r"/tools/greeter/versions/$"))
    assert dialogs == []
    page.go_back()
    expect(page.locator("html[data-code-editor=ready]")).to_have_count(1)
    expect(page.locator("#editor-meta")).to_contain_text("Editing from version 3")

    # A long run of a new edit, cancelled from the panel.
    replace_code(page, "second edit")
    page.fill("#id_run-steps", "500")
    page.fill("#id_run-delay_ms", "200")
    page.click("#save-and-run")
    expect(page.locator("#run-updates li").first).to_contain_text(
        "second edit step 1", timeout=30_000
    )
    page.click("#cancel-run")
    expect(page.locator("#run-status")).to_have_text("Cancelled", timeout=15_000)
    page.locator("#run-panel #result").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / f"editor-run-panel-cancelled-{width}.png"), full_page=True)
    cancelled = Run.objects.order_by("-created_at").first()
    assert cancelled.version.number == 4

    # Ctrl+S still saves, on top of the version the panel saved (no conflict).
    replace_code(page, "third edit")
    page.keyboard.press("Control+s")
    expect(page.locator(".messages")).to_contain_text("Saved version 5.")
    assert tool.versions.get(number=5).file_bytes()["index.ts"] == source("third edit").encode()
    assert Tool.objects.get(name="greeter").published_version.number == 1


@pytest.mark.parametrize("dev_page", [1280], indirect=True, ids=["1280"])
def test_the_panel_says_why_it_did_not_run(dev_page, tool, worker):
    """A missing input: the panel says so and nothing is saved or run; the page stays."""
    from playwright.sync_api import expect

    page = dev_page
    page.goto("/tools/greeter/edit/")
    expect(page.locator("html[data-code-editor=ready]")).to_have_count(1)
    replace_code(page, "edited draft")
    page.click("#save-and-run")

    expect(page.locator("#run-panel-message")).to_contain_text("Not saved and not run")
    expect(page.locator("#run-panel")).to_contain_text("This field is required.")
    expect(page.locator("#request-error")).to_be_hidden()
    assert not Run.objects.exists() and tool.versions.count() == 2
    page.screenshot(path=str(ARTIFACTS / "editor-run-panel-refused-1280.png"), full_page=True)
