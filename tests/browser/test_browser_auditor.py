"""The auditor's journey in Chromium: a user given the auditor role with `grant_role` logs
in, filters /audit/ by who, action, target and date (at 1280 and 390 px), follows a
target's link, downloads the CSV (its rows are the filtered ones; an integration's canary
secret is nowhere in it), and reads Django admin without a way to change anything.
Screenshots go to test-artifacts/."""

from __future__ import annotations

import csv
import io
import uuid
from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone

from tests.support import integrations as support
from tests.support.browser import ARTIFACTS, browser_context, chromium
from tests.views.test_admin import admin_url, one_of_everything, superuser  # noqa: F401
from tools_app.audit import Actor, record
from tools_app.models import AuditEvent, Tool
from tools_app.models.runs import RunVia
from tools_app.roles import AUDITOR, role_of
from tools_app.runs import start
from tools_app.views.audit import CSV_COLUMNS

pytestmark = pytest.mark.browser

VIEWPORTS = {"1280": {"width": 1280, "height": 900}, "390": {"width": 390, "height": 844}}
PASSWORD = "auditor-browser-pw-83"
CANARY = f"canary-audit-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium() as browser:
        yield browser


@pytest.fixture
def auditor(transactional_db) -> User:
    """An ordinary user made an auditor the documented way: `manage.py grant_role`."""
    User.objects.create_user("audrey", "audrey@example.com", PASSWORD)
    call_command("grant_role", "audrey", AUDITOR, stdout=io.StringIO())
    user = User.objects.get(username="audrey")
    assert role_of(user) == AUDITOR and user.is_staff
    return user


@pytest.fixture
def history(make_tool, transactional_db) -> dict:
    """What an auditor looks into: root creates an integration holding a canary secret
    and cancels a run of alpha; the system syncs."""
    root = User.objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    tool = make_tool("alpha")
    integration = support.create(
        "searxng",
        values={"url": "https://search.example.org"},
        secrets={"token": CANARY},
        user=root,
    )
    run = start.start_run(
        tool.published_version, {}, actor=Actor(user=root), via=RunVia.BROWSER, enqueue=False
    )
    record(Actor(user=root), "run.cancel", run, f"cancelled a run of {tool.name}")
    record(Actor.system(), "tools.sync", summary="alpha: imported")
    return {"root": root, "tool": tool, "integration": integration, "run": run}


def log_in(page, username: str, password: str) -> None:
    page.goto("/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


def query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items() if v[0]}


def shown(page) -> list[tuple[str, str, str]]:
    """(who, action, target) of each row on the page."""
    return [
        tuple(row.locator("td").nth(i).inner_text().strip() for i in (1, 2, 3))
        for row in page.locator("table.audit tbody tr").all()
    ]


def download_csv(page) -> tuple[str, list[list[str]]]:
    with page.expect_download() as info:
        page.locator("#audit-csv").click()
    download = info.value
    text = open(download.path(), encoding="utf-8").read()  # noqa: SIM115
    return download.suggested_filename, list(csv.reader(io.StringIO(text)))


