"""Who receives a sensitive preset (tools_app/catalog/presets.py): the integrations' secret policy
(docs/security.md). An admin's sensitive preset for a published tool's `user-only`
input must not reach a draft a developer saved to declare the same input; the published
version, an admin's run and `run_tool` get it, and a draft gets it once an admin allows
test runs for the tool's presets. Whether a run received the value is asked of the tool
itself, from inside a real run: it answers with the value's SHA-256 (never the value) and
writes the value, spaced out, into an artifact."""

from __future__ import annotations

import hashlib
import io
import json
import uuid

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from tests.support import tool_files
from tests.support.agent_api import agent_client, reset_api_caches
from tests.support.forms import link, submit
from tests.support.integrations import fake_provider, send_json  # noqa: F401
from tools_app.api import mcp as mcp_server
from tools_app.audit import Actor
from tools_app.catalog.versions import publish_version, save_version
from tools_app.models import (
    AgentToken,
    AuditEvent,
    Run,
    RunArtifact,
    Tool,
    ToolPreset,
    ToolVersion,
)
from tools_app.models.runs import RunStatus, RunVia
from tools_app.models.tokens import Scope
from tools_app.runs import execute as run_execute
from tools_app.runs import start

pytestmark = pytest.mark.django_db

CANARY = f"Canary-Preset-{uuid.uuid4().hex}"
SPACED = " ".join(CANARY.lower())
GOT = f"api_key sha256:{hashlib.sha256(CANARY.encode()).hexdigest()}; region eu"
NOT_GOT = "api_key unset; region eu"

# What a hostile draft does with a preset it receives: says it (hashed, so the test can
# tell without the value in the result) and writes it where a developer can download it.
PROBE_PY = """
import hashlib, os

def execute(tool_call_id, params, signal, on_update):
    key = params.get("api_key")
    with open(os.path.join(os.environ["TOOL_OUTPUT_DIR"], "got.txt"), "w") as f:
        f.write(" ".join(key.lower()) if key else "nothing")
    got = "sha256:" + hashlib.sha256(key.encode()).hexdigest() if key else "unset"
    text = f"api_key {got}; region {params.get('region')}"
    return {"content": [{"type": "text", "text": text}]}
"""
INPUTS = {
    "api_key": {
        "type": "string",
        "description": "The provider's key.",
        "visibility": "user-only",
        "optional": True,
    },
    "region": {"type": "string", "description": "Region.", "visibility": "user-only"},
}


def save(*, publish: bool, note: str, inputs: dict | None = None) -> ToolVersion:
    files = tool_files(
        "keyed", "python", PROBE_PY, inputs=inputs or INPUTS, description=f"Keyed {note}."
    )
    return save_version("keyed", files, actor=Actor.system(), publish=publish).version


def set_presets(client: Client) -> None:
    for name, value, sensitive in (("api_key", CANARY, "on"), ("region", "eu", None)):
        changes = {"input": name, "value": value, "sensitive": sensitive}
        response = submit(client, "/tools/keyed/presets/", changes, button="Save preset")
        assert response.status_code == 302, response.content.decode()


@pytest.fixture
def keyed(console_admin_client) -> tuple[ToolVersion, ToolVersion]:
    """(published v1, a developer's draft v2 declaring the same inputs), with an admin's
    sensitive preset for api_key and a plain one for region."""
    published = save(publish=True, note="one")
    set_presets(console_admin_client)
    draft = save(publish=False, note="two")
    assert draft.number == 2 and draft.tool.published_version_id == published.pk
    return published, draft


def real_run(version: ToolVersion, *, user=None, via: str = RunVia.BROWSER) -> Run:
    run = start.start_run(version, {}, actor=Actor(user=user), via=via, enqueue=False)
    return finished(run)


def finished(run: Run) -> Run:
    done = run_execute.execute_run(run.pk)
    assert done is not None and done.status == RunStatus.SUCCEEDED, (done.result, done.error)
    return done


def said(run: Run) -> str:
    return run.result["content"][0]["text"]


def artifact(run: Run) -> bytes:
    return bytes(RunArtifact.objects.get(run=run, name="got.txt").content)


def assert_no_canary(*texts: str) -> None:
    for text in texts:
        assert CANARY not in text and CANARY.lower() not in text and SPACED not in text


