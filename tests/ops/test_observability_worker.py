"""Metrics and logs of real runs on a real Celery worker and the console served as in
production (gunicorn, two uvicorn workers, tests/support/worker.py): /metrics counters move
after runs, request latency adds up across web processes (multiprocess mode), and one
request id follows a run from the web's log to the worker's while its secret appears in
neither."""

from __future__ import annotations

import contextlib
import json
import stat
import time
import uuid
from pathlib import Path

import anyio
import httpx
import pytest
from django.core.cache import cache
from django.test import Client
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from prometheus_client.parser import text_string_to_metric_families

from tests.integrations.test_canary import encodings
from tests.support import tool_files
from tests.support.worker import LIVE_LOGS, wait_for_run
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.integrations.service import create_integration
from tools_app.models import AgentToken, Run
from tools_app.models.runs import FINISHED, RunStatus
from tools_app.models.tokens import Scope
from tools_app.ops import metrics

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

QUICK_PY = """
def execute(tool_call_id, params, signal, on_update):
    return {"content": [{"type": "text", "text": "quick"}]}
"""

# Leaks its integration's secret through every channel it has: stdout, stderr, progress,
# the result, and an exception that names it.
LEAKY_PY = """
import os, sys

def execute(tool_call_id, params, signal, on_update):
    secret = os.environ["APIFY_TOKEN"]
    print("stdout " + secret)
    print("stderr " + secret + " " + secret.encode().hex(), file=sys.stderr)
    on_update({"content": [{"type": "text", "text": "progress " + secret}]})
    if params.get("fail"):
        raise RuntimeError("failing with " + secret)
    return {"content": [{"type": "text", "text": "result " + secret}]}
"""
FAIL_INPUT = {"fail": {"type": "boolean", "description": "Raise instead."}}


def families(body: bytes) -> dict:
    return {f.name: f for f in text_string_to_metric_families(body.decode())}


def sample(found: dict, family: str, name: str, **labels: str) -> float:
    for s in found.get(family, []).samples if family in found else []:
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return 0.0


def json_lines(path: Path) -> list[dict]:
    found = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                found.append(json.loads(line))
    return found


