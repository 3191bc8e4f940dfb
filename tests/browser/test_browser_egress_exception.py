"""An egress exception added on the System page, in Chromium at 1280 and 390 px: a stand-in
SearXNG on 127.0.0.1 that the egress policy refuses, whose refusal names the System page;
an admin allows it there, the integration form's Test connection now reaches it, removing
the exception refuses it again, and the audit log has both changes. Screenshots go to
test-artifacts/."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.support import integrations as support
from tests.support.browser import ARTIFACTS, browser_context, chromium
from tools_app.models import AuditEvent, EgressException

pytestmark = pytest.mark.browser

fake_provider = support.fake_provider
VIEWPORTS = {"1280": {"width": 1280, "height": 900}, "390": {"width": 390, "height": 844}}


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium() as browser:
        yield browser


def press_test_connection(page, url: str):
    """Fill in a new SearXNG integration and press Test connection; returns the result."""
    from playwright.sync_api import expect

    page.goto("/integrations/new/searxng/")
    page.fill("[name=slug]", "search")
    page.fill("[name=field_url]", url)
    result = page.locator("#test-result")
    with page.expect_response(lambda response: "/test/" in response.url):
        page.get_by_role("button", name="Test connection").click()
    expect(result.locator("p")).to_be_visible()
    return result


def fits(page, width: int) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= width


@pytest.mark.parametrize("size", VIEWPORTS)
def test_an_admin_allows_a_local_provider_from_the_system_page_and_removes_it(
    live_server, console_admin, fake_provider, transactional_db, settings, browser, size
):
    from playwright.sync_api import expect

    settings.TOOL_NETWORK_ALLOW = ""  # nothing allowed but what the System page adds
    port = fake_provider.url.rsplit(":", 1)[1]
    entry = f"127.0.0.1:{port}"
    viewport = VIEWPORTS[size]
    with browser_context(
        live_server, user=console_admin, viewport=viewport, browser=browser
    ) as context:
        page = context.new_page()

        # Refused, and the refusal says where to allow it.
        result = press_test_connection(page, fake_provider.url)
        expect(result.locator("p.error")).to_contain_text(
            f"{entry} is refused by the egress policy"
        )
        expect(result.locator("p.error")).to_contain_text("Network egress on the System page")
        fits(page, viewport["width"])
        page.screenshot(path=str(ARTIFACTS / f"egress-refused-{size}.png"), full_page=True)
        assert fake_provider.seen == []

        # The System page: add the exception.
        page.goto("/system/#egress")
        expect(page.get_by_role("heading", name="Network egress")).to_be_visible()
        expect(page.get_by_text("No exceptions added here.")).to_be_visible()
        page.fill("#egress-form [name=entry]", entry)
        page.fill("#egress-form [name=note]", "stand-in SearXNG")
        page.get_by_role("button", name="Allow this destination").click()
        page.wait_for_url(re.compile(r"/system/#egress$"))
        expect(page.get_by_text(f"Tools may now reach {entry}.")).to_be_visible()
        table = page.locator("table.egress")
        expect(table.locator("tbody tr")).to_have_count(1)
        expect(table.locator("tbody tr code")).to_have_text(entry)
        expect(table.locator("tbody tr")).to_contain_text("stand-in SearXNG")
        expect(page.locator("pre.policy")).to_contain_text(f"{entry} (the System page)")
        fits(page, viewport["width"])
        page.screenshot(path=str(ARTIFACTS / f"egress-allowed-{size}.png"), full_page=True)

        # The same connection test now reaches the provider.
        result = press_test_connection(page, fake_provider.url)
        expect(result.locator("p.success")).to_contain_text("Connection works: HTTP 200 OK")
        assert [seen.path for seen in fake_provider.seen] == ["/search?q=test&format=json"]
        page.screenshot(path=str(ARTIFACTS / f"egress-test-works-{size}.png"), full_page=True)

        # Removed: refused again, and nothing more reaches the provider.
        page.goto("/system/#egress")
        page.get_by_role("button", name=f"Remove {entry}").click()
        page.wait_for_url(re.compile(r"/system/#egress$"))
        expect(page.get_by_text(f"{entry} is refused again from the next run on.")).to_be_visible()
        expect(page.get_by_text("No exceptions added here.")).to_be_visible()
        assert not EgressException.objects.exists()
        result = press_test_connection(page, fake_provider.url)
        expect(result.locator("p.error")).to_contain_text(
            f"{entry} is refused by the egress policy"
        )
        assert len(fake_provider.seen) == 1

        # Each change is audited, with who made it, and shows on the audit page.
        changes = AuditEvent.objects.filter(action__startswith="egress.").order_by("created_at")
        assert [(e.action, e.actor, e.data["entry"]) for e in changes] == [
            ("egress.allow", console_admin.username, entry),
            ("egress.remove", console_admin.username, entry),
        ]
        tests = AuditEvent.objects.filter(action="integration.test").order_by("created_at")
        assert [e.data["ok"] for e in tests] == [False, True, False]
        page.goto("/audit/?action=egress.allow")
        rows = page.locator("table.audit tbody tr")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text(entry)
        page.goto("/audit/?action=egress.remove")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text(entry)