def test_it_withholds_a_sensitive_preset_from_a_developers_draft_run(
    keyed, developer, developer_client
):
    _published, draft = keyed

    run = real_run(draft, user=developer)

    assert said(run) == NOT_GOT  # the plain preset still arrives
    assert artifact(run) == b"nothing"
    withheld = [n for n in run.notices if "withheld" in n]
    assert withheld == [
        "The sensitive preset for api_key was withheld from this run: version 2 is not the "
        "published version, the run is not started by an admin, and keyed does not allow "
        "test runs with its sensitive presets (an admin can allow them on the tool's Presets "
        "page, run this version, or publish it)."
    ]
    assert "Filled from the tool's presets: region." in run.notices
    page = developer_client.get(reverse("run", args=[run.pk])).content.decode()
    assert "The sensitive preset for api_key was withheld from this run" in page
    stored = json.dumps([run.params, run.result, run.notices, run.stderr_tail, run.error])
    assert_no_canary(page, stored, artifact(run).decode())


def test_the_run_form_names_the_withheld_presets(keyed, developer_client, console_admin_client):
    tool_page = developer_client.get(reverse("tool", args=["keyed"]) + "?version=2")
    assert "Presets withheld from this run: <code>api_key</code>." in tool_page.content.decode()
    form = developer_client.get(reverse("tool_run", args=["keyed"]) + "?version=2")
    html = form.content.decode()
    assert form.status_code == 200
    assert "Sensitive presets a run of version 2 by you receives" in html
    assert "Presets withheld from this run: <code>api_key</code>." in html
    assert "keyed does not allow test runs with its sensitive presets" in html
    assert "An admin&#x27;s sensitive preset is withheld from this run" in html
    # The plain preset still fills its field; the withheld one is not offered as filled.
    assert html.count("Preset by an admin: leave empty to use it.") == 1

    published = developer_client.get(reverse("tool_run", args=["keyed"])).content.decode()
    assert "withheld" not in published
    assert "the published version: an admin approved this code" in published
    admins = console_admin_client.get(reverse("tool_run", args=["keyed"]) + "?version=2")
    assert "withheld" not in admins.content.decode()
    assert "started by an admin" in admins.content.decode()
    assert_no_canary(html, published, admins.content.decode(), tool_page.content.decode())

    # Run from the form: the run page names the preset it did not get.
    response = submit(developer_client, reverse("tool_run", args=["keyed"]) + "?version=2",
                      form_id="run-form")  # fmt: skip
    assert response.status_code == 302, response.content.decode()
    run = finished(Run.objects.get())
    assert said(run) == NOT_GOT
    page = developer_client.get(response["Location"]).content.decode()
    assert "The sensitive preset for api_key was withheld from this run" in page
    assert_no_canary(page)


def test_a_developers_run_of_the_published_version_gets_the_preset(keyed, developer):
    published, _draft = keyed

    run = real_run(published, user=developer)

    assert said(run) == GOT
    assert not [n for n in run.notices if "withheld" in n]


def test_an_admins_run_of_the_draft_gets_the_preset(keyed, console_admin):
    _published, draft = keyed

    assert said(real_run(draft, user=console_admin)) == GOT


def test_run_tool_counts_as_an_admin(keyed):
    out = io.StringIO()

    call_command("run_tool", "keyed", "--version", "2", stdout=out, stderr=io.StringIO())

    assert json.loads(out.getvalue())["content"][0]["text"] == GOT


def test_a_draft_gets_the_preset_once_an_admin_allows_test_runs(
    keyed, developer, developer_client, console_admin_client
):
    _published, draft = keyed
    page = "/tools/keyed/presets/"
    allow = "Allow test runs with sensitive presets"
    # Only admins see the switch; a developer's forged POST is refused.
    url = reverse("tool_preset_test_runs", args=["keyed"])
    assert developer_client.post(url, {"allow": "on"}).status_code == 403
    assert not Tool.objects.get(name="keyed").presets_allow_test_runs

    confirm = link(console_admin_client.get(page).content.decode(), allow + "…")
    assert submit(console_admin_client, confirm, button="Allow test runs").status_code == 302
    run = real_run(draft, user=developer)
    assert said(run) == GOT
    assert not [n for n in run.notices if "withheld" in n]
    form = developer_client.get(reverse("tool_run", args=["keyed"]) + "?version=2")
    assert "the tool allows test runs with its sensitive presets" in form.content.decode()
    assert "withheld" not in form.content.decode()

    confirm = link(console_admin_client.get(page).content.decode(), "Stop allowing test runs…")
    assert (
        submit(console_admin_client, confirm, button="Stop allowing test runs").status_code == 302
    )
    assert said(real_run(draft, user=developer)) == NOT_GOT
    events = AuditEvent.objects.filter(action="tool.presets.allow_test_runs").order_by("pk")
    assert [(e.actor, e.data) for e in events] == [
        ("ada", {"allow_test_runs": True}),
        ("ada", {"allow_test_runs": False}),
    ]


