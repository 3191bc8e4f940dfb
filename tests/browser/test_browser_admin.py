"""Django admin's audit log in Chromium at 1280 px: every column, Summary and IP included,
fits beside the filters without scrolling sideways; a screenshot goes to test-artifacts/."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from tests.support.browser import ARTIFACTS, browser_context
from tools_app.audit import Actor, record
from tools_app.models import Run

pytestmark = pytest.mark.browser


def test_the_audit_log_fits_1280_px(live_server, transactional_db, make_tool):
    root = User.objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    tool = make_tool("web_fetch_with_a_rather_long_name")
    actor = Actor(user=root, ip="2001:db8:ffff:ffff:ffff:ffff:ffff:ffff")
    for n in range(5):
        run = Run.objects.create(tool=tool, version=tool.published_version, via="api")
        record(actor, "run.cancel", run, f"cancelled a run of {tool.name}")
        record(actor, "admin.change", tool, f"tool {tool.name}: " + "changed label; " * 40 + str(n))

    with browser_context(live_server, user=root, viewport={"width": 1280, "height": 900}) as ctx:
        page = ctx.new_page()
        page.goto("/admin/tools_app/auditevent/")
        page.screenshot(path=str(ARTIFACTS / "admin-audit-1280.png"), full_page=True)

        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        # Admin puts the table in a box that scrolls sideways: the columns must fit it, so
        # the last one (IP) is on screen without scrolling anything.
        fits = page.evaluate(
            "(() => { const box = document.querySelector('#changelist .results');"
            " return [box.scrollWidth, box.clientWidth]; })()"
        )
        assert fits[0] <= fits[1], f"the table is {fits[0]} px wide in a {fits[1]} px box"
        last = page.locator("#result_list thead th").last.bounding_box()
        assert last is not None and last["x"] + last["width"] <= 1280, last
        for column in ("when", "who", "action", "target_link", "short_summary", "ip"):
            box = page.locator(f"th.column-{column}").bounding_box()
            assert box is not None, column
            assert box["x"] >= 0 and box["x"] + box["width"] <= 1280, (column, box)
        ip = page.locator("td.field-ip").first.bounding_box()
        assert ip is not None and ip["x"] + ip["width"] <= 1280
        summary = page.locator("td.field-short_summary span[title]").first
        assert summary.get_attribute("title").endswith("changed label; 4")
        assert page.locator("td.field-target_link a", has_text="Run of web_fetch").count() == 5
