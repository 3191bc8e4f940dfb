"""Golden runs in a real browser against a live server and a real Celery worker: run a
tool, save the run as a case, run all cases of the new draft, and watch the check pass
(the check page polls with htmx until it is done)."""

from __future__ import annotations

import re

import pytest

from tests.support.browser import ARTIFACTS, browser_context
from tests.support.case_pages import greet_tool
from tools_app.models import CaseCheck, Tool
from tools_app.models.cases import CheckStatus

pytestmark = [pytest.mark.browser, pytest.mark.worker]


def test_it_saves_a_run_as_a_case_and_replays_it_green(worker, developer, live_server):
    from playwright.sync_api import expect

    greet_tool(cases=None)
    with browser_context(
        live_server, user=developer, viewport={"width": 1200, "height": 1000}, timeout_ms=30_000
    ) as context:
        page = context.new_page()
        page.goto("/tools/greet/run/")
        page.fill("input[name=who]", "Ann")
        page.click("#run-form button[type=submit]")
        expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))
        expect(page.locator("#run-status")).to_have_text("Succeeded", timeout=30_000)

        page.click("#save-case")
        expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}/case/$"))
        page.fill("input[name=name]", "greets_ann")
        page.fill("input[name=description]", "Ann is greeted")
        page.screenshot(path=str(ARTIFACTS / "case-save.png"), full_page=True)
        page.click("#save-case-button")

        expect(page).to_have_url(re.compile(r"/tools/greet/versions/2/cases/$"))
        expect(page.locator("#case-greets_ann")).to_contain_text("hello Ann")
        page.click("#run-all-cases")

        expect(page).to_have_url(re.compile(r"/checks/[0-9a-f-]{36}/$"))
        expect(page.locator("#check-status")).to_have_text("Passed", timeout=60_000)
        expect(page.locator("#case-0 .badge").first).to_have_text("Passed")
        page.screenshot(path=str(ARTIFACTS / "case-check-passed.png"), full_page=True)

    check = CaseCheck.objects.get()
    assert check.status == CheckStatus.PASSED and check.user == developer
    assert Tool.objects.get(name="greet").latest_number == 2
