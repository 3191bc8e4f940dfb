"""Agent API: invoke, run status, cancel and artifacts (scope tools:invoke)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from tools_app.api import runs as api_runs
from tools_app.audit import Actor
from tools_app.catalog.versions import set_enabled
from tools_app.models import AuditEvent, Run, RunArtifact, RunUpdate, Tool
from tools_app.models.runs import RunStatus, RunVia
from tools_app.models.tokens import AgentToken, Scope
from tools_app.runs import start

pytestmark = pytest.mark.django_db

INPUTS = {
    "url": {"type": "string", "description": "The URL."},
    "max_chars": {"type": "integer", "description": "Cap.", "optional": True, "default": 100},
    "mode": {"type": "enum", "values": "fast,slow", "description": "Mode.", "optional": True},
    "token": {"type": "string", "description": "Secret.", "sensitive": True, "optional": True},
}


def agent(*scopes: str, name: str = "agent") -> tuple[AgentToken, Client]:
    token, raw = AgentToken.issue(name, list(scopes or [Scope.TOOLS_INVOKE]))
    return token, Client(headers={"Authorization": f"Bearer {raw}"})


@pytest.fixture
def fetch(make_tool) -> Tool:
    return make_tool("fetch", language="python", inputs=INPUTS)


def invoke(client: Client, name: str, body) -> object:
    return client.post(f"/api/v1/tools/{name}/invoke", body, content_type="application/json")


def test_it_invokes_a_tool_and_answers_with_the_run(fetch, django_capture_on_commit_callbacks):
    token, client = agent()

    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = invoke(client, "fetch", {"params": {"url": "https://a.example", "token": "s3"}})

    assert response.status_code == 202
    body = response.json()
    run = Run.objects.get()
    assert body == {"run": str(run.pk), "status": "queued", "url": f"/api/v1/runs/{run.pk}"}
    assert response["Location"] == body["url"]
    assert run.via == RunVia.API and run.token == token and run.user is None
    assert run.params == {"url": "https://a.example", "max_chars": 100, "token": start.MASK}
    assert len(queued) == 1  # the Celery task, sent on commit
    event = AuditEvent.objects.get(action="run.start")
    assert event.actor == "token:agent" and "s3" not in str(event.data)


def test_it_lists_every_params_problem(fetch):
    _, client = agent()

    response = invoke(client, "fetch", {"params": {"max_chars": "x", "mode": "warp", "nope": 1}})

    assert response.status_code == 422
    assert response.json() == {
        "error": "invalid params",
        "detail": [
            "max_chars: must be an integer, got a string",
            "mode: 'warp' is not one of fast, slow",
            "nope: unknown parameter (allowed: url, max_chars, mode, token)",
            "url: is required",
        ],
    }
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        ({"params": [1]}, 422, ["params: must be an object, got an array"]),
        ({}, 422, ["url: is required"]),
        ({"params": {"url": "u"}, "version": 0}, 422, None),
    ],
)
def test_it_refuses_malformed_invocations(fetch, body, status, detail):
    _, client = agent()
    response = invoke(client, "fetch", body)
    assert response.status_code == status
    assert "error" in response.json()
    if detail is not None:
        assert response.json()["detail"] == detail


def test_it_answers_json_to_a_body_that_is_not_json(fetch):
    _, client = agent()
    response = client.post("/api/v1/tools/fetch/invoke", "{", content_type="application/json")
    assert 400 <= response.status_code < 500 and "error" in response.json()


def test_it_invokes_only_published_enabled_tools(make_tool, fetch):
    _, client = agent()
    make_tool("drafty", language="python", publish=False)
    assert invoke(client, "drafty", {}).status_code == 404
    assert invoke(client, "nope", {}).status_code == 404
    assert invoke(client, "..", {}).status_code == 404
    set_enabled(fetch, False, actor=Actor.system())
    assert invoke(client, "fetch", {"params": {"url": "u"}}).status_code == 404


def test_it_pins_published_versions_but_never_drafts(make_tool, fetch):
    _, client = agent()
    make_tool("fetch", language="python", inputs=INPUTS, publish=False, description="v2")

    assert invoke(client, "fetch", {"params": {"url": "u"}, "version": 1}).status_code == 202
    assert invoke(client, "fetch", {"params": {"url": "u"}, "version": 2}).status_code == 404
    assert [r.version.number for r in Run.objects.all()] == [1]


def test_it_needs_the_invoke_scope(fetch):
    _, reader = agent(Scope.REGISTRY_READ)
    response = invoke(reader, "fetch", {"params": {"url": "u"}})
    assert response.status_code == 403 and "tools:invoke" in response.json()["detail"]
    assert invoke(Client(), "fetch", {"params": {"url": "u"}}).status_code == 401
    token, client = agent()
    token.revoke()
    assert invoke(client, "fetch", {"params": {"url": "u"}}).status_code == 401
    assert not Run.objects.exists()


def _started(client: Client) -> Run:
    response = invoke(client, "fetch", {"params": {"url": "https://a.example", "token": "s3"}})
    assert response.status_code == 202
    return Run.objects.get(pk=response.json()["run"])


def test_it_reports_status_updates_result_and_artifacts(fetch, settings):
    _, client = agent()
    run = _started(client)
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.SUCCEEDED,
        started_at=now,
        finished_at=now,
        isolation="bwrap",
        duration=0.25,
        exit_code=0,
        result={"content": [{"type": "text", "text": "page"}], "isError": False},
    )
    for seq in (1, 2):
        RunUpdate.objects.create(run=run, seq=seq, content=[{"type": "text", "text": f"u{seq}"}])
    artifact = RunArtifact.objects.create(run=run, name="a.pdf", size=3, content=b"PDF")

    body = client.get(f"/api/v1/runs/{run.pk}").json()

    assert body["status"] == "succeeded" and body["tool"] == "fetch" and body["version"] == 1
    assert body["params"]["token"] == start.MASK
    assert [u["content"][0]["text"] for u in body["updates"]] == ["u1", "u2"]
    assert body["result"]["content"][0]["text"] == "page"
    assert body["isolation"] == "bwrap" and body["duration"] == 0.25
    assert body["spare"] is False
    url = f"/api/v1/runs/{run.pk}/artifacts/{artifact.pk}"
    assert body["artifacts"] == [{"name": "a.pdf", "size": 3, "url": url}]
    download = client.get(url)
    assert download.status_code == 200 and b"".join(download.streaming_content) == b"PDF"
    assert download["Content-Disposition"] == 'attachment; filename="a.pdf"'
    # Cheap polling: only the updates after a sequence number.
    after = client.get(f"/api/v1/runs/{run.pk}?after=1").json()["updates"]
    assert [u["seq"] for u in after] == [2]


def test_a_run_is_visible_only_to_the_token_that_started_it(fetch, settings):
    _, owner = agent(name="owner")
    _, other = agent(name="other")
    run = _started(owner)
    artifact = RunArtifact.objects.create(run=run, name="a", size=1, content=None)

    for path in (f"/api/v1/runs/{run.pk}", f"/api/v1/runs/{run.pk}/artifacts/{artifact.pk}"):
        response = other.get(path)
        assert response.status_code == 404 and response.json()["error"] == "unknown run"
    assert other.post(f"/api/v1/runs/{run.pk}/cancel").status_code == 404
    assert owner.get("/api/v1/runs/not-a-uuid").status_code == 404
    assert owner.get("/api/v1/runs/00000000-0000-0000-0000-000000000000").status_code == 404
    # The artifact's bytes are missing: 404, not 500.
    assert owner.get(f"/api/v1/runs/{run.pk}/artifacts/{artifact.pk}").status_code == 404
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED


def test_it_cancels_a_queued_run(fetch):
    _, client = agent()
    run = _started(client)

    response = client.post(f"/api/v1/runs/{run.pk}/cancel")

    assert response.status_code == 200
    assert response.json() == {"run": str(run.pk), "status": "cancelled", "cancel_requested": True}
    assert AuditEvent.objects.get(action="run.cancel").actor == "token:agent"
    again = client.post(f"/api/v1/runs/{run.pk}/cancel")
    assert again.status_code == 409 and again.json()["detail"] == {"status": "cancelled"}


def test_it_asks_a_running_run_to_stop(fetch):
    _, client = agent()
    run = _started(client)
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=now, heartbeat_at=now)

    response = client.post(f"/api/v1/runs/{run.pk}/cancel")

    assert response.json() == {"run": str(run.pk), "status": "running", "cancel_requested": True}


def test_reading_a_run_whose_worker_died_marks_it_lost(fetch, settings):
    settings.RUN_LOST_AFTER_SECONDS = 30
    _, client = agent()
    run = _started(client)
    old = timezone.now() - timedelta(seconds=60)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=old, heartbeat_at=old)

    body = client.get(f"/api/v1/runs/{run.pk}").json()

    assert body["status"] == "lost" and body["result"]["isError"] is True


def test_the_openapi_document_lists_the_run_endpoints():
    paths = Client().get("/api/openapi.json").json()["paths"]
    assert "/api/v1/tools/{name}/invoke" in paths
    assert "/api/v1/runs/{run_id}" in paths
    assert "/api/v1/runs/{run_id}/cancel" in paths
    assert "/api/v1/runs/{run_id}/artifacts/{artifact_id}" in paths


def test_long_polling_answers_at_once_when_there_is_news(fetch, fake_clock):
    _, client = agent()
    run = _started(client)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.CANCELLED, finished_at=timezone.now())
    clock = fake_clock(api_runs)

    body = client.get(f"/api/v1/runs/{run.pk}?wait=20").json()

    assert body["status"] == "cancelled" and clock.slept == []


def test_long_polling_answers_at_once_for_a_new_update(fetch, fake_clock):
    _, client = agent()
    run = _started(client)
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=now, heartbeat_at=now)
    RunUpdate.objects.create(run=run, seq=1, content=[{"type": "text", "text": "hi"}])
    clock = fake_clock(api_runs)

    body = client.get(f"/api/v1/runs/{run.pk}?wait=20").json()
    assert [u["seq"] for u in body["updates"]] == [1] and clock.slept == []


def test_long_polling_sees_the_run_end_during_the_wait(fetch, fake_clock, monkeypatch):
    """The poll's query is compiled once per wait: it must still read the row afresh."""
    _, client = agent()
    run = _started(client)
    clock = fake_clock(api_runs)
    real_sleep = clock.sleep

    def sleep(seconds: float) -> None:
        real_sleep(seconds)
        if len(clock.slept) == 5:  # the worker finishes the run meanwhile
            Run.objects.filter(pk=run.pk).update(
                status=RunStatus.SUCCEEDED, finished_at=timezone.now()
            )

    monkeypatch.setattr(clock, "sleep", sleep)

    body = client.get(f"/api/v1/runs/{run.pk}?wait=20").json()

    assert body["status"] == "succeeded" and len(clock.slept) == 5


def test_long_polling_gives_up_after_the_wait(fetch, fake_clock):
    _, client = agent()
    run = _started(client)
    clock = fake_clock(api_runs)

    body = client.get(f"/api/v1/runs/{run.pk}?wait=0.4").json()

    assert body["status"] == "queued" and sum(clock.slept) == pytest.approx(0.4)
    assert len(clock.slept) > 1  # it looked for news in between
    assert client.get(f"/api/v1/runs/{run.pk}?wait=31").status_code == 422
    assert client.get(f"/api/v1/runs/{run.pk}?wait=nan").status_code == 422
