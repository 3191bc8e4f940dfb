"""The editor's run panel (tools_app/views/editor.tool_edit_run): Save and run saves what
is in the editor as a draft and runs exactly that version, never the published one and
never unsaved text; refusals (bad inputs, errors in the editor, someone's newer save) say
why, save nothing and start nothing; a draft run gets what any test run of a draft gets."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.support import integrations as support
from tests.support import tool_files
from tests.support.editor import file_index
from tests.support.forms import find_form
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.integrations.policy import is_published, secret_access
from tools_app.models import AuditEvent, Run, Tool
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import execute as run_execute

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "run-panel"}
EDIT = "/tools/echo/edit/"
RUN = "/tools/echo/edit/run/"
INPUTS = {
    "who": {"type": "string", "description": "Whom to greet."},
    "times": {"type": "integer", "description": "How often.", "optional": True, "default": 1},
    # An input named like one of the editor's own fields: the panel's prefix keeps them apart.
    "note": {"type": "string", "description": "A note.", "optional": True},
}
PUBLISHED_PY = (
    'def execute(i, params, s, u):\n    return {"content": [{"type": "text", "text": "v1"}]}\n'
)
DRAFT_PY = (
    'def execute(i, params, s, u):\n    return {"content": [{"type": "text", "text": "v2"}]}\n'
)
EDITED_PY = (
    "def execute(i, params, s, u):\n"
    '    return {"content": [{"type": "text", "text": "edited " + params["who"]}]}\n'
)


@pytest.fixture
def echo() -> Tool:
    """Published v1, and a newer draft v2 (the one the editor opens on)."""
    system = Actor.system()
    save_version("echo", tool_files("echo", "python", PUBLISHED_PY, inputs=INPUTS),
                 actor=system, publish=True)  # fmt: skip
    save_version("echo", tool_files("echo", "python", DRAFT_PY, inputs=INPUTS), actor=system)
    return Tool.objects.get(name="echo")


def panel_data(client, changes: dict | None = None) -> dict:
    """The editor's form as the page renders it, run panel inputs included (they belong to
    #tool-form through their form attribute), with `changes` made and Save and run pressed."""
    html = client.get(EDIT).content.decode()
    form = find_form(html, form_id="tool-form")
    button = form.button("Save and run")
    assert button["formaction"] == RUN
    data = form.filled(changes)
    data[button["name"]] = button["value"]
    return data


def with_source(client, source: str, changes: dict | None = None) -> dict:
    data = panel_data(client, changes)
    data[f"files-{file_index(data, 'index.py')}-content"] = source
    return data


def test_it_shows_a_panel_with_the_drafts_inputs_beside_the_code(echo, developer_client):
    html = developer_client.get(EDIT).content.decode()

    assert 'id="run-panel"' in html
    form = find_form(html, form_id="tool-form")
    assert {"run-who", "run-times", "run-note"} <= set(form.controls)
    # The run inputs do not hold back Save version: no browser "required" on them.
    assert 'name="run-who"' in html and 'required id="id_run-who"' not in html
    assert "saves what is in the editor as version 3" in html


def test_it_saves_the_edited_draft_and_runs_exactly_that_version(echo, developer_client):
    data = with_source(
        developer_client, EDITED_PY, {"run-who": "Ada", "run-note": "for the run", "note": "mine"}
    )

    response = developer_client.post(RUN, data, **HTMX)

    assert response.status_code == 200
    run = Run.objects.get()
    assert run.version.number == 3  # not the published v1, not the v2 the editor opened
    assert run.version.file_bytes()["index.py"] == EDITED_PY.encode()
    assert run.version.is_draft  # Save and run never publishes
    assert echo.published_version.number == 1
    assert run.params == {"who": "Ada", "times": 1, "note": "for the run"}
    assert run.version.note == "mine"
    assert run.via == RunVia.BROWSER and run.user.username == "dave"
    assert run.status == RunStatus.QUEUED
    html = response.content.decode()
    assert 'id="run-live"' in html and f"/runs/{run.pk}/updates/" in html
    assert 'id="run-updates"' in html
    # The editor now works from version 3: its base, its header and its actions follow.
    assert 'name="base" value="3" id="id_base" hx-swap-oob="true"' in html
    assert 'id="editor-meta" hx-swap-oob="true">Editing from version 3' in html
    assert 'id="editor-actions" hx-swap-oob="true"' in html
    assert "tool-saved" in response["HX-Trigger"]


def test_unchanged_text_runs_the_latest_version_as_it_is(echo, developer_client):
    response = developer_client.post(RUN, panel_data(developer_client, {"run-who": "B"}), **HTMX)

    assert response.status_code == 200
    assert Run.objects.get().version.number == 2
    assert echo.versions.count() == 2


def test_without_javascript_it_goes_to_the_runs_page(echo, developer_client):
    data = with_source(developer_client, EDITED_PY, {"run-who": "Ada"})

    response = developer_client.post(RUN, data)

    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert run.version.number == 3


@pytest.mark.parametrize("who", ["viewer_client", "client"])
def test_only_developers_may_run_drafts(echo, who, request, developer_client):
    data = panel_data(developer_client, {"run-who": "x"})
    client = request.getfixturevalue(who)

    response = client.post(RUN, data, **HTMX)

    assert response.status_code in (302, 403)
    if response.status_code == 302:
        assert response["Location"].startswith(reverse("login"))
    assert not Run.objects.exists() and echo.versions.count() == 2


