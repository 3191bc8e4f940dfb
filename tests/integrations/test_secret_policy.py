"""Who may use a secret (docs/security.md, tools_app/integrations/policy.py).

A draft that declares `integrations: [apify]` must not receive apify's token just because
a developer ran it; the published version does, whoever runs it. Every check that a run
received (or did not receive) a value asks the tool itself, from inside a real run."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from tests.support import integrations as support
from tests.support import require, tool_files
from tests.support.agent_api import agent_client, reset_api_caches
from tests.support.forms import link, submit
from tests.support.worker import wait_for_run
from tools_app.audit import Actor
from tools_app.catalog.versions import publish_version, save_version
from tools_app.integrations.policy import set_allow_test_runs
from tools_app.models import AuditEvent, Integration, Run, ToolVersion
from tools_app.models.runs import FINISHED, RunStatus, RunVia
from tools_app.runner import isolation_level
from tools_app.runs import execute as run_execute
from tools_app.runs import start

pytestmark = pytest.mark.django_db

fast_passwords = support.fast_passwords

TOKEN = "apify-secret-7f3c2a9e41d8b605"
PROBE_PY = """
import os

def execute(tool_call_id, params, signal, on_update):
    state = "set" if os.environ.get("APIFY_TOKEN") else "unset"
    return {"content": [{"type": "text", "text": "APIFY_TOKEN " + state}]}