def test_django_admin_shows_and_flips_the_switch_audited(keyed, console_admin):
    console_admin.is_staff = console_admin.is_superuser = True
    console_admin.save()
    staff = Client()
    staff.force_login(console_admin)
    tool = Tool.objects.get(name="keyed")
    url = reverse("admin:tools_app_tool_change", args=[tool.pk])
    assert "allow test runs with sensitive presets" in staff.get(url).content.decode().lower()

    response = submit(staff, url, {"presets_allow_test_runs": "on"}, form_id="tool_form",
                      button="Save")  # fmt: skip

    assert response.status_code == 302
    assert Tool.objects.get(name="keyed").presets_allow_test_runs
    event = AuditEvent.objects.get(action="tool.presets.allow_test_runs")
    assert event.actor == console_admin.username and event.data == {"allow_test_runs": True}


def test_the_policy_is_decided_when_the_run_executes(keyed, developer, console_admin):
    """A run queued while test runs were allowed loses the value if the admin stops them
    before it starts; so does a run a caller stored without going through start_run."""
    from tools_app.catalog import presets

    _published, draft = keyed
    tool = draft.tool
    presets.set_allow_test_runs(tool, True, actor=Actor(user=console_admin))
    run = start.start_run(draft, {}, actor=Actor(user=developer), via=RunVia.BROWSER, enqueue=False)
    presets.set_allow_test_runs(tool, False, actor=Actor(user=console_admin))
    assert said(finished(run)) == NOT_GOT

    forgot = Run.objects.create(tool=tool, version=draft, via=RunVia.BROWSER, user=developer)
    assert said(finished(forgot)) == NOT_GOT


def test_a_required_input_whose_preset_is_withheld_says_why(console_admin_client, developer):
    required = {**INPUTS, "api_key": {**INPUTS["api_key"], "optional": False}}
    save(publish=True, note="one", inputs=required)
    set_presets(console_admin_client)
    draft = save(publish=False, note="two", inputs=required)

    with pytest.raises(start.InvalidParams) as caught:
        start.start_run(draft, {}, actor=Actor(user=developer), via=RunVia.BROWSER, enqueue=False)

    [error] = caught.value.errors
    assert error.startswith(
        "api_key: is required (the tool's sensitive preset for it is withheld from this run: "
        "version 2 is not the published version"
    )
    assert_no_canary(error)
    # A value of the developer's own is theirs to use.
    run = start.start_run(draft, {"api_key": "mine"}, actor=Actor(user=developer),
                         via=RunVia.BROWSER, enqueue=False)  # fmt: skip
    assert said(finished(run)).startswith("api_key sha256:" + hashlib.sha256(b"mine").hexdigest())


def test_a_required_preset_withheld_after_the_run_was_queued_fails_the_run(
    console_admin_client, developer, console_admin
):
    """Allowed when the run started, stopped before it ran: the tool does not run without
    the input it requires, and the failure names the preset, not its value."""
    from tools_app.catalog import presets

    required = {**INPUTS, "api_key": {**INPUTS["api_key"], "optional": False}}
    save(publish=True, note="one", inputs=required)
    set_presets(console_admin_client)
    draft = save(publish=False, note="two", inputs=required)
    presets.set_allow_test_runs(draft.tool, True, actor=Actor(user=console_admin))
    run = start.start_run(draft, {}, actor=Actor(user=developer), via=RunVia.BROWSER, enqueue=False)
    presets.set_allow_test_runs(draft.tool, False, actor=Actor(user=console_admin))

    run = run_execute.execute_run(run.pk)

    assert run.status == RunStatus.FAILED
    assert run.error.startswith(
        "api_key: is required, and the tool's sensitive preset for it was withheld from this "
        "run: version 2 is not the published version"
    )
    assert not RunArtifact.objects.filter(run=run).exists()  # the tool never ran
    assert_no_canary(json.dumps([run.result, run.notices, run.error]))


def test_an_http_draft_does_not_send_a_withheld_preset(
    settings,
    fake_provider,  # noqa: F811 (the fixture imported above)
    console_admin_client,
    developer,
):
    """An http tool needs no code to leak: its request template sends the input to the
    host it names. A developer's draft of it gets no sensitive preset either."""
    settings.ALLOWED_HOSTS = ["testserver"]
    settings.TOOL_NETWORK_ALLOW = fake_provider.url.removeprefix("http://")
    fake_provider.handler = lambda request: send_json(request, {"ok": True})

    def save_http(note: str, *, publish: bool) -> ToolVersion:
        text = (
            f"---\nname: keyed\ndescription: Keyed {note}.\nkind: http\ninputs:\n"
            "  api_key: {type: string, description: Key, visibility: user-only, "
            "optional: true}\n"
            "  region: {type: string, description: Region, visibility: user-only}\n"
            f"request:\n  method: GET\n  url: {fake_provider.url}/find/{{{{region}}}}\n"
            '  headers: {X-Key: "{{api_key}}"}\n---\n# Keyed\n'
        )
        sample = {"source": "https://docs.example.com/x", "status": 200, "body": {"ok": True}}
        files = {"TOOL.md": text.encode(), "samples/x.json": json.dumps(sample).encode()}
        return save_version("keyed", files, actor=Actor.system(), publish=publish).version

    published = save_http("one", publish=True)
    set_presets(console_admin_client)
    draft = save_http("two", publish=False)

    real_run(draft, user=developer)
    assert fake_provider.last.path == "/find/eu"
    assert CANARY not in json.dumps(dict(fake_provider.last.headers))
    real_run(published, user=developer)
    assert fake_provider.last.headers["x-key"] == CANARY


