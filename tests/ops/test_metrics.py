"""GET /metrics (tools_app/ops/metrics.py, tools_app/views/metrics.py): the Prometheus text
format as prometheus_client's own parser reads it, figures aggregated from the database in a
constant number of queries and cached, bounded labels, and who may scrape it. The real-worker
proof is tests/ops/test_observability_worker.py."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from tests.support import REPO
from tools_app.audit import Actor, record
from tools_app.models import AgentToken, Integration, Run, WorkerHeartbeat
from tools_app.models.runs import RunStatus, RunVia
from tools_app.models.tokens import Scope
from tools_app.ops import metrics

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_cache(settings):
    settings.METRICS_CACHE_SECONDS = 0
    cache.delete(metrics.CACHE_KEY)
    yield
    cache.delete(metrics.CACHE_KEY)


def scraper() -> Client:
    _, raw = AgentToken.issue("prometheus", [Scope.METRICS_READ])
    return Client(headers={"Authorization": f"Bearer {raw}"})


def families(body: bytes) -> dict:
    return {f.name: f for f in text_string_to_metric_families(body.decode())}


def value(found: dict, family: str, sample: str, **labels: str) -> float:
    for s in found[family].samples:
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise AssertionError(f"no {sample}{labels} in {found[family].samples}")


def add_run(tool, status, *, via=RunVia.API, duration=None, spare=False, started=True, **kw):
    now = timezone.now()
    return Run.objects.create(
        tool=tool,
        version=tool.published_version,
        status=status,
        via=via,
        duration=duration,
        spare=spare,
        started_at=now if started else None,
        **kw,
    )


def test_it_counts_runs_queue_workers_and_refresh_failures(make_tool, settings):
    greet = make_tool("greet")
    other = make_tool("other")
    add_run(greet, RunStatus.SUCCEEDED, duration=0.3, spare=True)
    add_run(greet, RunStatus.SUCCEEDED, duration=2.0)
    add_run(greet, RunStatus.FAILED, via=RunVia.MCP, duration=40.0)
    add_run(other, RunStatus.TIMED_OUT, via=RunVia.BROWSER, duration=61.0)
    add_run(other, RunStatus.LOST, started=False)
    add_run(other, RunStatus.RUNNING)
    queued = add_run(greet, RunStatus.QUEUED, started=False)
    Run.objects.filter(pk=queued.pk).update(created_at=timezone.now() - timedelta(seconds=90))
    now = timezone.now()
    WorkerHeartbeat.objects.create(name="w1@h", pid=1, concurrency=2, started_at=now, seen_at=now)
    WorkerHeartbeat.objects.create(name="w2@h", pid=2, concurrency=2, started_at=now, seen_at=now)
    old = now - timedelta(hours=1)
    WorkerHeartbeat.objects.create(name="dead@h", pid=3, concurrency=4, started_at=old, seen_at=old)
    from tools_app.integrations.service import create_integration

    create_integration("apify", "apify", actor=Actor.system(), secrets={"token": "x" * 20})
    record(Actor.system(), metrics.OAUTH_REFRESH_FAILED, Integration.objects.get(slug="apify"))

    response = scraper().get("/metrics")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    found = families(response.content)
    runs = "tool_console_runs"
    assert value(found, runs, "tool_console_runs_total", tool="greet", status="succeeded",
                 via="api") == 2  # fmt: skip
    assert value(found, runs, "tool_console_runs_total", tool="greet", status="failed",
                 via="mcp") == 1  # fmt: skip
    assert value(found, runs, "tool_console_runs_total", tool="other", status="lost") == 1
    total = sum(s.value for s in found[runs].samples if s.name.endswith("_total"))
    assert total == 5  # finished runs only
    hist = "tool_console_run_duration_seconds"
    assert value(found, hist, hist + "_count", status="succeeded") == 2
    assert value(found, hist, hist + "_sum", status="succeeded") == pytest.approx(2.3)
    assert value(found, hist, hist + "_bucket", status="succeeded", le="0.5") == 1
    assert value(found, hist, hist + "_bucket", status="succeeded", le="2.5") == 2
    assert value(found, hist, hist + "_bucket", status="timed_out", le="60.0") == 0
    assert value(found, hist, hist + "_bucket", status="timed_out", le="+Inf") == 1
    assert value(found, "tool_console_runs_queued", "tool_console_runs_queued") == 1
    assert value(found, "tool_console_runs_running", "tool_console_runs_running") == 1
    age = value(found, "tool_console_oldest_queued_age_seconds",
                "tool_console_oldest_queued_age_seconds")  # fmt: skip
    assert 89 <= age < 200
    assert value(found, "tool_console_workers_alive", "tool_console_workers_alive") == 2
    assert value(found, "tool_console_worker_slots", "tool_console_worker_slots") == 4
    starts = "tool_console_run_starts"
    assert value(found, starts, starts + "_total", start="spare") == 1
    assert value(found, starts, starts + "_total", start="cold") == 4
    failures = "tool_console_oauth_refresh_failures"
    assert value(found, failures, failures + "_total") == 1


def test_its_labels_stay_bounded(make_tool, client):
    tool = make_tool("greet")
    run = add_run(tool, RunStatus.SUCCEEDED, duration=1.0)
    client.get(f"/runs/{run.pk}/")  # a request with a run id in its path
    client.get("/no/such/page/")

    body = scraper().get("/metrics").content.decode()

    labels = {
        name for f in families(body.encode()).values() for s in f.samples for name in s.labels
    }
    assert labels <= {"tool", "status", "via", "start", "method", "view", "le"}
    assert str(run.pk) not in body and "version" not in labels
    found = families(body.encode())
    http = "tool_console_http_request_duration_seconds"
    views = {s.labels["view"] for s in found[http].samples}
    assert "run" in views and "other" in views
    assert not any("/" in view for view in views)  # URL names, never paths


def test_an_odd_method_is_counted_as_other():
    Client().generic("BREW", "/healthz")
    found = families(scraper().get("/metrics").content)
    http = "tool_console_http_request_duration_seconds"
    methods = {s.labels["method"] for s in found[http].samples}
    assert "other" in methods and "BREW" not in methods


def test_request_latency_counts_each_request_once():
    before = families(scraper().get("/metrics").content)
    http = "tool_console_http_request_duration_seconds"
    labels = {"method": "GET", "view": "healthz_root", "status": "2xx"}

    def count(found):
        try:
            return value(found, http, http + "_count", **labels)
        except (AssertionError, KeyError):
            return 0

    for _ in range(3):
        assert Client().get("/healthz").status_code == 200

    assert count(families(scraper().get("/metrics").content)) == count(before) + 3


def test_a_scrape_costs_the_same_queries_however_many_tools_and_runs(
    make_tool, settings, django_assert_max_num_queries
):
    settings.METRICS_PUBLIC = True

    def queries() -> int:
        with CaptureQueriesContext(connection) as seen:
            assert Client().get("/metrics").status_code == 200
        return len(seen)

    make_tool("t0")
    add_run(make_tool("t1"), RunStatus.SUCCEEDED, duration=1.0)
    few = queries()
    for n in range(2, 14):
        tool = make_tool(f"t{n}")
        for status in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.QUEUED):
            add_run(tool, status, duration=n / 3, spare=n % 2 == 0)
    with django_assert_max_num_queries(6):
        assert Client().get("/metrics").status_code == 200
    assert queries() == few


def test_the_database_figures_are_cached_between_scrapes(make_tool, settings):
    settings.METRICS_PUBLIC = True
    settings.METRICS_CACHE_SECONDS = 30
    tool = make_tool("greet")
    add_run(tool, RunStatus.SUCCEEDED, duration=1.0)
    first = families(Client().get("/metrics").content)
    add_run(tool, RunStatus.SUCCEEDED, duration=1.0)

    with CaptureQueriesContext(connection) as seen:
        again = families(Client().get("/metrics").content)

    assert len(seen) == 0
    key = {"tool": "greet", "status": "succeeded"}
    assert value(again, "tool_console_runs", "tool_console_runs_total", **key) == 1
    assert value(first, "tool_console_runs", "tool_console_runs_total", **key) == 1
    cache.delete(metrics.CACHE_KEY)
    fresh = families(Client().get("/metrics").content)
    assert value(fresh, "tool_console_runs", "tool_console_runs_total", **key) == 2


# --- who may scrape --------------------------------------------------------------------


def test_without_a_token_it_answers_401_with_www_authenticate():
    response = Client().get("/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer ")
    assert response.json()["error"] == "missing token"
    assert b"tool_console" not in response.content


@pytest.mark.parametrize("header", ["Basic dXNlcjpwYXNz", "Bearer", "Bearer tc_not-a-token"])
def test_a_malformed_or_unknown_token_is_refused(header):
    response = Client(headers={"Authorization": header}).get("/metrics")
    assert response.status_code == 401
    assert "WWW-Authenticate" in response


def test_a_token_without_the_metrics_scope_gets_403():
    _, raw = AgentToken.issue("agent", [Scope.REGISTRY_READ, Scope.TOOLS_INVOKE])
    response = Client(headers={"Authorization": f"Bearer {raw}"}).get("/metrics")
    assert response.status_code == 403
    assert "metrics:read" in response.json()["detail"]


def test_a_revoked_metrics_token_is_refused(settings):
    settings.CONSOLE_API_AUTH_CACHE_SECONDS = 0
    token, raw = AgentToken.issue("prometheus", [Scope.METRICS_READ])
    token.revoke()
    response = Client(headers={"Authorization": f"Bearer {raw}"}).get("/metrics")
    assert response.status_code == 401


def test_a_signed_in_admin_is_no_scraper(admin_client):
    """A session is not a scrape credential: tokens can be revoked one by one."""
    assert admin_client.get("/metrics").status_code == 401


def test_metrics_public_opens_it_to_anyone(settings):
    settings.METRICS_PUBLIC = True
    response = Client().get("/metrics")
    assert response.status_code == 200
    assert "tool_console_runs_queued" in families(response.content)


def test_only_get_and_head_are_answered(settings):
    settings.METRICS_PUBLIC = True
    assert Client().post("/metrics").status_code == 405
    assert Client().head("/metrics").status_code == 200


def test_the_token_form_offers_the_metrics_scope(console_admin_client):
    page = console_admin_client.get("/tokens/new/")
    assert page.status_code == 200
    assert b"metrics:read" in page.content


def test_it_serves_a_page_whose_latency_cannot_be_counted(tmp_path):
    """A multiprocess folder the process cannot write (another user's, or a path through a
    file) loses the count, never the page: the middleware logs it and answers."""
    script = (
        "import django; django.setup()\n"
        "from django.test import Client\n"
        "print(Client().get('/favicon.ico').status_code)\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "CONSOLE_STATE_DIR": str(tmp_path / "state"),
        "CONSOLE_ALLOWED_HOSTS": "testserver",
        "PROMETHEUS_MULTIPROC_DIR": "/dev/null/metrics",
    }
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    status = done.stdout.strip().splitlines()[-1:]
    assert status and status[0].isdigit() and int(status[0]) < 500, done.stderr[-3000:]
    assert "request latency not counted" in done.stderr