"""


def save(name: str, *, publish: bool, note: str) -> ToolVersion:
    files = tool_files(
        name, "python", PROBE_PY, integrations=["apify"], description=f"Probe {note}."
    )
    result = save_version(name, files, actor=Actor.system(), publish=publish)
    return result.version


@pytest.fixture
def apify(db) -> Integration:
    return support.create("apify", secrets={"token": TOKEN})


@pytest.fixture
def probe(apify) -> tuple[ToolVersion, ToolVersion]:
    """(published v1, draft v2) of a tool that says whether it received APIFY_TOKEN."""
    published = save("probe", publish=True, note="one")
    draft = save("probe", publish=False, note="two")
    assert draft.number == 2 and draft.tool.published_version_id == published.pk
    return published, draft


def real_run(version: ToolVersion, *, user=None, via: str = RunVia.BROWSER, token=None) -> Run:
    run = start.start_run(version, {}, actor=Actor(user=user, token=token), via=via, enqueue=False)
    finished = run_execute.execute_run(run.pk)
    assert finished is not None and finished.status == RunStatus.SUCCEEDED, finished.result
    return finished


def said(run: Run) -> str:
    return run.result["content"][0]["text"]


def test_it_withholds_an_integration_from_a_developers_draft_run(probe, developer):
    _published, draft = probe

    run = real_run(draft, user=developer)

    assert said(run) == "APIFY_TOKEN unset"
    assert len(run.notices) == 1
    notice = run.notices[0]
    assert "'apify' was withheld" in notice
    assert "version 2 is not the published version" in notice
    assert "allow test runs" in notice
    assert TOKEN not in json.dumps([run.result, run.notices, run.stderr_tail])


def test_the_run_form_and_tool_page_say_which_integration_is_withheld(
    probe, developer_client, console_admin_client
):
    form = developer_client.get(reverse("tool_run", args=["probe"]) + "?version=2")
    page = developer_client.get(reverse("tool", args=["probe"]) + "?version=2")
    for response in (form, page):
        html = response.content.decode()
        assert response.status_code == 200
        assert "withheld" in html and "<code>apify</code>" in html
        assert "does not allow test runs" in html

    published_form = developer_client.get(reverse("tool_run", args=["probe"])).content.decode()
    assert "withheld" not in published_form
    assert "the published version: an admin approved this code" in published_form
    admin_form = console_admin_client.get(reverse("tool_run", args=["probe"]) + "?version=2")
    assert "withheld" not in admin_form.content.decode()
    assert "started by an admin" in admin_form.content.decode()


def test_it_gives_a_draft_run_the_integration_once_an_admin_allows_test_runs(
    probe, developer, developer_client, console_admin
):
    _published, draft = probe
    set_allow_test_runs(
        Integration.objects.get(slug="apify"), True, actor=Actor(user=console_admin)
    )

    run = real_run(draft, user=developer)

    assert said(run) == "APIFY_TOKEN set"
    assert run.notices == []
    form = developer_client.get(reverse("tool_run", args=["probe"]) + "?version=2")
    assert "withheld" not in form.content.decode()
    assert "the integration allows test runs" in form.content.decode()


def test_an_admins_run_of_the_draft_gets_the_integration(probe, console_admin):
    _published, draft = probe

    assert said(real_run(draft, user=console_admin)) == "APIFY_TOKEN set"


def test_a_developers_run_of_the_published_version_gets_the_integration(probe, developer):
    published, _draft = probe

    assert said(real_run(published, user=developer)) == "APIFY_TOKEN set"


def test_the_policy_is_decided_when_the_run_starts(probe, developer, console_admin):
    """A run queued while test runs were allowed loses the value if the admin switches
    them off before it starts."""
    _published, draft = probe
    apify = Integration.objects.get(slug="apify")
    set_allow_test_runs(apify, True, actor=Actor(user=console_admin))
    run = start.start_run(draft, {}, actor=Actor(user=developer), via=RunVia.BROWSER, enqueue=False)
    set_allow_test_runs(apify, False, actor=Actor(user=console_admin))

    assert said(run_execute.execute_run(run.pk)) == "APIFY_TOKEN unset"


def test_a_version_that_is_no_longer_published_counts_as_a_draft(probe, developer, settings):
    """An agent may pin an older published version; it runs, without the credentials."""
    published, draft = probe
    publish_version(draft, actor=Actor.system())
    reset_api_caches()
    agent = agent_client("tools:invoke")

    answer = agent.post(
        reverse("api:tool_invoke", args=["probe"]),
        {"params": {}, "version": published.number},
        content_type="application/json",
    )

    assert answer.status_code == 202
    run = run_execute.execute_run(answer.json()["run"])
    assert said(run) == "APIFY_TOKEN unset"
    assert "'apify' was withheld" in run.notices[0]
    # The published one (now v2) gets it through the API.
    answer = agent.post(
        reverse("api:tool_invoke", args=["probe"]), {"params": {}}, content_type="application/json"
    )
    assert said(run_execute.execute_run(answer.json()["run"])) == "APIFY_TOKEN set"


def test_agents_cannot_invoke_a_draft(probe):
    reset_api_caches()
    agent = agent_client("tools:invoke")

    answer = agent.post(
        reverse("api:tool_invoke", args=["probe"]),
        {"params": {}, "version": 2},
        content_type="application/json",
    )

    assert answer.status_code == 404
    assert not Run.objects.exists()


def test_run_tool_counts_as_an_admin(probe):
    """`run_tool` is an operator on the console's host, who can read the keys anyway."""
    out, err = io.StringIO(), io.StringIO()

    call_command("run_tool", "probe", "--version", "2", stdout=out, stderr=err)

    assert json.loads(out.getvalue())["content"][0]["text"] == "APIFY_TOKEN set"


def test_the_switch_is_audited_and_only_admins_flip_it(
    probe, console_admin_client, developer_client
):
    url = reverse("integration_test_runs", args=["apify"])
    integration_page = reverse("integration", args=["apify"])

    # A developer is not offered the switch; a forged POST is refused.
    assert developer_client.post(url, {"allow": "on"}).status_code == 403
    assert not Integration.objects.get(slug="apify").allow_test_runs

    page = console_admin_client.get(integration_page).content.decode()
    allow = submit(console_admin_client, link(page, "Allow test runs…"), button="Allow test runs")
    assert allow.status_code == 302
    assert Integration.objects.get(slug="apify").allow_test_runs
    page = console_admin_client.get(integration_page).content.decode()
    confirm = link(page, "Stop allowing test runs…")
    assert (
        submit(console_admin_client, confirm, button="Stop allowing test runs").status_code == 302
    )
    assert not Integration.objects.get(slug="apify").allow_test_runs

    events = AuditEvent.objects.filter(action="integration.allow_test_runs").order_by("pk")
    assert [(e.actor, e.data) for e in events] == [
        ("ada", {"allow_test_runs": True}),
        ("ada", {"allow_test_runs": False}),
    ]


