"""Who may cancel a run: developers their own runs, admins any run (page), an agent token
the runs it started (API). Someone else's run is left alone, and its page offers no
Cancel button to someone who may not use it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tests.support.agent_api import agent_client
from tests.support.forms import submit
from tools_app.audit import Actor
from tools_app.models import AgentToken, AuditEvent, Run, Tool
from tools_app.models.runs import RunStatus, RunVia
from tools_app.roles import DEVELOPER, ensure_groups
from tools_app.runs import start

pytestmark = pytest.mark.django_db


@pytest.fixture
def tool(make_tool) -> Tool:
    return make_tool("slow", language="python")


@pytest.fixture
def other_developer(db) -> User:
    ensure_groups()
    user = User.objects.create_user("bea", "bea@example.com", "pw-for-tests-only")
    user.groups.add(Group.objects.get(name=DEVELOPER))
    return user


def client_of(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def running_run(tool: Tool, actor: Actor, via: str = RunVia.BROWSER) -> Run:
    run = start.start_run(tool.published_version, {}, actor=actor, via=via, enqueue=False)
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=now, heartbeat_at=now)
    run.refresh_from_db()
    return run


def test_it_refuses_a_developer_cancelling_another_developers_run(tool, developer, other_developer):
    run = running_run(tool, Actor(user=developer))
    bea = client_of(other_developer)

    page = bea.get(reverse("run", args=[run.pk])).content.decode()
    # Bea is shown no Cancel button: she can only forge the POST, and it is refused.
    plain = bea.post(reverse("run_cancel", args=[run.pk]))
    htmx = bea.post(
        reverse("run_cancel", args=[run.pk]), {"after": "0"}, headers={"HX-Request": "true"}
    )

    assert 'id="cancel-run"' not in page
    assert plain.status_code == 403 and htmx.status_code == 403
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and not run.cancel_requested
    assert not AuditEvent.objects.filter(action="run.cancel").exists()


def test_it_lets_the_developer_who_started_it_cancel(tool, developer):
    run = running_run(tool, Actor(user=developer))
    dave = client_of(developer)

    assert submit(dave, reverse("run", args=[run.pk]), button="Cancel").status_code == 302
    run.refresh_from_db()
    assert run.cancel_requested


def test_it_lets_an_admin_cancel_anyones_run(tool, developer, console_admin):
    run = running_run(tool, Actor(user=developer))
    ada = client_of(console_admin)

    assert submit(ada, reverse("run", args=[run.pk]), button="Cancel").status_code == 302
    run.refresh_from_db()
    assert run.cancel_requested
    assert AuditEvent.objects.get(action="run.cancel").actor == "ada"


def test_it_leaves_agent_runs_to_their_token_and_admins(tool, developer, console_admin):
    client = agent_client("tools:invoke", name="agent")
    token = AgentToken.objects.get(name="agent")
    run = running_run(tool, Actor(token=token), via=RunVia.API)
    dave = client_of(developer)

    assert 'id="cancel-run"' not in dave.get(reverse("run", args=[run.pk])).content.decode()
    # No button shown: a forged POST is refused.
    assert dave.post(reverse("run_cancel", args=[run.pk])).status_code == 403
    run.refresh_from_db()
    assert not run.cancel_requested
    # The token that started it may cancel it through the API.
    response = client.post(f"/api/v1/runs/{run.pk}/cancel")
    assert response.status_code == 200 and response.json()["cancel_requested"] is True
