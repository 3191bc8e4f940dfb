"""The run page's progress bar in a real browser (Debian's Chromium through Playwright)
against a live server and a real Celery worker: the count_progress test tool sends
progress 1..N of total N, and the bar near the status follows it live to 100%, at desktop
and phone widths. Screenshots go to test-artifacts/."""

from __future__ import annotations

import re

import pytest

from tests.support.browser import ARTIFACTS, axe_violations, browser_context, chromium
from tests.support.progress import add_count_progress
from tools_app.models import Run
from tools_app.models.runs import RunStatus

pytestmark = [pytest.mark.browser, pytest.mark.worker]

STEPS = 6


def test_the_bar_follows_the_tool_to_100_percent(worker, live_server, developer) -> None:
    from playwright.sync_api import expect

    add_count_progress()
    with chromium() as browser:
        for width in (1280, 390):
            viewport = {"width": width, "height": 900}
            with browser_context(
                live_server, user=developer, viewport=viewport, browser=browser
            ) as context:
                page = context.new_page()
                page.goto("/tools/count_progress/run/")
                page.fill("input[name=steps]", str(STEPS))
                page.fill("input[name=delay_ms]", "400")
                page.click("#run-form button[type=submit]")
                expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))

                # The bar comes while the run is still going (the poll brings it), with
                # its label for assistive technology.
                bar = page.get_by_role("progressbar", name="Progress")
                running = page.locator("body:not(:has(#result)) #run-progress")
                expect(running).to_be_attached(timeout=30_000)
                page.screenshot(path=str(ARTIFACTS / f"run-progress-running-{width}.png"))

                expect(page.locator("#run-status")).to_have_text("Succeeded", timeout=30_000)
                expect(page.locator("#run-progress-text")).to_have_text(
                    f"100% ({STEPS} of {STEPS})"
                )
                expect(bar).to_have_attribute("value", f"{STEPS}.0")
                expect(bar).to_have_attribute("max", f"{STEPS}.0")
                expect(bar).to_be_visible()
                # Near the status, at the top: above the inputs and the update list.
                status_box = page.locator("#run-status").bounding_box()
                bar_box = bar.bounding_box()
                inputs_box = page.locator("#inputs").bounding_box()
                assert status_box["y"] <= bar_box["y"] < inputs_box["y"]
                # At 390 px the line fits: nothing scrolls sideways.
                assert page.evaluate("document.documentElement.scrollWidth") <= width
                assert axe_violations(page) == []
                page.screenshot(path=str(ARTIFACTS / f"run-progress-{width}.png"), full_page=True)
                run_id = page.url.rstrip("/").rsplit("/", 1)[-1]
                finished = Run.objects.get(pk=run_id)
                assert finished.status == RunStatus.SUCCEEDED
                assert (finished.progress, finished.progress_total) == (STEPS, STEPS)