def test_django_admin_shows_and_flips_the_switch_audited(probe, console_admin):
    console_admin.is_staff = console_admin.is_superuser = True
    console_admin.save()
    staff = Client()
    staff.force_login(console_admin)
    apify = Integration.objects.get(slug="apify")
    url = reverse("admin:tools_app_integration_change", args=[apify.pk])
    assert "allow_test_runs" in staff.get(url).content.decode()

    # Name it, tick "allow test runs" on the change page and press Save (the read-only inline of
    # secret fields posts its management form, as rendered).
    changes = {"label": "Apify", "allow_test_runs": "on"}
    response = submit(staff, url, changes, form_id="integration_form",
                      button="Save")  # fmt: skip

    assert response.status_code == 302
    apify.refresh_from_db()
    assert apify.allow_test_runs and apify.label == "Apify"
    event = AuditEvent.objects.get(action="integration.allow_test_runs")
    assert event.actor == console_admin.username and event.data == {"allow_test_runs": True}
    assert AuditEvent.objects.filter(action="admin.change", target_id=str(apify.pk)).exists()


@pytest.mark.worker
def test_browser_runs_through_the_celery_worker_follow_the_policy(
    worker, developer_client, console_admin_client
):
    """The whole browser path: the run form, the queue, a real worker, the sandbox."""
    support.create("apify", secrets={"token": TOKEN})
    save("probe", publish=True, note="one")
    save("probe", publish=False, note="two")
    url = reverse("tool_run", args=["probe"]) + "?version=2"
    results = {}
    for who, client in (("developer", developer_client), ("admin", console_admin_client)):
        response = submit(client, url, form_id="run-form")
        assert response.status_code == 302, response.content
        run = Run.objects.get(pk=response["Location"].rstrip("/").rsplit("/", 1)[-1])
        run = wait_for_run(run.pk, FINISHED, worker=worker)
        results[who] = (said(run), run.notices)

    assert results["developer"][0] == "APIFY_TOKEN unset"
    assert "'apify' was withheld" in results["developer"][1][0]
    assert results["admin"] == ("APIFY_TOKEN set", [])


READ_PY = """
import os

def execute(tool_call_id, params, signal, on_update):
    path = params["path"]
    try:
        with open(path) as f:
            text = "READ " + f.read()
    except OSError as exc:
        text = "DENIED " + type(exc).__name__
    state = "set" if os.environ.get("EMAIL_DB_PATH") else "unset"
    return {"content": [{"type": "text", "text": f"{text}; EMAIL_DB_PATH {state}"}]}
"""


def test_a_withheld_integration_binds_no_path_either(tmp_path, developer):
    """An integration's `path` field is a credential too: a withheld one is not bound."""
    require(isolation_level()[0] != "bwrap", "binds exist only under bubblewrap")
    shared = tmp_path / "mail"
    shared.mkdir()
    (shared / "archive.txt").write_text("private mail")
    for path in (tmp_path, shared, shared / "archive.txt"):
        path.chmod(0o755)
    support.create("email_db", values={"path": str(shared)})
    inputs = {"path": {"type": "string", "description": "A file to read."}}
    files = tool_files("mailer", "python", READ_PY, integrations=["email_db"], inputs=inputs)
    published = save_version("mailer", files, actor=Actor.system(), publish=True).version
    files["TOOL.md"] = files["TOOL.md"].replace(b"The mailer tool.", b"The mailer tool, v2.")
    draft = save_version("mailer", files, actor=Actor.system()).version
    params = {"path": str(shared / "archive.txt")}

    def read(version):
        run = start.start_run(
            version, params, actor=Actor(user=developer), via=RunVia.BROWSER, enqueue=False
        )
        return said(run_execute.execute_run(run.pk))

    assert read(published) == "READ private mail; EMAIL_DB_PATH set"
    assert read(draft) == "DENIED FileNotFoundError; EMAIL_DB_PATH unset"
