"""Health: /healthz (liveness), GET /api/v1/health (readiness, 503 when not ready), the
System page, the nav's warning dot and the run page's "waiting for a worker" line, all
answered by tools_app/ops/health.py from real worker heartbeats and a real broker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from console.celery import app
from tools_app.audit import Actor
from tools_app.models import Run, WorkerHeartbeat
from tools_app.models.runs import RunVia
from tools_app.models.tokens import AgentToken, Scope
from tools_app.ops import health
from tools_app.runs import start

pytestmark = pytest.mark.django_db
REPO = Path(__file__).resolve().parents[2]


def beat(age: float = 0.0, name: str = "celery@test") -> WorkerHeartbeat:
    seen = timezone.now() - timedelta(seconds=age)
    return WorkerHeartbeat.objects.create(
        name=name, pid=4242, queues="console", concurrency=2, started_at=seen, seen_at=seen
    )


def token_client(scopes=(Scope.REGISTRY_READ,)) -> Client:
    _, raw = AgentToken.issue("monitor", list(scopes))
    return Client(headers={"Authorization": f"Bearer {raw}"})


def get_health(client: Client):
    response = client.get("/api/v1/health")
    return response.status_code, response.json()


@pytest.fixture
def admin_client(console_admin) -> Client:
    client = Client()
    client.force_login(console_admin)
    return client


# --------------------------------------------------------------------------------------
# Liveness


def test_it_answers_healthz_without_auth_or_database(client, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"ok": True}
    assert client.post("/healthz").status_code == 405


# --------------------------------------------------------------------------------------
# Readiness


def test_it_is_ready_with_a_database_a_broker_and_a_live_worker(idle_broker):
    beat(age=1)
    status, body = get_health(token_client())

    assert status == 200, body
    assert body["ready"] is True and body["problems"] == []
    assert body["database"]["ok"] and body["broker"]["ok"]
    assert body["broker"]["transport"] == "filesystem" and body["broker"]["embedded"] is True
    assert body["workers"] == {**body["workers"], "ok": True, "alive": 1}
    assert body["workers"]["newest_age"] < 15
    assert body["isolation"]["level"] in ("bwrap", "process")
    assert body["encryption"]["ok"] is True and "development" in body["encryption"]


def test_it_counts_pending_messages_and_queued_runs(
    idle_broker, make_tool, django_capture_on_commit_callbacks
):
    beat()
    tool = make_tool("quick", language="python")
    with django_capture_on_commit_callbacks(execute=True):
        start.start_run(tool.published_version, {}, actor=Actor.system(), via=RunVia.COMMAND)

    _, body = get_health(token_client())

    assert body["broker"]["pending"] == 1
    assert body["queue"]["queued_runs"] == 1 and body["queue"]["oldest_queued_age"] is not None


def test_it_is_not_ready_without_a_live_worker(idle_broker):
    beat(age=42)  # a worker that died 42 s ago
    status, body = get_health(token_client())

    assert status == 503
    assert body["ready"] is False and body["workers"]["ok"] is False
    assert body["workers"]["alive"] == 0 and body["workers"]["newest_age"] >= 42
    assert "No Celery worker is alive (none seen for 4" in body["workers"]["detail"]
    assert body["problems"] == [body["workers"]["detail"]]


def test_it_is_not_ready_when_no_worker_ever_reported(idle_broker):
    status, body = get_health(token_client())
    assert status == 503 and "none has ever reported" in body["workers"]["detail"]


def test_it_is_not_ready_when_the_broker_does_not_answer(idle_broker):
    beat()
    # Nothing listens on port 1: a real connection refused, quickly.
    app.conf.update(broker_url="redis://127.0.0.1:1/0", broker_transport=None)
    app._pool = None

    status, body = get_health(token_client())

    assert status == 503
    assert body["broker"]["ok"] is False and "CELERY_BROKER_URL" in body["broker"]["detail"]
    assert body["workers"]["ok"] is True


def test_it_reports_encryption_keys_that_do_not_load(idle_broker, settings):
    beat()
    settings.CONSOLE_ENCRYPTION_KEYS = ["not-a-fernet-key"]
    status, body = get_health(token_client())

    assert status == 200  # secrets are broken, but runs without them still work
    assert body["encryption"]["ok"] is False and body["encryption"]["development"] is False
    assert "not-a-fernet-key" not in str(body)


def test_it_answers_any_token_and_admins_only(idle_broker, viewer, developer, admin_client):
    beat()
    assert get_health(token_client(scopes=[Scope.SYNC_READ]))[0] == 200
    assert get_health(admin_client)[0] == 200

    for user in (viewer, developer):
        client = Client()
        client.force_login(user)
        status, body = get_health(client)
        assert status == 403 and body["error"] == "admins only"
    status, body = get_health(Client())
    assert status == 401 and body["error"] == "missing token"
    bad = Client(headers={"Authorization": "Bearer tc_not-a-real-token"})
    assert get_health(bad)[0] == 401
    assert get_health(Client(headers={"Authorization": "Basic abc"}))[0] == 401


# --------------------------------------------------------------------------------------
# Pages


def test_the_system_page_shows_the_report_to_admins_only(idle_broker, admin_client, viewer):
    beat(age=42)
    page = admin_client.get("/system/")
    text = page.content.decode()

    assert page.status_code == 200
    assert "not ready" in text and "No worker is alive" in text
    assert "Quarantined message files" in text
    viewer_client = Client()
    viewer_client.force_login(viewer)
    assert viewer_client.get("/system/").status_code == 403
    assert Client().get("/system/").status_code == 302  # to the login page


def test_the_nav_warns_when_no_worker_is_alive_with_one_query(admin_client, developer):
    with CaptureQueriesContext(connection) as queries:
        page = admin_client.get("/tools/").content.decode()
    heartbeat_queries = [q for q in queries if "workerheartbeat" in q["sql"].lower()]
    assert len(heartbeat_queries) == 1
    assert 'class="warn-dot"' in page and "warning: no worker is running" in page

    beat()
    page = admin_client.get("/tools/").content.decode()
    assert "warn-dot" not in page

    WorkerHeartbeat.objects.all().delete()
    dev = Client()
    dev.force_login(developer)
    page = dev.get("/tools/").content.decode()
    assert "No worker is running: runs wait" in page and "/system/" not in page


@pytest.mark.parametrize("alive", [True, False])
def test_the_cheap_answers_cost_one_query_each(alive, django_assert_max_num_queries):
    beat(age=0 if alive else 42)
    with django_assert_max_num_queries(1):
        assert health.worker_alive() is alive
    with django_assert_max_num_queries(1):
        assert (health.worker_wait() is None) is alive


def test_the_run_page_says_when_no_worker_will_pick_a_run_up(developer, make_tool):
    tool = make_tool("quick", language="python")
    run = start.start_run(
        tool.published_version, {}, actor=Actor.system(), via=RunVia.COMMAND, enqueue=False
    )
    client = Client()
    client.force_login(developer)

    assert "waiting for a worker: none has been seen yet" in client.get(f"/runs/{run.pk}/").text
    stale = beat(age=42)
    live_part = client.get(f"/runs/{run.pk}/updates/").content.decode()
    assert "waiting for a worker: none seen for 42 s" in live_part
    stale.delete()
    beat()
    assert "waiting for a worker to pick it up" in client.get(f"/runs/{run.pk}/").text
    Run.objects.filter(pk=run.pk).update(status="running")
    assert "waiting for a worker" not in client.get(f"/runs/{run.pk}/").text


# --------------------------------------------------------------------------------------
# A real worker's heartbeat


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_running_worker_beats_and_a_stopped_one_is_forgotten(worker):
    name = f"{worker.queue}-{worker.starts}@"
    deadline = time.monotonic() + 30
    while not WorkerHeartbeat.objects.alive().filter(name__startswith=name).exists():
        assert time.monotonic() < deadline, worker.log()
        time.sleep(0.1)
    row = WorkerHeartbeat.objects.get(name__startswith=name)
    assert row.pid == worker.proc.pid and worker.queue in row.queues

    worker.stop()

    assert not WorkerHeartbeat.objects.filter(name__startswith=name).exists()


def get_without_database(tmp_path: Path, url: str, **client: str) -> tuple[str, str, str]:
    """(status, body, stderr) of a GET in a console whose database is down: nothing
    listens on port 1. `client` are django.test.Client arguments (Python expressions)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONSOLE_", "CELERY_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="console.settings",
        DATABASE_URL="postgres://nobody@127.0.0.1:1/console",
        CONSOLE_STATE_DIR=str(tmp_path / "state"),
        DATA_PATH=str(tmp_path / "data"),
        CONSOLE_ALLOWED_HOSTS="testserver",
    )
    arguments = ", ".join(f"{name}={value}" for name, value in client.items())
    code = (
        "import django; django.setup()\n"
        "from django.test import Client\n"
        f"r = Client(raise_request_exception=False, {arguments}).get({url!r})\n"
        "print(r.status_code); print(r.content.decode())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True
    )
    status, _, body = done.stdout.partition("\n")
    return status, body, done.stderr