def test_a_get_is_refused(echo, developer_client):
    assert developer_client.get(RUN).status_code == 405


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"run-who": ""}, "This field is required."),
        ({"run-who": "x", "run-times": "many"}, "Enter a whole number."),
    ],
)
def test_bad_inputs_save_nothing_and_say_why(echo, developer_client, changes, error):
    data = with_source(developer_client, EDITED_PY, changes)
    events = AuditEvent.objects.count()

    response = developer_client.post(RUN, data, **HTMX)

    assert response.status_code == 400
    html = response.content.decode()
    assert "Not saved and not run: the inputs below do not fit the edited draft." in html
    assert error in html
    assert not Run.objects.exists()
    assert echo.versions.count() == 2  # the save was undone with the refused run
    assert AuditEvent.objects.count() == events
    # Without JavaScript: the editor again, with the typed text and the errors.
    page = developer_client.post(RUN, data)
    assert page.status_code == 400
    assert error in page.content.decode() and "edited " in page.content.decode()


def test_an_input_the_edit_adds_is_asked_for_without_saving(echo, developer_client):
    """The panel's fields come from the saved draft; a new required input in the text is
    refused (nothing saved) and the panel comes back with its field."""
    data = panel_data(developer_client, {"run-who": "x"})
    data["toolmd"] = data["toolmd"].replace(
        "inputs:\r\n", "inputs:\r\n  city:\r\n    type: string\r\n    description: Where.\r\n"
    )

    response = developer_client.post(RUN, data, **HTMX)

    assert response.status_code == 400
    assert 'name="run-city"' in response.content.decode()
    assert echo.versions.count() == 2 and not Run.objects.exists()


def test_errors_in_the_editor_save_and_run_nothing(echo, developer_client):
    data = panel_data(developer_client, {"run-who": "x"})
    data["toolmd"] = data["toolmd"].replace("language: python", "language: cobol")

    response = developer_client.post(RUN, data, **HTMX)

    assert response.status_code == 422
    html = response.content.decode()
    assert "Not saved and not run: the editor has 1 error (see Problems)" in html
    assert 'id="problems" class="problems" aria-live="polite" hx-swap-oob="true"' in html
    assert "language" in html
    assert not Run.objects.exists() and echo.versions.count() == 2
    assert developer_client.post(RUN, data).status_code == 422  # without JavaScript too


def test_a_stale_editor_is_a_conflict_not_an_overwrite(echo, developer_client):
    data = with_source(developer_client, EDITED_PY, {"run-who": "Ada"})
    # Someone saves version 3 while this editor still works from version 2.
    theirs = tool_files("echo", "python", DRAFT_PY, inputs=INPUTS, description="Theirs.")
    save_version("echo", theirs, actor=Actor.system())

    response = developer_client.post(RUN, data, **HTMX)

    assert response.status_code == 409
    html = response.content.decode()
    assert "Not saved and not run: version 3 was saved after version 2" in html
    assert "Save version shows both texts and a diff" in html
    assert not Run.objects.exists() and echo.versions.count() == 3
    # Without JavaScript: the conflict page Save version shows, with the typed text.
    page = developer_client.post(RUN, data)
    assert page.status_code == 409 and "edited " in page.content.decode()


def test_an_admins_publish_box_does_not_publish(echo, console_admin_client):
    data = with_source(console_admin_client, EDITED_PY, {"run-who": "Ada", "publish": "on"})

    assert console_admin_client.post(RUN, data, **HTMX).status_code == 200

    run = Run.objects.get()
    assert run.version.number == 3 and run.version.is_draft
    assert Tool.objects.get(name="echo").published_version.number == 1


PROBE_PY = """
import os

def execute(tool_call_id, params, signal, on_update):
    state = "set" if os.environ.get("APIFY_TOKEN") else "unset"
    return {"content": [{"type": "text", "text": "APIFY_TOKEN " + state}]}
"""


def test_a_draft_run_gets_no_more_secrets_than_a_test_run(db, developer_client, developer):
    """The panel runs a draft like the run page's ?version=N: an integration without "allow
    test runs" is withheld from a developer's run, and the panel says so beforehand, even
    while the editor opens on the published version (its save becomes a draft)."""
    support.create("apify", secrets={"token": "apify-secret-9d1e"})
    files = tool_files("echo", "python", PROBE_PY, integrations=["apify"])
    save_version("echo", files, actor=Actor.system(), publish=True)
    html = developer_client.get(EDIT).content.decode()
    assert "withheld" in html and "version 2 is not the published version" in html

    data = with_source(developer_client, PROBE_PY.replace("unset", "not set"))
    assert developer_client.post(RUN, data, **HTMX).status_code == 200

    run = Run.objects.get()
    assert not is_published(run.version)
    access = secret_access(run.version, ["apify"], user=developer, via=RunVia.BROWSER)
    assert [d.slug for d in access.withheld] == ["apify"]
    finished = run_execute.execute_run(run.pk)
    assert finished.result["content"][0]["text"] == "APIFY_TOKEN not set"
    assert "'apify' was withheld" in finished.notices[0]
