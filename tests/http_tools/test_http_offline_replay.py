"""A case of a kind: http tool with `sample:` replays offline (docs/cases.md): the
version's samples/<name>.json answers through the same response mapping and redaction as
the network would, and no socket is opened."""

from __future__ import annotations

import json
import socket

import pytest

from tools_app.audit import Actor
from tools_app.catalog import case_secrets
from tools_app.catalog.versions import save_version
from tools_app.models import Run
from tools_app.models.cases import CheckStatus
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import execute, replay
from tools_app.runs import start as run_start

# Nothing listens there, and nothing may try: the runs below open no socket at all.
BASE = "http://127.0.0.1:9"
KEY = "k-offline-canary-5150"
TOOLMD = f"""---
name: fetcher
description: Calls a local API.
kind: http
inputs:
  item_id: {{type: string, description: Item}}
  key: {{type: string, description: API key, sensitive: true, optional: true}}
request:
  method: GET
  url: {BASE}/item/{{{{item_id}}}}
  headers: {{X-Key: "{{{{key}}}}"}}
outputs:
  id: {{type: string, path: data.id}}
  status: {{type: string, path: data.status}}
---
# Fetcher
"""
SAMPLE = {"source": "https://docs.example.com/items", "status": 200,
          "body": {"data": {"id": KEY, "status": "READY"}}}  # fmt: skip
FAILING = {"source": "run 1", "status": 503, "body": {"error": "busy"}}
CASES = """\
cases:
  - name: ready
    inputs: {item_id: x}
    sample: item
    expect:
      - json_equals: {id: "{{input.key}}", status: READY}
  - name: busy
    inputs: {item_id: x}
    sample: busy
    expect:
      - is_error: true
      - contains: HTTP 503
"""


@pytest.fixture
def offline(settings, monkeypatch):
    settings.ALLOWED_HOSTS = ["console.test"]
    settings.TOOL_NETWORK_ALLOW = "127.0.0.1:9"
    tried: list[object] = []

    def refuse(*args, **kwargs):
        tried.append(args)
        raise AssertionError(f"an offline replay opened a connection: {args!r}")

    yield lambda: (
        monkeypatch.setattr(socket.socket, "connect", refuse),
        monkeypatch.setattr(socket.socket, "connect_ex", refuse),
        monkeypatch.setattr(socket, "create_connection", refuse),
        monkeypatch.setattr(socket, "getaddrinfo", refuse),
    )
    assert tried == []


def fetcher(user):
    files = {
        "TOOL.md": TOOLMD.encode(),
        "samples/item.json": json.dumps(SAMPLE).encode(),
        "samples/busy.json": json.dumps(FAILING).encode(),
    }
    cases = CASES
    sealed = case_secrets.seal({"key": KEY}, tool="fetcher", user=user)["key"]
    cases = cases.replace(
        "    sample: item\n", f"    sealed: {{key: {sealed}}}\n    sample: item\n"
    )
    files["cases.yaml"] = cases.encode()
    return save_version("fetcher", files, actor=Actor.system()).version


@pytest.mark.django_db
def test_it_answers_from_the_sample_through_mapping_and_redaction(offline, developer):
    replay._PARSED.clear()
    version = fetcher(developer)
    check = replay.start_check(
        version, actor=Actor(user=developer), via=RunVia.BROWSER, enqueue=False
    )
    runs = {c.name: c.run for c in check.case_runs.select_related("run")}
    assert runs["ready"].replay_sample == "item" and runs["busy"].replay_sample == "busy"
    offline()
    for run in runs.values():
        execute.execute_run(run.pk)
    check = replay.refresh(check)

    assert check.status == CheckStatus.PASSED, replay.check_json(check)
    ready = Run.objects.get(pk=runs["ready"].pk)
    assert ready.status == RunStatus.SUCCEEDED
    # The sealed key was in the sample's body: redacted like a live answer's.
    assert ready.result["structuredContent"] == {"id": "{{input.key}}", "status": "READY"}
    assert KEY not in json.dumps(ready.result) and KEY not in json.dumps(ready.response)
    assert "offline" in ready.network_policy and any("offline" in n for n in ready.notices)
    busy = Run.objects.get(pk=runs["busy"].pk)
    assert busy.status == RunStatus.FAILED and busy.result["isError"]


@pytest.mark.django_db
def test_a_run_with_a_sample_the_version_lacks_fails_without_the_network(offline, developer):
    replay._PARSED.clear()
    version = fetcher(developer)
    run = run_start.start_run(
        version, {"item_id": "x"}, actor=Actor(user=developer), via=RunVia.BROWSER,
        enqueue=False, replay_sample="nope",
    )  # fmt: skip
    offline()
    run = execute.execute_run(run.pk)
    assert run.status == RunStatus.FAILED
    assert "samples/nope.json" in run.result["content"][0]["text"]
