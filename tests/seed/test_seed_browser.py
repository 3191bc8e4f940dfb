"""The seed `browser` tool (seed/tools/browser) through the real worker and sandbox, against
a real Chromium started here with a remote debugging port and a local page server (a
stand_in: Chromium, outside the sandbox, loads the pages from it).

The tool reaches the browser only because the `browser` integration names its endpoint,
and reaches nothing else: the `browser` type confines a run's egress to that exact host
and port (docs/egress.md), public addresses included.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.urls import reverse

from tests.support import egress as egress_support
from tests.support import require
from tests.support.stand_in import Answer, Reply, Request
from tests.support.worker import wait_for_run
from tools_app.audit import Actor
from tools_app.catalog import bundle
from tools_app.catalog.versions import save_version
from tools_app.integrations.service import create_integration
from tools_app.models import Run, Tool
from tools_app.models.runs import FINISHED, RunStatus, RunVia
from tools_app.runs import artifacts as run_artifacts
from tools_app.runs import cancel
from tools_app.runs import start as run_start

SEED = Path(__file__).resolve().parents[2] / "seed" / "tools"
CHROMIUM = "/usr/bin/chromium"
AUTH = "Authorization: Bearer cdp-relay-s3cr3t-7c1e"  # distinctive: must never be shown
SECRET = "cdp-relay-s3cr3t-7c1e"

FORM_HTML = """<!doctype html>
<html><head><title>Sign up</title></head><body>
<h1>Sign up</h1>
<form onsubmit="return false">
<label>Name <input id="name"></label>
<label>Plan <select id="plan"><option value="free">Free</option>
<option value="pro">Pro</option></select></label>
<button type="button" onclick="document.getElementById('out').textContent =
  'Welcome ' + document.getElementById('name').value + ' on ' +
  document.getElementById('plan').value">Create account</button>
