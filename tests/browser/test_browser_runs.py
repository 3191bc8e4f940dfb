"""Test-invoking a tool in a real browser (Debian's Chromium through Playwright) against a
live server and a real Celery worker: the generated form, live progress, the result,
and cancelling a long run. Screenshots go to test-artifacts/."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Group, User

from tests.support.browser import ARTIFACTS, browser_context
from tests.support.worker import wait_for_run
from tools_app.models import Run
from tools_app.models.runs import RunStatus
from tools_app.roles import DEVELOPER, ensure_groups

pytestmark = [pytest.mark.browser, pytest.mark.worker]

PASSWORD = "browser-test-pw-71"

COUNTER_TS = """
export async function execute(toolCallId: string, params: any, signal: AbortSignal,
                              onUpdate: (u: any) => void) {
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  for (let i = 1; i <= params.steps; i++) {
    if (signal.aborted) {
      return { content: [{ type: "text", text: `stopped at step ${i}` }], isError: true };
    }
    onUpdate({ content: [{ type: "text", text: `step ${i} of ${params.steps}` }] });
    await sleep(params.delay_ms);
  }
  const text = `counted for ${params.who} (${params.pace})${params.loud ? "!" : "."}`;
  return { content: [{ type: "text", text }] };
}
"""

INPUTS = {
    "who": {"type": "string", "description": "Whom the count is for."},
    "steps": {"type": "integer", "description": "How many steps.", "optional": True, "default": 3},
    "delay_ms": {"type": "integer", "description": "Pause after each step, in ms.",
                 "optional": True, "default": 800},
    "pace": {"type": "enum", "values": "calm,brisk", "description": "Pace.", "optional": True,
             "default": "calm"},
    "loud": {"type": "boolean", "description": "End with a bang.", "optional": True,
             "default": False},
}  # fmt: skip


@pytest.fixture
def developer_login(settings) -> tuple[str, str]:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    ensure_groups()
    user = User.objects.create_user("devon", "devon@example.com", PASSWORD)
    user.groups.add(Group.objects.get(name=DEVELOPER))
    return "devon", PASSWORD


@pytest.fixture
def browser_page(live_server) -> Iterator:
    with browser_context(
        live_server, viewport={"width": 1200, "height": 1000}, timeout_ms=30_000
    ) as context:
        yield context.new_page()


def test_it_runs_a_tool_live_and_cancels_a_long_run(
    worker, make_tool, developer_login, browser_page
):
    from playwright.sync_api import expect

    make_tool("counter", source=COUNTER_TS, inputs=INPUTS, extra={"label": "Counter"})
    page = browser_page
    username, password = developer_login

    # Log in, open the tool, then its run form.
    page.goto("/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit], input[type=submit]")
    page.goto("/tools/")
    page.click("a[href='/tools/counter/']")
    expect(page).to_have_url(re.compile(r"/tools/counter/$"))
    page.goto("/tools/counter/run/")

    # The generated form: text, numbers with defaults, a select, a checkbox.
    expect(page.locator("input[name=steps]")).to_have_value("3")
    expect(page.locator("select[name=pace]")).to_have_value("calm")
    page.fill("input[name=who]", "Grace")
    page.select_option("select[name=pace]", "brisk")
    page.check("input[name=loud]")
    page.screenshot(path=str(ARTIFACTS / "run-form.png"), full_page=True)
    page.click("#run-form button[type=submit]")

    # Progress arrives live: at least two updates are on the page before the result.
    expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))
    # One selector, so both hold at one moment (wait_for_function would need eval, which
    # the console's Content-Security-Policy refuses).
    expect(page.locator("body:not(:has(#result)) #run-updates li:nth-child(2)")).to_be_attached(
        timeout=30_000
    )
    expect(page.locator("#result")).to_contain_text("counted for Grace (brisk)!", timeout=30_000)
    expect(page.locator("#run-updates li")).to_have_count(3)
    expect(page.locator("#run-status")).to_have_text("Succeeded")
    page.screenshot(path=str(ARTIFACTS / "run-finished.png"), full_page=True)
    finished_id = page.url.rstrip("/").rsplit("/", 1)[-1]
    assert Run.objects.get(pk=finished_id).status == RunStatus.SUCCEEDED

    # A long run, cancelled from its page: the tool stops within seconds.
    page.click("text=Run again with these inputs")
    expect(page.locator("input[name=who]")).to_have_value("Grace")
    page.fill("input[name=steps]", "500")
    page.fill("input[name=delay_ms]", "200")
    page.click("#run-form button[type=submit]")
    expect(page.locator("#run-updates li").first).to_be_visible(timeout=30_000)
    # While it runs, the elapsed time counts up from the server's value.
    expect(page.locator("[data-elapsed-since]")).to_have_text(re.compile(r"running for \d+ s"))
    page.focus("#cancel-run")
    page.keyboard.press("Enter")
    expect(page.locator("#run-status")).to_have_text("Cancelled", timeout=15_000)
    # Focus follows the swap to the run's status, not <body>.
    expect(page.locator("#run-status")).to_be_focused()
    expect(page.locator("#result")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "run-cancelled.png"), full_page=True)

    cancelled_id = page.url.rstrip("/").rsplit("/", 1)[-1]
    run = wait_for_run(cancelled_id, (RunStatus.CANCELLED,), timeout=5, worker=worker)
    assert run.updates.count() < 500 and run.user.username == username
    # The run history lists both.
    page.goto("/runs/?tool=counter")
    expect(page.locator("table.runs tbody tr")).to_have_count(2)
    assert os.path.getsize(ARTIFACTS / "run-form.png") > 0
