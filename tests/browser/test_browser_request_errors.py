"""A request the console does not answer is visible (static/js/request-errors.js): the
report behind issue 10 had a Cancel button that "failed silently" while the console was
down. In a real browser, the Cancel request of a queued run is cut off once, then sent
again and works, with no worker anywhere."""

from __future__ import annotations

import pytest

from tests.support.browser import ARTIFACTS, browser_context
from tools_app.audit import Actor
from tools_app.models import Run
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import start

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_cancel_that_gets_no_answer_says_so_and_works_when_sent_again(
    live_server, make_tool, developer
):
    from playwright.sync_api import expect

    tool = make_tool("quick", language="python")
    # Started by the developer: the cancel button is shown to a run's starter (or an admin).
    run = start.start_run(
        tool.published_version, {}, actor=Actor(user=developer), via=RunVia.BROWSER, enqueue=False
    )
    with browser_context(live_server, user=developer) as context:
        page = context.new_page()
        page.goto(f"/runs/{run.pk}/")
        expect(page.locator("#worker-wait")).to_contain_text("waiting for a worker")
        error = page.locator("#request-error")
        expect(error).to_be_hidden()

        # The console is "down" for the cancel request: the browser gets no answer.
        page.route("**/cancel/", lambda route: route.abort("connectionrefused"))
        page.click("#cancel-run")
        expect(error).to_be_visible()
        expect(error).to_contain_text("did not answer")
        page.screenshot(path=str(ARTIFACTS / "request-error.png"), full_page=True)
        assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED

        page.unroute("**/cancel/")
        page.click("#cancel-run")
        expect(page.locator("#run-status")).to_have_text("Cancelled")
        expect(error).to_be_hidden()

    assert Run.objects.get(pk=run.pk).status == RunStatus.CANCELLED
