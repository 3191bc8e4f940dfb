"""The home page at /: what the console is, first steps that tick themselves off from what
exists, system status from the health checks, recent runs and recent changes."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from tests.support import tool_files
from tools_app.audit import Actor, record
from tools_app.catalog.versions import save_version
from tools_app.models import AgentToken, Integration, Run, WorkerHeartbeat
from tools_app.models.runs import RunVia
from tools_app.ops import health


def steps(page: str) -> dict[str, str]:
    """Each first step's key and state (done / open), as rendered."""
    return dict(re.findall(r'<li id="step-([a-z]+)" class="(done|open)">', page))


def make_run(tool, *, user=None, token=None, via=RunVia.BROWSER) -> Run:
    return Run.objects.create(
        tool=tool, version=tool.versions.latest("number"), via=via, user=user, token=token
    )


def test_it_is_a_page_not_a_redirect(viewer_client):
    response = viewer_client.get("/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "write, test and publish the tools that AI agents run" in page


def test_the_brand_links_home(viewer_client):
    page = viewer_client.get("/tools/").content.decode()
    assert '<a class="brand" href="/">Tool Console</a>' in page


def test_it_sends_anonymous_people_to_log_in(client):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_people_without_a_role_learn_why_they_see_nothing(client, nobody, make_tool):
    make_tool("alpha")
    client.force_login(nobody)

    page = client.get("/").content.decode()

    assert "Your account has no role yet" in page
    assert "alpha" not in page and 'id="first-steps"' not in page


def test_the_first_steps_tick_themselves_off_for_an_admin(
    console_admin_client, console_admin, make_tool, db
):
    assert steps(console_admin_client.get("/").content.decode()) == {
        "integration": "open",
        "run": "open",
        "token": "open",
        "agent": "open",
    }
    tool = make_tool("alpha")

    Integration.objects.create(slug="searxng", type_slug="searxng", enabled=False)
    assert steps(console_admin_client.get("/").content.decode())["integration"] == "open"
    Integration.objects.filter(slug="searxng").update(enabled=True)

    make_run(tool, user=console_admin)
    token, _ = AgentToken.issue("agent", ["registry:read"], created_by=console_admin)
    page = console_admin_client.get("/").content.decode()
    assert steps(page) == {"integration": "done", "run": "done", "token": "done", "agent": "open"}
    assert "(3 of 4 done)" in page

    AgentToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    page = console_admin_client.get("/").content.decode()
    assert steps(page)["agent"] == "done"
    assert 'href="/integrations/new/"' not in page  # done steps offer no action


@pytest.mark.parametrize("via", [RunVia.API, RunVia.MCP])
def test_a_run_through_the_api_or_mcp_connects_an_agent(console_admin_client, make_tool, via):
    make_run(make_tool("alpha"), via=via)
    assert steps(console_admin_client.get("/").content.decode())["agent"] == "done"


def test_a_browser_run_does_not_connect_an_agent(console_admin_client, console_admin, make_tool):
    make_run(make_tool("alpha"), user=console_admin)
    assert steps(console_admin_client.get("/").content.decode())["agent"] == "open"


def test_trying_a_tool_counts_only_your_own_runs(developer_client, console_admin, make_tool):
    tool = make_tool("alpha")
    make_run(tool, user=console_admin)

    page = developer_client.get("/").content.decode()

    # Developers neither configure integrations nor create tokens: only their step.
    assert steps(page) == {"run": "open"}
    assert 'href="/tools/">Pick a tool and run it</a>' in page


def test_viewers_get_no_steps_they_cannot_take(viewer_client):
    page = viewer_client.get("/").content.decode()

    assert steps(page) == {}
    assert "As a viewer you can browse" in page


def test_the_system_status_comes_from_the_health_checks(viewer_client, db):
    page = viewer_client.get("/").content.decode()
    status = re.search(r'<section id="system-status".*?</section>', page, re.S).group(0)

    assert '<span class="badge danger">problem</span>' in status
    assert health.no_worker_text(None) in status
    assert health.isolation().detail in status
    assert "development key" in status  # the test settings use the generated key

    now = timezone.now()
    WorkerHeartbeat.objects.create(name="w1", pid=1, started_at=now, seen_at=now)
    page = viewer_client.get("/").content.decode()
    assert '<span class="badge ok">ok</span> 1 worker alive.' in page


def test_it_shows_the_five_latest_runs_and_changes(viewer_client, developer, make_tool):
    tool = make_tool("alpha")
    for n in range(2, 8):
        save_version(
            "alpha", tool_files("alpha", description=f"D{n}."), actor=Actor(user=developer),
            note=f"change {n}",
        )  # fmt: skip
    runs = [make_run(tool, user=developer) for _ in range(7)]

    page = viewer_client.get("/").content.decode()

    recent = re.search(r'<section id="recent-runs".*?</section>', page, re.S).group(0)
    shown = re.findall(r'href="/runs/([0-9a-f-]+)/"', recent)
    assert len(shown) == 5
    assert set(shown) <= {str(run.pk) for run in runs}
    changes = re.search(r'<section id="recent-changes".*?</section>', page, re.S).group(0)
    assert re.findall(r"change (\d)", changes) == ["7", "6", "5", "4", "3"]
    assert 'href="/tools/alpha/?version=7"' in changes
    assert "Audit log" not in changes  # admins only


def test_admins_also_see_the_latest_audit_events(console_admin_client, console_admin):
    for n in range(7):
        record(Actor(user=console_admin), "token.create", None, f"event {n}")

    page = console_admin_client.get("/").content.decode()

    assert re.findall(r"event (\d)", page) == ["6", "5", "4", "3", "2"]


def test_it_does_not_grow_in_queries_with_more_data(
    console_admin_client, console_admin, make_tool, django_assert_max_num_queries
):
    tool = make_tool("alpha")
    for n in range(10):
        make_run(tool, user=console_admin)
        record(Actor(user=console_admin), "token.create", None, f"event {n}")
    AgentToken.issue("agent", ["registry:read"])

    # Session, user and role; five for the four steps; two for the workers; runs, versions
    # and events; the key banner and the nav's dot: the same whatever the amount of data.
    # 17: the vault's health also counts sensitive presets and OAuth tokens (one query each).
    # 20: the banner's signature check (the published tools' row hashes, keys.json, the
    # versions to verify: catalog/integrity.py), however many tools there are.
    with django_assert_max_num_queries(20):
        assert console_admin_client.get("/").status_code == 200
