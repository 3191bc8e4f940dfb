"""Who may download a run's artifacts (Run.can_download): the run's own starter (the same
person in the browser, the same agent token through the API) and admins. The reported
attack: a viewer downloaded an artifact holding another user's sensitive input and a
secret. The artifacts here come from real runs, so their content is redacted too."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tests.support import integrations as support
from tests.support import make_user
from tests.support.agent_api import agent_client, reset_api_caches
from tools_app.audit import Actor
from tools_app.models import Run, RunArtifact, Tool
from tools_app.models.runs import RunStatus, RunVia
from tools_app.roles import DEVELOPER
from tools_app.runs import execute as run_execute
from tools_app.runs import start

pytestmark = pytest.mark.django_db

fast_passwords = support.fast_passwords

CANARY = "canary-artifact-5d1e9b7c3a20f468"
NOTE_PY = """
import os

def execute(tool_call_id, params, signal, on_update):
    out = os.environ["TOOL_OUTPUT_DIR"]
    with open(os.path.join(out, "note.txt"), "w") as f:
        f.write("input " + params["note"] + "\\n" + "token " + os.environ["APIFY_TOKEN"] + "\\n")
    return {"content": [{"type": "text", "text": "wrote note.txt"}]}
"""
INPUTS = {"note": {"type": "string", "description": "A private note.", "sensitive": True}}


@pytest.fixture
def noter(make_tool) -> Tool:
    support.create("apify", secrets={"token": CANARY})
    return make_tool(
        "noter", language="python", source=NOTE_PY, inputs=INPUTS, integrations=["apify"]
    )


def real_run(tool: Tool, actor: Actor, via: str = RunVia.BROWSER) -> tuple[Run, RunArtifact]:
    run = start.start_run(
        tool.published_version, {"note": "my-private-note-77"}, actor=actor, via=via,
        enqueue=False,
    )  # fmt: skip
    run = run_execute.execute_run(run.pk)
    assert run.status == RunStatus.SUCCEEDED, run.result
    return run, run.artifacts.get()


def download(client: Client, run: Run, artifact: RunArtifact):
    return client.get(reverse("run_artifact", args=[run.pk, artifact.pk]))


def test_only_the_starter_and_admins_download_in_the_browser(
    noter, developer, developer_client, viewer_client, console_admin_client
):
    run, artifact = real_run(noter, Actor(user=developer))
    other_developer = Client()
    other_developer.force_login(make_user("otto", DEVELOPER))

    assert download(viewer_client, run, artifact).status_code == 403
    assert download(other_developer, run, artifact).status_code == 403
    assert download(developer_client, run, artifact).status_code == 200
    assert download(console_admin_client, run, artifact).status_code == 200
    # The viewer still sees the artifact's name, without a link.
    page = viewer_client.get(reverse("run", args=[run.pk])).content.decode()
    assert "note.txt" in page
    assert reverse("run_artifact", args=[run.pk, artifact.pk]) not in page
    assert "Only the person who started this run, or an admin" in page


def test_a_text_artifact_holding_the_canary_is_redacted(noter, developer, developer_client):
    run, artifact = real_run(noter, Actor(user=developer))

    response = download(developer_client, run, artifact)

    content = b"".join(response.streaming_content).decode()
    assert content == "input {{input.note}}\ntoken {{apify.token}}\n"
    assert CANARY not in content and "my-private-note-77" not in content


def test_only_the_starting_token_downloads_through_the_api(noter):
    reset_api_caches()
    starter = agent_client("tools:invoke", name="starter")
    stranger = agent_client("tools:invoke", name="stranger")
    answer = starter.post(
        reverse("api:tool_invoke", args=["noter"]),
        {"params": {"note": "my-private-note-77"}},
        content_type="application/json",
    )
    run = run_execute.execute_run(answer.json()["run"])
    (listed,) = starter.get(reverse("api:run", args=[str(run.pk)])).json()["artifacts"]

    own = starter.get(listed["url"])
    assert own.status_code == 200
    assert b"{{apify.token}}" in b"".join(own.streaming_content)
    # Another token cannot even see that the run exists (no probing of run ids).
    assert stranger.get(listed["url"]).status_code == 404
    assert stranger.get(reverse("api:run", args=[str(run.pk)])).status_code == 404


def test_the_model_rule_covers_people_tokens_and_admins(noter, developer, viewer, console_admin):
    run, _artifact = real_run(noter, Actor(user=developer))
    reset_api_caches()

    assert run.can_download(Actor(user=developer))
    assert run.can_download(Actor(user=console_admin))
    assert not run.can_download(Actor(user=viewer))
    assert not run.can_download(Actor())  # nobody in particular
    assert not run.can_download(Actor(user=make_user("otto", DEVELOPER)))
    # A run started by run_tool (no person, no token): admins only.
    command_run, _ = real_run(noter, Actor.system(), via=RunVia.COMMAND)
    assert not command_run.can_download(Actor(user=developer))
    assert command_run.can_download(Actor(user=console_admin))