@pytest.mark.parametrize("size", VIEWPORTS)
def test_an_auditor_filters_the_audit_log_follows_a_target_and_downloads_csv(
    live_server, auditor, history, browser, size
):
    from playwright.sync_api import expect

    viewport = VIEWPORTS[size]
    with browser_context(live_server, viewport=viewport, browser=browser) as ctx:
        page = ctx.new_page()
        log_in(page, "audrey", PASSWORD)
        page.goto("/audit/")
        expect(page.get_by_role("heading", name="Audit log")).to_be_visible()
        everything = AuditEvent.objects.count()
        expect(page.locator("table.audit tbody tr")).to_have_count(everything)
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        assert CANARY not in page.content()
        page.screenshot(path=str(ARTIFACTS / f"audit-auditor-{size}.png"), full_page=True)

        # Who: root's events only.
        page.fill("#id_actor", "root")
        page.locator("#id_actor").dispatch_event("change")
        page.wait_for_url(lambda url: query(url).get("actor") == "root")
        expect(page.locator("table.audit tbody tr")).to_have_count(
            AuditEvent.objects.filter(actor="root").count()
        )
        assert {who for who, _, _ in shown(page)} == {"root"}

        # And an action: the integration's creation, its target named and linked.
        page.select_option("#id_action", "integration.create")
        page.wait_for_url(lambda url: query(url).get("action") == "integration.create")
        expect(page.locator("table.audit tbody tr")).to_have_count(1)
        assert shown(page) == [("root", "integration.create", "searxng")]

        # The CSV holds what the filters keep, and never the secret.
        name, table = download_csv(page)
        assert name.startswith("audit-") and name.endswith(".csv")
        assert table[0] == list(CSV_COLUMNS)
        assert [(row[1], row[3], row[6]) for row in table[1:]] == [
            ("root", "integration.create", "searxng")
        ]
        page.screenshot(path=str(ARTIFACTS / f"audit-filtered-{size}.png"), full_page=True)

        link = page.locator("table.audit tbody tr td").nth(3).get_by_role("link", name="searxng")
        expect(link).to_have_attribute("href", "/integrations/searxng/")
        link.click()
        page.wait_for_url("**/integrations/searxng/")
        expect(page.locator("h1")).to_contain_text("searxng")
        assert CANARY not in page.content()
        page.go_back()
        page.wait_for_url(lambda url: query(url).get("action") == "integration.create")

        # Target by name: the tool's events, however the run's is labelled.
        page.goto("/audit/")
        page.fill("#id_target", "alpha")
        page.get_by_role("button", name="Filter").click()
        page.wait_for_url(lambda url: query(url).get("target") == "alpha")
        targets = [target for _, _, target in shown(page)]
        run = history["run"]
        assert f"Run of alpha · {str(run.pk)[:8]}" in targets and "alpha" in targets
        run_link = page.get_by_role("link", name=f"Run of alpha · {str(run.pk)[:8]}").first
        expect(run_link).to_have_attribute("href", f"/runs/{run.pk}/")
        run_link.click()
        page.wait_for_url(f"**/runs/{run.pk}/")
        expect(page.locator("h1")).to_contain_text("Run of")
        page.go_back()
        page.wait_for_url(lambda url: query(url).get("target") == "alpha")

        # Dates: today keeps everything, up to yesterday keeps nothing.
        today = timezone.localdate()
        page.goto("/audit/")
        page.fill("#id_since", today.isoformat())
        page.wait_for_url(lambda url: query(url).get("since") == today.isoformat())
        page.fill("#id_until", today.isoformat())
        page.wait_for_url(lambda url: query(url).get("until") == today.isoformat())
        expect(page.locator("table.audit tbody tr")).to_have_count(everything)
        yesterday = (today - timedelta(days=1)).isoformat()
        page.fill("#id_since", yesterday)
        page.fill("#id_until", yesterday)
        page.wait_for_url(lambda url: query(url).get("until") == yesterday)
        expect(page.locator("#audit-results .empty")).to_contain_text(
            "No events match these filters."
        )
        page.screenshot(path=str(ARTIFACTS / f"audit-empty-{size}.png"), full_page=True)

        # The whole log as CSV: every event, no canary in any cell.
        page.goto("/audit/")
        _, table = download_csv(page)
        assert len(table) == 1 + everything
        assert "integration.create" in {row[3] for row in table[1:]}
        assert not [row for row in table if any(CANARY in cell for cell in row)]
        assert not [row for row in table if any(CANARY[-12:] in cell for cell in row)]


def test_an_auditor_reads_django_admin_and_changes_nothing(
    live_server,
    auditor,
    one_of_everything,  # noqa: F811
    browser,
):
    from playwright.sync_api import expect

    with browser_context(live_server, browser=browser) as ctx:
        page = ctx.new_page()
        log_in(page, "audrey", PASSWORD)
        assert page.goto("/admin/").status == 200
        page.screenshot(path=str(ARTIFACTS / "admin-auditor-1280.png"), full_page=True)
        for model in admin.site._registry:
            name = model.__name__
            changelist = page.goto(admin_url(model, "changelist"))
            assert changelist.status == 200, name
            expect(page.locator("#changelist"), name).to_be_visible()
            expect(page.locator("a.addlink"), name).to_have_count(0)
            # No bulk action deletes (the only default one), if there is an action menu.
            assert "delete_selected" not in page.locator("select[name=action] option").evaluate_all(
                "options => options.map((o) => o.value)"
            ), name
            obj = model._default_manager.first()
            change = page.goto(admin_url(model, "change", obj.pk))
            assert change.status == 200, name
            for button in ("_save", "_continue", "_addanother"):
                expect(page.locator(f"[name={button}]"), name).to_have_count(0)
            expect(page.locator("a.deletelink"), name).to_have_count(0)
            if model is Tool:
                page.screenshot(path=str(ARTIFACTS / "admin-auditor-tool-1280.png"), full_page=True)
        assert page.goto(admin_url(Tool, "add")).status == 403

        # A change posted anyway, with a valid CSRF token, is refused and changes nothing.
        tool = one_of_everything["tool"]
        page.goto(admin_url(Tool, "change", tool.pk))
        token = page.locator("input[name=csrfmiddlewaretoken]").first.input_value()
        answer = ctx.request.post(
            live_server.url + admin_url(Tool, "change", tool.pk),
            form={"csrfmiddlewaretoken": token, "enabled": "", "label": "hijacked", "_save": "1"},
            headers={"Referer": live_server.url + admin_url(Tool, "change", tool.pk)},
        )
        assert answer.status == 403
        # Refused for the role (the console's 403 page), not for the token.
        assert "Your role does not allow this." in answer.text()
        deleted = ctx.request.post(
            live_server.url + admin_url(Tool, "delete", tool.pk),
            form={"csrfmiddlewaretoken": token, "post": "yes"},
            headers={"Referer": live_server.url + admin_url(Tool, "delete", tool.pk)},
        )
        assert deleted.status == 403
        tool.refresh_from_db()
        assert tool.enabled and tool.label != "hijacked"
        me = User.objects.get(username="audrey")
        promoted = ctx.request.post(
            live_server.url + admin_url(User, "change", me.pk),
            form={"csrfmiddlewaretoken": token, "is_superuser": "on", "username": "audrey"},
            headers={"Referer": live_server.url + admin_url(User, "change", me.pk)},
        )
        assert promoted.status == 403
        assert not User.objects.get(pk=me.pk).is_superuser
