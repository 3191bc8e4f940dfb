"""/audit/: admins and auditors read the log, filter it by who, action, target and date,
see each target by name with a link, and download what they filtered as CSV."""

from __future__ import annotations

import csv
import io
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from tools_app.audit import Actor, record
from tools_app.models import AuditEvent, Tool
from tools_app.models.runs import RunVia
from tools_app.roles import AUDITOR, ensure_groups
from tools_app.runs import start


@pytest.fixture
def auditor_client(db) -> Client:
    ensure_groups()
    user = User.objects.create_user("audrey")
    user.groups.add(Group.objects.get(name=AUDITOR))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def events(make_tool, console_admin):
    """A tool (make_tool audits its creation), a run of it, and events by two actors."""
    tool = make_tool("alpha")
    run = start.start_run(
        tool.published_version, {}, actor=Actor(user=console_admin), via=RunVia.BROWSER,
        enqueue=False,
    )  # fmt: skip
    record(Actor(user=console_admin), "run.cancel", run, "cancelled by hand")
    record(Actor.system(), "tools.sync", summary='=HYPERLINK("http://x")')
    record(Actor.system(), "token.revoke", summary="a token")
    return {"tool": tool, "run": run}


def rows(response) -> list[AuditEvent]:
    return list(response.context["page"].object_list)


def test_it_shows_the_log_to_an_admin_and_an_auditor(console_admin_client, auditor_client, events):
    for client in (console_admin_client, auditor_client):
        page = client.get("/audit/")
        assert page.status_code == 200
        assert {e.action for e in rows(page)} >= {"run.cancel", "tools.sync", "token.revoke"}
        assert b"Times are in UTC" in page.content


def test_it_refuses_viewers_developers_and_strangers(viewer_client, developer_client, events):
    assert viewer_client.get("/audit/").status_code == 403
    assert developer_client.get("/audit/").status_code == 403
    anonymous = Client().get("/audit/")
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]


def test_it_filters_by_actor_action_and_target(console_admin_client, events):
    by_actor = rows(console_admin_client.get("/audit/", {"actor": "ad"}))
    assert by_actor and all(e.actor == "ada" for e in by_actor)
    by_action = rows(console_admin_client.get("/audit/", {"action": "tools.sync"}))
    assert [e.action for e in by_action] == ["tools.sync"]
    by_type = rows(console_admin_client.get("/audit/", {"target": "run"}))
    assert sorted(e.action for e in by_type) == ["run.cancel", "run.start"]
    by_name = rows(console_admin_client.get("/audit/", {"target": "alpha"}))
    assert by_name and all("alpha" in e.target or e.target_type == "run" for e in by_name)


def test_it_finds_a_tools_runs_and_versions_by_the_name_shown(
    console_admin_client, events, make_tool
):
    """A run is shown as "Run of alpha · 1a2b3c4d" and a version as "alpha v1", though
    the stored target is the model's str() ("8 1a2b…", "8@1"): the tool's name finds them."""
    alphabet = make_tool("alphabet")  # one more tool whose name holds "alpha"
    beta = make_tool("beta")
    record(Actor.system(), "admin.change", alphabet.published_version, "changed its note")
    record(Actor.system(), "admin.change", beta.published_version, "changed its note")
    found = rows(console_admin_client.get("/audit/", {"target": "alpha"}))
    assert {(e.action, e.target_type) for e in found} >= {
        ("run.start", "run"),
        ("run.cancel", "run"),
        ("tool.publish", "tool"),
    }
    assert {e.target_id for e in found if e.target_type == "run"} == {str(events["run"].pk)}
    assert [e.label for e in found if e.target_type == "toolversion"] == ["alphabet v1"]
    assert not [e for e in found if "beta" in e.label]
    assert rows(console_admin_client.get("/audit/", {"target": "gamma"})) == []