def wait_for_line(path: Path, predicate, what: str, timeout: float = 20.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        lines = json_lines(path)
        if any(predicate(line) for line in lines):
            return lines
        assert time.monotonic() < deadline, f"no {what} in {path}:\n{path.read_text()[-4000:]}"
        time.sleep(0.1)


def test_run_counters_move_after_real_runs(worker, make_tool, settings):
    settings.METRICS_CACHE_SECONDS = 0
    cache.delete(metrics.CACHE_KEY)
    _, scrape_token = AgentToken.issue("prometheus", [Scope.METRICS_READ])
    scraper = Client(headers={"Authorization": f"Bearer {scrape_token}"})
    _, raw = AgentToken.issue("agent", [Scope.TOOLS_INVOKE])
    agent = Client(headers={"Authorization": f"Bearer {raw}"})
    make_tool("quick", language="python", source=QUICK_PY)
    before = families(scraper.get("/metrics").content)

    for _ in range(3):
        answer = agent.post("/api/v1/tools/quick/invoke", {}, content_type="application/json")
        assert answer.status_code == 202, answer.content
        run = wait_for_run(answer.json()["run"], FINISHED, worker=worker)
        assert run.status == RunStatus.SUCCEEDED, run.result

    after = families(scraper.get("/metrics").content)
    key = {"tool": "quick", "status": "succeeded", "via": "api"}
    runs = ("tool_console_runs", "tool_console_runs_total")
    assert sample(after, *runs, **key) == sample(before, *runs, **key) + 3
    hist = "tool_console_run_duration_seconds"
    count = (hist, hist + "_count")
    assert (
        sample(after, *count, status="succeeded") == sample(before, *count, status="succeeded") + 3
    )
    starts = ("tool_console_run_starts", "tool_console_run_starts_total")
    started = sum(sample(after, *starts, start=k) - sample(before, *starts, start=k)
                  for k in ("spare", "cold"))  # fmt: skip
    assert started == 3
    assert sample(after, "tool_console_runs_queued", "tool_console_runs_queued") == 0
    # The worker's heartbeat row: a flush between tests (transactional tests) deletes it
    # until its next beat (WORKER_HEARTBEAT_SECONDS), so wait for one beat at most.
    deadline = time.monotonic() + 3 * settings.WORKER_HEARTBEAT_SECONDS + 5
    alive = ("tool_console_workers_alive", "tool_console_workers_alive")
    while sample(after, *alive) < 1 and time.monotonic() < deadline:
        time.sleep(0.5)
        after = families(scraper.get("/metrics").content)
    assert sample(after, *alive) >= 1


def test_request_latency_adds_up_across_web_processes(worker, console_url):
    _, token = AgentToken.issue("prometheus", [Scope.METRICS_READ])
    auth = {"Authorization": f"Bearer {token}"}
    http = "tool_console_http_request_duration_seconds"
    labels = {"method": "GET", "view": "healthz_root", "status": "2xx"}

    def count() -> float:
        answer = httpx.get(f"{console_url}/metrics", headers=auth, timeout=30)
        assert answer.status_code == 200, answer.text
        return sample(families(answer.content), http, http + "_count", **labels)

    before = count()
    for _ in range(12):  # a connection each: both gunicorn workers serve some
        assert httpx.get(f"{console_url}/healthz", timeout=10).status_code == 200

    assert count() == before + 12
    folder = worker.state_dir / "metrics"  # the live console's STATE_DIR is the worker's
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert len(list(folder.glob("histogram_*.db"))) >= 1


@pytest.mark.parametrize("fail", [False, True], ids=["succeeds", "raises"])
def test_one_request_id_follows_a_run_and_its_secret_is_in_no_log(
    worker, console_url, admin_user, fail
):
    canary = f"canary-log-{uuid.uuid4().hex}"
    create_integration("apify", "apify", actor=Actor.system(), secrets={"token": canary})
    files = tool_files("leaky", "python", LEAKY_PY, integrations=["apify"], inputs=FAIL_INPUT)
    save_version("leaky", files, actor=Actor(user=admin_user), publish=True)
    _, raw = AgentToken.issue("agent", [Scope.TOOLS_INVOKE])
    request_id = f"trace-{uuid.uuid4().hex[:16]}"

    answer = httpx.post(
        f"{console_url}/api/v1/tools/leaky/invoke",
        json={"params": {"fail": fail}},
        headers={"Authorization": f"Bearer {raw}", "X-Request-ID": request_id},
        timeout=30,
    )

    assert answer.status_code == 202, answer.text
    assert answer.headers["X-Request-ID"] == request_id
    run_id = answer.json()["run"]
    run = wait_for_run(run_id, FINISHED, worker=worker)
    assert run.status == (RunStatus.FAILED if fail else RunStatus.SUCCEEDED), run.result
    assert run.request_id == request_id
    assert canary not in json.dumps(run.result)  # redacted: the tool did see it
    assert "{{apify.token}}" in json.dumps(run.result) + run.stderr_tail + run.error

    def ours(line: dict) -> bool:
        return line["request_id"] == request_id and line["run_id"] == run_id

    done = f"run {run_id} done"

    def finished_line(line: dict) -> bool:
        return ours(line) and done in line["message"]

    worker_lines = wait_for_line(worker.log_path, finished_line, "worker line of the run")
    web_log = LIVE_LOGS[console_url]
    web_lines = wait_for_line(web_log, ours, "web line of the run")
    assert any(f"run {run_id} queued" in line["message"] for line in web_lines if ours(line))
    assert any(f"run {run_id} received" in line["message"] for line in worker_lines if ours(line))
    # `grep <run id>` finds the run's lines in both logs.
    assert run_id in worker.log_path.read_text() and run_id in web_log.read_text()

    for path in (worker.log_path, web_log):
        text = path.read_text(errors="replace")
        assert canary not in text, f"the secret is in {path.name}"
        assert canary[-12:] not in text
        for kind, form in encodings(canary).items():
            assert form not in text, f"the secret ({kind}) is in {path.name}"
    assert Run.objects.filter(request_id=request_id).count() == 1


def test_an_mcp_calls_run_keeps_its_request_id(worker, console_url, make_tool):
    make_tool("quick", language="python", source=QUICK_PY)
    _, raw = AgentToken.issue("mcp-agent", [Scope.REGISTRY_READ, Scope.TOOLS_INVOKE])
    request_id = f"mcp-{uuid.uuid4().hex[:16]}"
    http = create_mcp_http_client(
        headers={"Authorization": f"Bearer {raw}", "X-Request-ID": request_id}
    )

    async def main():
        client = McpClient(streamable_http_client(f"{console_url}/mcp", http_client=http))
        async with http, client:
            return await client.call_tool("quick", {})

    result = anyio.run(main)

    assert result.is_error is False
    run = Run.objects.get(tool__name="quick")
    assert run.via == "mcp" and run.request_id == request_id