def test_it_answers_503_when_the_database_does_not_answer(tmp_path):
    """A console whose database is down: a JSON 503 naming the database, never a 500,
    even though the caller's token cannot be checked."""
    headers = "{'Authorization': 'Bearer tc_some-token'}"
    status, body, stderr = get_without_database(tmp_path, "/api/v1/health", headers=headers)

    assert status == "503", stderr[-3000:]
    body = json.loads(body)
    assert body["ready"] is False and body["database"]["ok"] is False
    assert "DATABASE_URL" in body["problems"][0]
    assert body["broker"] is None and body["workers"] is None  # nothing more: caller unchecked


def test_it_shows_a_status_page_not_a_500_when_the_database_does_not_answer(tmp_path):
    """A signed-in person (a session cookie: reading it needs the database) opening the
    System page while the database is down gets a 503 page saying so."""
    cookie = "{'Cookie': 'sessionid=" + "a" * 32 + "'}"
    status, body, stderr = get_without_database(tmp_path, "/system/", headers=cookie)

    assert status == "503", stderr[-3000:]
    assert "cannot reach its database" in body and "check DATABASE_URL" in body
    assert "Something went wrong" not in body
    # Liveness does not need the database.
    assert get_without_database(tmp_path, "/healthz")[:2] == ("200", '{"ok": true}\n')