def test_it_filters_by_date_in_the_console_time_zone(console_admin_client, events):
    today = timezone.localdate()
    kept = rows(console_admin_client.get("/audit/", {"since": today, "until": today}))
    assert len(kept) == AuditEvent.objects.count()
    tomorrow = today + timedelta(days=1)
    assert rows(console_admin_client.get("/audit/", {"since": tomorrow})) == []
    assert rows(console_admin_client.get("/audit/", {"until": today - timedelta(days=1)})) == []


def test_it_says_what_is_wrong_with_a_bad_filter(console_admin_client, events):
    bad_date = console_admin_client.get("/audit/", {"since": "yesterday-ish"})
    assert bad_date.status_code == 400 and b"Enter a valid date." in bad_date.content
    backwards = console_admin_client.get("/audit/", {"since": "2026-02-02", "until": "2026-02-01"})
    assert backwards.status_code == 400
    assert b"The end date is before the start date." in backwards.content
    too_long = console_admin_client.get("/audit/", {"target": "x" * 5000})
    assert too_long.status_code == 400


def test_it_names_and_links_targets_not_internal_ids(console_admin_client, events):
    run = events["run"]
    page = console_admin_client.get("/audit/", {"action": "run.cancel"})
    html = page.content.decode()
    assert f'<a href="/runs/{run.pk}/">Run of alpha · {str(run.pk)[:8]}</a>' in html
    assert f"{run.tool_id} {run.pk}" not in html  # the model's str(): "8 c1ea…"
    tool_page = console_admin_client.get("/audit/", {"target": "alpha", "action": "tool.create"})
    if rows(tool_page):
        assert b'<a href="/tools/alpha/">alpha</a>' in tool_page.content


def test_it_keeps_the_name_of_a_target_that_is_gone(console_admin_client, events):
    record(Actor.system(), "run.cancel", events["run"], "again")
    AuditEvent.objects.create(
        actor_kind="system", actor="system", action="run.cancel", target_type="run",
        target_id=str(uuid.uuid4()), target="9 gone",
    )  # fmt: skip
    page = console_admin_client.get("/audit/", {"action": "run.cancel"})
    assert page.status_code == 200 and b"Run \xc2\xb7 " in page.content


def test_it_looks_targets_up_once_per_model(
    console_admin_client, events, django_assert_max_num_queries
):
    for number in range(30):
        record(Actor.system(), "tool.enable", events["tool"], f"event {number}")
        record(Actor.system(), "run.cancel", events["run"], f"event {number}")
    # Session, user, groups, actions, count, page, the nav's checks, and one query per
    # target model (each in a savepoint), the key banner's count of OAuth tokens, and the
    # banner's signature check of the published tools (their rows' hashes, keys.json, the
    # versions to verify; catalog/integrity.py): 60 events with targets cost what 2 would.
    with django_assert_max_num_queries(19):
        page = console_admin_client.get("/audit/")
    assert page.status_code == 200 and len(rows(page)) == 25


def test_it_exports_what_the_filters_keep_as_csv(console_admin_client, events):
    response = console_admin_client.get("/audit/", {"format": "csv", "action": "tools.sync"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="audit-')
    table = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert table[0][:4] == ["time", "actor", "actor_kind", "action"]
    assert [row[3] for row in table[1:]] == ["tools.sync"]
    # A cell a spreadsheet would run as a formula is written as text.
    assert table[1][7] == '\'=HYPERLINK("http://x")'


def test_the_csv_link_keeps_the_filters(console_admin_client, events):
    page = console_admin_client.get("/audit/", {"actor": "ada"})
    assert b'href="/audit/?actor=ada&amp;format=csv"' in page.content


def test_the_nav_shows_audit_to_those_who_may_read_it(
    console_admin_client, auditor_client, viewer_client, events
):
    link = b'<a href="/audit/">Audit</a>'
    assert link in console_admin_client.get("/tools/").content
    assert link in auditor_client.get("/tools/").content
    assert link not in viewer_client.get("/tools/").content


def test_every_event_stays_when_a_tool_is_deleted(console_admin_client, events):
    Tool.objects.filter(pk=events["tool"].pk).delete()
    page = console_admin_client.get("/audit/")
    assert page.status_code == 200
