"""The analytics pages in Chromium at 1280 and 390 px, over a week of runs of two versions:
nothing sticks out sideways, the charts fill their box and keep their text alternatives,
and axe finds no serious or critical violation. Screenshots go to
test-artifacts/analytics-<page>-<width>.png."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from tests.support import tool_files
from tests.support.analytics import add_runs
from tests.support.browser import ARTIFACTS, axe_violations, browser_context, chromium
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.models import Tool
from tools_app.models.runs import RunStatus

pytestmark = pytest.mark.browser

WIDTHS = {1280: {"width": 1280, "height": 1000}, 390: {"width": 390, "height": 844}}
PAGES = {
    "tool": "/tools/busy/analytics/",
    "tool-version": "/tools/busy/analytics/?window=30d&version=1&compare=2",
    "console": "/analytics/",
}


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium() as browser:
        yield browser


def week_of_runs() -> None:
    """Two versions of "busy" with runs of every outcome every few hours, and a second
    tool with a long name, slow and failing, for the console's lists."""
    save_version("busy", tool_files("busy"), actor=Actor.system(), publish=True)
    save_version("busy", tool_files("busy", body="# v2\n"), actor=Actor.system(), publish=True)
    busy = Tool.objects.get(name="busy")
    one, two = busy.versions.get(number=1), busy.versions.get(number=2)
    for hour in range(0, 24 * 7, 5):
        version = two if hour < 48 else one
        age = timedelta(hours=hour, minutes=10)
        add_runs(version, durations=[0.2 + (hour % 7) * 0.3, 1.5, 0.4], age=age)
        if hour % 3 == 0:
            add_runs(version, 1, status=RunStatus.FAILED, durations=[4.0], age=age)
    name = "a_tool_with_a_rather_long_name_that_must_wrap_somewhere"
    save_version(name, tool_files(name), actor=Actor.system(), publish=True)
    slow = Tool.objects.get(name=name).versions.get()
    add_runs(slow, durations=[120.0, 240.0])
    add_runs(slow, 1, status=RunStatus.TIMED_OUT, durations=[300.0])


def overflow(page) -> list[str]:
    return page.evaluate(
        """() => [...document.querySelectorAll("body *")]
              .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 1)
              .filter((el) => !el.parentElement.closest(".scroll-x"))
              .slice(0, 5).map((el) => el.tagName.toLowerCase() + "." + el.className)"""
    )


def test_it_reads_the_analytics_pages_at_both_widths(
    live_server, viewer, transactional_db, browser
):
    from playwright.sync_api import expect

    week_of_runs()
    problems: dict[str, object] = {}
    for width, viewport in WIDTHS.items():
        with browser_context(live_server, user=viewer, viewport=viewport, browser=browser) as c:
            page = c.new_page()
            for name, path in PAGES.items():
                key = f"{name}-{width}"
                response = page.goto(path)
                assert response is not None and response.status == 200, key
                page.screenshot(path=str(ARTIFACTS / f"analytics-{key}.png"), full_page=True)
                if page.evaluate("document.documentElement.scrollWidth") > width:
                    problems[f"{key} too wide"] = overflow(page)
                if found := axe_violations(page):
                    problems[f"{key} axe"] = found
                if name.startswith("tool"):
                    for chart in page.locator("svg.chart-plot").all():
                        box = chart.bounding_box()
                        # Fills most of its card at either width, never past the screen.
                        assert box["width"] > width * 0.25 and box["x"] + box["width"] <= width
                        expect(chart.locator("title")).not_to_be_empty()
                        expect(chart.locator("desc")).not_to_be_empty()
                    # Version 1 ran over 115 hours, so on at least 5 days (the 30-day
                    # chart's steps) whatever the time of day: a count of every bar,
                    # error bars included, varied with the hour the test ran.
                    bars = page.locator("svg.chart-plot rect.bar:not(.error)").count()
                    assert bars >= 5, (key, bars)
    assert problems == {}, problems