def test_the_system_page_marks_a_development_key_as_the_home_page_does(console_admin_client):
    """Not "ok": the same amber "development key" the home page shows, from one partial."""
    page = console_admin_client.get("/system/").content.decode()
    row = page[page.index('id="check-encryption"') :]
    row = row[: row.index("</tr>")]
    assert '<span class="badge warning">development key</span>' in row
    assert ">ok<" not in row
    home = console_admin_client.get("/").content.decode()
    status = home[home.index('id="system-status"') :]
    status = status[: status.index("</section>")]
    assert '<span class="badge warning">development key</span>' in status


def test_the_system_and_home_pages_agree_about_a_fallback_sandbox(
    console_admin_client, monkeypatch
):
    """The System page called a fallback sandbox "ok" while the home page marked it amber."""
    from tools_app import runner

    monkeypatch.setattr(runner, "isolation_level", lambda: ("process", "no bubblewrap here"))
    page = console_admin_client.get("/system/").content.decode()
    row = page[page.index('id="check-isolation"') :]
    assert '<span class="badge warning">fallback sandbox</span>' in row[: row.index("</tr>")]
    home = console_admin_client.get("/").content.decode()
    status = home[home.index('id="system-status"') :]
    status = status[: status.index("</section>")]
    assert '<span class="badge warning">fallback sandbox</span>' in status