</form>
<p id="out"></p>
<button type="button" onclick="this.remove()">Vanish</button>
</body></html>
"""
OTHER_HTML = "<!doctype html><title>Other</title><h1>Other page</h1><a href='/form'>Back</a>"

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@dataclass
class Pages:
    """The local page server; /hang sends headers and never finishes the body (until the
    test ends)."""

    base: str


def page_answer(release: threading.Event) -> Answer:
    def hanging() -> Iterator[bytes]:
        yield b"<!doctype html><title>Hanging</title><p>loading"
        release.wait(60)

    def answer(request: Request) -> Reply:
        if request.path == "/hang":
            return Reply(200, hanging(), "text/html", length=100000)
        body = {"/form": FORM_HTML, "/other": OTHER_HTML}.get(request.path)
        data = (body or "<h1>Not found</h1>").encode()
        return Reply(200 if body else 404, data, "text/html; charset=utf-8")

    return answer


@dataclass
class Chromium:
    proc: subprocess.Popen
    port: int

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _start_chromium(profile: Path) -> Chromium:
    args = [CHROMIUM, "--headless=new", "--remote-debugging-port=0", f"--user-data-dir={profile}"]
    args += ["--no-first-run", "--no-default-browser-check", "--disable-gpu"]
    if os.geteuid() == 0:
        args.append("--no-sandbox")  # Chromium refuses to run as root with its own sandbox
    proc = subprocess.Popen(
        [*args, "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if port_file.is_file() and (lines := port_file.read_text().splitlines()):
            return Chromium(proc, int(lines[0]))
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with {proc.returncode}")
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("chromium wrote no DevToolsActivePort within 60 s")


@pytest.fixture(scope="module")
def chromium(tmp_path_factory) -> Iterator[Chromium]:
    require(not os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is missing (apt-get install chromium)")
    require(shutil.which("bwrap") is None, "bubblewrap is missing (apt-get install bubblewrap)")
    browser = _start_chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield browser
    os.killpg(browser.proc.pid, 15)
    browser.proc.wait(timeout=30)


@pytest.fixture
def pages(stand_in) -> Iterator[Pages]:
    release = threading.Event()
    yield Pages(stand_in(page_answer(release)).url)
    release.set()  # before stand_in closes the server


@pytest.fixture(scope="module")
def hosts() -> Iterator[egress_support.EgressHosts]:
    """A "public" host (a network namespace of the test's, tests/support/egress.py)."""
    with egress_support.test_hosts() as made:
        yield made


@pytest.fixture
def browser_tool(worker, chromium) -> Tool:
    create_integration(
        "browser",
        "browser",
        actor=Actor.system(),
        values={"endpoint": chromium.endpoint},
        secrets={"auth_header": AUTH},
    )
    save_version("browser", bundle.read_tool_dir(SEED / "browser"), actor=Actor.system(),
                 publish=True)  # fmt: skip
    return Tool.objects.get(name="browser")


def start(tool: Tool, params: dict) -> Run:
    return run_start.start_run(tool.published_version, params, actor=Actor.system(), via=RunVia.API)


def call(tool: Tool, params: dict, worker) -> Run:
    return wait_for_run(start(tool, params).pk, FINISHED, timeout=120, worker=worker)


def text(run: Run) -> str:
    return "\n".join(item["text"] for item in run.result["content"])


def ok(tool: Tool, params: dict, worker) -> str:
    run = call(tool, params, worker)
    assert run.status == RunStatus.SUCCEEDED, (run.result, run.stderr_tail, run.notices)
    assert run.isolation == "bwrap"
    return text(run)


def ref_of(snapshot: str, line_part: str) -> str:
    line = next(ln for ln in snapshot.splitlines() if line_part in ln)
    return line.split("[ref=")[1].split("]")[0]


def test_it_navigates_snapshots_clicks_types_and_reads_the_result(browser_tool, pages, worker):
    assert "Navigated tab" in ok(browser_tool, {"action": "navigate", "url": f"{pages.base}/form"},
                                 worker)  # fmt: skip
    snapshot = ok(browser_tool, {"action": "snapshot"}, worker)
    assert '"Sign up"' in snapshot and 'heading "Sign up" [level=1]' in snapshot
    name, plan = ref_of(snapshot, 'textbox "Name"'), ref_of(snapshot, 'combobox "Plan"')
    button = ref_of(snapshot, 'button "Create account"')

    assert "Typed 12 characters" in ok(browser_tool, {"action": "type", "ref": name,
                                                      "text": "Ada Lovelace"}, worker)  # fmt: skip
    assert '"pro"' in ok(browser_tool, {"action": "select", "ref": plan, "values": ["Pro"]}, worker)
    assert f"Clicked {button}" in ok(browser_tool, {"action": "click", "ref": button}, worker)
    read = ok(browser_tool, {"action": "extract_text", "selector": "#out"}, worker)
    assert read.endswith("Welcome Ada Lovelace on pro")
    waited = ok(browser_tool, {"action": "wait_for", "text": "Welcome Ada"}, worker)
    assert "is visible" in waited

    # Scoped and paginated, with an explicit marker and the whole snapshot as an artifact.
    scoped = ok(browser_tool, {"action": "snapshot", "selector": "form"}, worker)
    assert "Sign up" not in scoped.split("\n", 1)[1] and 'button "Create account"' in scoped
    run = call(browser_tool, {"action": "snapshot", "max_chars": 200}, worker)
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert "[truncated: page 1 of " in text(run) and "call again with page=2" in text(run)
    assert run.artifacts.filter(name="snapshot.txt").exists()


def test_it_saves_a_screenshot_as_a_png_artifact(browser_tool, pages, worker):
    ok(browser_tool, {"action": "navigate", "url": f"{pages.base}/form"}, worker)
    run = call(browser_tool, {"action": "screenshot"}, worker)
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert "as the run artifact screenshot-tab" in text(run) and " px, " in text(run)
    artifact = run.artifacts.get(name__endswith=".png")
    with run_artifacts.open_artifact(artifact) as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_it_refuses_a_ref_from_an_older_snapshot(browser_tool, pages, worker):
    ok(browser_tool, {"action": "navigate", "url": f"{pages.base}/form"}, worker)
    first = ok(browser_tool, {"action": "snapshot"}, worker)
    vanish = ref_of(first, 'button "Vanish"')
    name = ref_of(first, 'textbox "Name"')
    ok(browser_tool, {"action": "click", "ref": vanish}, worker)
    second = ok(browser_tool, {"action": "snapshot"}, worker)
    assert ref_of(second, 'textbox "Name"') == name  # an element keeps its ref

    run = call(browser_tool, {"action": "click", "ref": vanish}, worker)
    assert run.status == RunStatus.FAILED
    assert text(run).startswith("Error: stale ref: take a new snapshot")
    # A new document: every earlier ref is stale.
    ok(browser_tool, {"action": "navigate", "url": f"{pages.base}/other"}, worker)
    run = call(browser_tool, {"action": "type", "ref": name, "text": "x"}, worker)
    assert run.status == RunStatus.FAILED and "stale ref: take a new snapshot" in text(run)


def test_it_keeps_evaluate_off_unless_the_integration_allows_it(browser_tool, pages, worker):
    run = call(browser_tool, {"action": "evaluate", "expression": "1 + 1"}, worker)
    assert run.status == RunStatus.FAILED and "evaluate is off" in text(run)


def tab_index(listing: str, title: str) -> int:
    line = next(ln for ln in listing.splitlines() if f': "{title}"' in ln)
    return int(line.split("tab ")[1].split(":")[0])


def test_it_lists_opens_and_switches_tabs(browser_tool, pages, worker):
    ok(browser_tool, {"action": "navigate", "url": f"{pages.base}/form"}, worker)
    opened = ok(browser_tool, {"action": "tabs", "tab_action": "open",
                               "url": f"{pages.base}/other"}, worker)  # fmt: skip
    assert any(ln.startswith("* tab") and '"Other"' in ln for ln in opened.splitlines())
    assert "Other page" in ok(browser_tool, {"action": "extract_text"}, worker)
    # Indices hold between calls (each call is a new connection).
    assert (
        ok(browser_tool, {"action": "tabs"}, worker).split("\n", 1)[1] == opened.split("\n", 1)[1]
    )
    form = tab_index(opened, "Sign up")
    switched = ok(browser_tool, {"action": "tabs", "tab_action": "switch", "tab": form}, worker)
    assert f'* tab {form}: "Sign up"' in switched
    assert "Sign up" in ok(browser_tool, {"action": "extract_text"}, worker)
    closed = ok(browser_tool, {"action": "tabs", "tab_action": "close",
                               "tab": tab_index(opened, "Other")}, worker)  # fmt: skip
    assert '"Other"' not in closed and '"Sign up"' in closed


def test_cancel_stops_a_navigation_that_never_finishes(browser_tool, pages, worker):
    run = start(browser_tool, {"action": "navigate", "url": f"{pages.base}/hang", "timeout": 100})
    deadline = time.monotonic() + 60
    while not run.updates.filter(content__icontains="navigating to").exists():
        assert time.monotonic() < deadline, Run.objects.get(pk=run.pk).result
        time.sleep(0.1)
    assert cancel.cancel_run(Run.objects.get(pk=run.pk), Actor.system())
    run = wait_for_run(run.pk, FINISHED, timeout=60, worker=worker)
    assert run.status == RunStatus.CANCELLED
    # The browser is still usable.
    assert "Navigated tab" in ok(browser_tool, {"action": "navigate",
                                                "url": f"{pages.base}/other"}, worker)  # fmt: skip


def pointed_at(endpoint: str, *, declares: bool = True) -> dict[str, bytes]:
    """The tool as shipped, but connecting to `endpoint` whatever the integration says (a
    developer's edit); without the integration when not `declares`."""
    files = bundle.read_tool_dir(SEED / "browser")
    source = files["index.ts"].decode()
    files["index.ts"] = source.replace(
        "str(process.env.BROWSER_CDP_URL)", json.dumps(endpoint)
    ).encode()
    if not declares:
        files["TOOL.md"] = files["TOOL.md"].replace(b"integrations: [browser]\n", b"")
    return files


def publish(files: dict[str, bytes]) -> Tool:
    save_version("browser", files, actor=Actor.system(), publish=True)
    return Tool.objects.get(name="browser")


def test_egress_refuses_a_cdp_host_the_integration_does_not_name(worker, chromium, tmp_path):
    # The integration names another port: the real browser's port is not reachable.
    other = _start_chromium(tmp_path / "other-profile")
    try:
        create_integration("browser", "browser", actor=Actor.system(),
                           values={"endpoint": other.endpoint})  # fmt: skip
        run = call(publish(pointed_at(chromium.endpoint)), {"action": "tabs"}, worker)
        assert run.status == RunStatus.FAILED
        assert "Error: could not connect to the browser at 127.0.0.1:" in text(run)
        assert "ECONNREFUSED" in text(run)
        # The endpoint the integration names is reachable.
        tool = publish(pointed_at(other.endpoint))
        assert "Tabs (* is the current one)" in ok(tool, {"action": "tabs"}, worker)
    finally:
        os.killpg(other.proc.pid, 15)
        other.proc.wait(timeout=30)


def test_egress_confines_the_tool_to_the_cdp_endpoint(browser_tool, chromium, hosts, worker):
    # A public address, open to other tools, is not open to a run given the browser's
    # endpoint and auth header: an edited tool cannot send them anywhere else.
    public = f"http://{hosts.public}:80"
    run = call(publish(pointed_at(public)), {"action": "tabs"}, worker)
    assert run.status == RunStatus.FAILED
    assert f"could not connect to the browser at {hosts.public}" in text(run)
    assert "ECONNREFUSED" in text(run), text(run)
    assert "the integration browser confines this run's network" in run.network_policy
    # Without the integration (so without its endpoint and header) the same edit reaches
    # the public host: its answer is no DevTools JSON. The refusal above is the confinement.
    run = call(publish(pointed_at(public, declares=False)), {"action": "tabs"}, worker)
    assert run.status == RunStatus.FAILED
    assert "ECONNREFUSED" not in text(run) and "is not valid JSON" in text(run), text(run)
    assert "confines" not in run.network_policy
    # The endpoint the integration names stays reachable.
    tool = publish(pointed_at(chromium.endpoint))
    assert "Tabs (* is the current one)" in ok(tool, {"action": "tabs"}, worker)


def test_the_auth_header_never_appears_in_run_records_or_pages(
    browser_tool, pages, worker, console_admin_client
):
    run = call(browser_tool, {"action": "navigate", "url": f"{pages.base}/form"}, worker)
    failed = call(browser_tool, {"action": "click", "ref": "e999"}, worker)
    for one in (run, failed):
        record = json.dumps(
            [one.result, one.stderr_tail, one.notices, list(one.updates.values_list("content"))]
        )
        assert SECRET not in record
        page = console_admin_client.get(reverse("run", args=[one.pk]))
        assert page.status_code == 200 and SECRET not in page.content.decode()
    integration_page = console_admin_client.get(reverse("integrations"))
    assert integration_page.status_code == 200 and SECRET not in integration_page.content.decode()