def test_a_draft_cannot_make_a_sensitive_inputs_preset_plain(console_admin_client, developer):
    """The published version declares api_key sensitive; a developer's newer draft says it
    is not. The preset an admin then sets (on the latest version's inputs, "sensitive" not
    ticked) is still sealed, and still withheld from the draft."""
    sensitive = {**INPUTS, "api_key": {**INPUTS["api_key"], "sensitive": True}}
    save(publish=True, note="one", inputs=sensitive)
    draft = save(publish=False, note="two")
    changes = {"input": "api_key", "value": CANARY, "sensitive": None}
    response = submit(console_admin_client, "/tools/keyed/presets/", changes, button="Save preset")
    assert response.status_code == 302

    preset = ToolPreset.objects.get(input="api_key")
    assert preset.sensitive and preset.value is None and CANARY not in preset.ciphertext
    run = start.start_run(draft, {"region": "eu"}, actor=Actor(user=developer),
                         via=RunVia.BROWSER, enqueue=False)  # fmt: skip
    assert said(finished(run)) == NOT_GOT


def test_the_api_applies_the_policy(keyed):
    """An agent may pin an older published version: it counts as a draft."""
    published, draft = keyed
    publish_version(draft, actor=Actor.system())
    reset_api_caches()
    agent = agent_client("tools:invoke")
    invoke = reverse("api:tool_invoke", args=["keyed"])

    pinned = agent.post(invoke, {"params": {}, "version": published.number},
                        content_type="application/json")  # fmt: skip
    assert pinned.status_code == 202
    run = finished(Run.objects.get(pk=pinned.json()["run"]))
    assert said(run) == NOT_GOT
    answer = agent.get(reverse("api:run", args=[run.pk])).content.decode()
    assert "The sensitive preset for api_key was withheld from this run" in answer

    current = agent.post(invoke, {"params": {}}, content_type="application/json")
    assert said(finished(Run.objects.get(pk=current.json()["run"]))) == GOT
    assert_no_canary(pinned.content.decode(), answer, current.content.decode())


def test_mcp_applies_the_policy(keyed, console_admin):
    """MCP runs the published version: it gets the preset; once another version is
    published before the run starts, the queued run of the old one does not."""
    _published, draft = keyed
    token, _raw = AgentToken.issue("mcp-agent", [Scope.TOOLS_INVOKE])

    run = mcp_server.start("keyed", {}, token, "127.0.0.1")
    assert run.via == RunVia.MCP
    assert said(finished(run)) == GOT

    queued = mcp_server.start("keyed", {}, token, "127.0.0.1")
    publish_version(draft, actor=Actor(user=console_admin))
    assert said(finished(queued)) == NOT_GOT


@pytest.mark.worker
def test_browser_runs_through_the_celery_worker_follow_the_policy(
    worker, developer_client, console_admin_client
):
    """The whole browser path: the run form, the queue, a real worker, the sandbox."""
    from tests.support.worker import wait_for_run
    from tools_app.models.runs import FINISHED

    save(publish=True, note="one")
    set_presets(console_admin_client)
    save(publish=False, note="two")
    url = reverse("tool_run", args=["keyed"]) + "?version=2"
    results = {}
    for who, client in (("developer", developer_client), ("admin", console_admin_client)):
        response = submit(client, url, form_id="run-form")
        assert response.status_code == 302, response.content
        run = Run.objects.get(pk=response["Location"].rstrip("/").rsplit("/", 1)[-1])
        run = wait_for_run(run.pk, FINISHED, worker=worker)
        results[who] = (said(run), [n for n in run.notices if "withheld" in n])
        assert_no_canary(json.dumps([run.result, run.notices, run.stderr_tail]))

    assert results["developer"][0] == NOT_GOT
    assert results["developer"][1][0].startswith("The sensitive preset for api_key was withheld")
    assert results["admin"] == (GOT, [])
