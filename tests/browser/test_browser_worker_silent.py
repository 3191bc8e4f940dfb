"""A running run whose worker goes silent, in Chromium against the real Celery worker: the
worker's processes are stopped (SIGSTOP), so neither the run's heartbeat
(Run.heartbeat_at, written by the task every RUN_HEARTBEAT_SECONDS) nor the worker's
(tools_app/ops/heartbeat.py) moves, and within seconds the run page, still polling, says
"Its worker has not reported"; once the worker goes on (SIGCONT) the notice goes and
Cancel works. Status and Cancel stay at the top of the page at 1280 and 390 px while the
progress list grows. Screenshots go to test-artifacts/."""

from __future__ import annotations

import contextlib
import os
import re
import signal
from collections.abc import Iterator

import pytest

from tests.support.browser import ARTIFACTS, browser_context
from tests.support.worker import wait_for_run
from tools_app.models import Run
from tools_app.models.runs import RunStatus

pytestmark = [pytest.mark.browser, pytest.mark.worker]

VIEWPORTS = {"1280": {"width": 1280, "height": 900}, "390": {"width": 390, "height": 844}}

# Counts until cancelled (or for five minutes), one update every 300 ms.
TICKER_TS = """
export async function execute(toolCallId: string, params: any, signal: AbortSignal,
                              onUpdate: (u: any) => void) {
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  for (let i = 1; i <= 1000; i++) {
    if (signal.aborted) return { content: [{ type: "text", text: `stopped at ${i}` }] };
    onUpdate({ content: [{ type: "text", text: `tick ${i}` }] });
    await sleep(300);
  }
  return { content: [{ type: "text", text: "done" }] };
}
"""


@contextlib.contextmanager
def stopped(worker) -> Iterator[None]:
    """The whole worker (main process, pool, what shares its process group) stopped, as a
    hung or swapped-out host would leave it; always continued afterwards, so the session's
    worker serves the next test."""
    os.killpg(worker.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(worker.proc.pid, signal.SIGCONT)


def on_top(page, selector: str) -> None:
    """Wholly on screen with the page at its top, no scrolling. Retried: every poll swaps
    #run-live (Status and Cancel with it) for a new copy."""
    from playwright.sync_api import expect

    assert page.evaluate("window.scrollY") == 0
    expect(page.locator(selector)).to_be_in_viewport(ratio=1)


@pytest.mark.parametrize("size", VIEWPORTS)
def test_the_run_page_says_when_its_worker_stops_reporting(
    worker, live_server, developer, make_tool, settings, size
):
    from playwright.sync_api import expect

    # The page must still show the run as running, not reap it as lost, while the notice
    # is up (the worker's heartbeat interval stays its default, as the worker's does).
    settings.RUN_LOST_AFTER_SECONDS = 600
    beat = float(settings.RUN_HEARTBEAT_SECONDS)
    make_tool("ticker", source=TICKER_TS, extra={"label": "Ticker"})
    viewport = VIEWPORTS[size]
    with browser_context(
        live_server, user=developer, viewport=viewport, timeout_ms=30_000
    ) as context:
        page = context.new_page()
        page.goto("/tools/ticker/run/")
        page.click("#run-form button[type=submit]")
        expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))
        run_id = page.url.rstrip("/").rsplit("/", 1)[-1]
        expect(page.locator("#run-status")).to_have_text("Running", timeout=60_000)
        expect(page.locator("#run-updates li").nth(2)).to_be_attached()
        expect(page.locator("#worker-silent")).to_have_count(0)
        on_top(page, "#run-status")
        on_top(page, "#cancel-run")

        with stopped(worker):
            frozen = Run.objects.get(pk=run_id).heartbeat_at
            # The notice comes once two beats are missed: within seconds, on the open page.
            notice = page.locator("#worker-silent")
            expect(notice).to_be_visible(timeout=int((4 * beat + 20) * 1000))
            expect(notice).to_contain_text(re.compile(r"Its worker has not reported for \d+ s"))
            expect(notice).to_contain_text("marked lost after 600 s")
            run = Run.objects.get(pk=run_id)
            assert run.status == RunStatus.RUNNING and run.heartbeat_at == frozen
            # Status and Cancel are still at the top, above the notice and the progress.
            expect(page.locator("#run-status")).to_have_text("Running")
            on_top(page, "#run-status")
            on_top(page, "#cancel-run")
            # One look at both, so no swap comes in between.
            above = page.evaluate(
                "document.querySelector('#run-status').getBoundingClientRect().bottom"
                " <= document.querySelector('#run-updates').getBoundingClientRect().top"
            )
            assert above
            page.screenshot(path=str(ARTIFACTS / f"run-worker-silent-{size}.png"), full_page=True)

        # The worker goes on: its next beat takes the notice away, and Cancel works.
        expect(page.locator("#worker-silent")).to_have_count(0, timeout=int((2 * beat + 20) * 1000))
        assert Run.objects.get(pk=run_id).heartbeat_at > frozen
        page.locator("#cancel-run").click()
        expect(page.locator("#run-status")).to_have_text("Cancelled", timeout=30_000)
        wait_for_run(run_id, (RunStatus.CANCELLED,), timeout=30, worker=worker)
