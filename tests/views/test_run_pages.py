"""The run form, the run page with its live partial, cancel, artifacts and run history."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from tests.support.forms import submit
from tools_app.audit import Actor
from tools_app.forms.runs import RunForm
from tools_app.models import Run, RunArtifact, RunUpdate, Tool
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import setup
from tools_app.runs import start as run_start

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    # The users fixtures create users; the production hasher costs ~0.6 s each.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


INPUTS = {
    "query": {"type": "string", "description": "What to look for."},
    "limit": {"type": "integer", "description": "At most this many.", "optional": True,
              "default": 10},
    "ratio": {"type": "number", "description": "A ratio.", "optional": True},
    "exact": {"type": "boolean", "description": "Exact matches only.", "optional": True,
              "default": False},
    "strict": {"type": "boolean", "description": "Unset, yes or no.", "optional": True},
    "mode": {"type": "enum", "values": "fast,thorough", "description": "How hard to try.",
             "optional": True, "default": "fast"},
    "api_key": {"type": "string", "description": "Overrides the integration.",
                "sensitive": True, "optional": True},
}  # fmt: skip


@pytest.fixture
def search(make_tool) -> Tool:
    return make_tool("search", language="python", inputs=INPUTS)


def form_url(tool: Tool, **query) -> str:
    url = reverse("tool_run", args=[tool.name])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def make_run(tool: Tool, user=None, **fields) -> Run:
    default = {"query": "cats", "limit": 10} if tool.name == "search" else {}
    params = fields.pop("params", default)
    run = run_start.start_run(
        tool.published_version or tool.versions.first(),
        params,
        actor=Actor(user=user),
        via=fields.pop("via", RunVia.BROWSER),
        enqueue=False,
    )
    if fields:
        Run.objects.filter(pk=run.pk).update(**fields)
        run.refresh_from_db()
    return run


def finished(tool: Tool, user=None, **fields) -> Run:
    now = timezone.now()
    defaults = {
        "status": RunStatus.SUCCEEDED,
        "started_at": now,
        "finished_at": now,
        "heartbeat_at": now,
        "isolation": "bwrap",
        "duration": 0.5,
        "exit_code": 0,
        "result": {"content": [{"type": "text", "text": "all good"}], "isError": False},
    }
    return make_run(tool, user, **{**defaults, **fields})


# --- The form ---------------------------------------------------------------------------


def test_it_generates_a_field_per_input_type(search):
    form = RunForm(manifest=setup.manifest_of(search.published_version))
    kinds = [(name, type(field).__name__) for name, field in form.fields.items()]

    # Only the inputs, in TOOL.md order (also on PostgreSQL, whose jsonb reorders keys):
    # an input may be named "mode" or "params" without clashing with anything.
    assert kinds == [
        ("query", "CharField"),
        ("limit", "IntegerField"),
        ("ratio", "FloatField"),
        ("exact", "BooleanField"),
        ("strict", "NullBooleanField"),
        ("mode", "ChoiceField"),
        ("api_key", "CharField"),
    ]
    assert form.fields["query"].required and not form.fields["limit"].required
    assert form.fields["limit"].initial == 10
    assert form.fields["query"].help_text == "What to look for."


def test_it_renders_the_form_with_types_defaults_and_help(developer_client, search):
    page = developer_client.get(form_url(search))

    assert page.status_code == 200
    html = page.content.decode()
    assert re.search(r'<input type="text" name="query"[^>]*required', html)
    assert re.search(r'<input type="number" name="limit" value="10"', html)
    assert re.search(r'<input type="number" name="ratio" step="any"', html)
    assert re.search(r'<input type="checkbox" name="exact"', html)
    assert re.search(r'<select name="strict"', html)
    assert re.search(r'<option value="fast" selected>fast</option>', html)
    assert re.search(r'<input type="password" name="api_key"', html)
    assert "At most this many." in html
    assert 'name="params"' in html  # the raw JSON mode


def test_it_starts_a_run_from_the_form_and_masks_sensitive_inputs(developer_client, search):
    response = submit(
        developer_client,
        form_url(search),
        {"query": "cats", "limit": "5", "ratio": "", "exact": "on", "strict": "unknown",
         "mode": "thorough", "api_key": "sk-secret-42"},
        form_id="run-form",
    )  # fmt: skip

    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("run", args=[run.pk])
    assert run.params == {
        "query": "cats",
        "limit": 5,
        "exact": True,
        "mode": "thorough",
        "api_key": run_start.MASK,
    }
    assert run.via == RunVia.BROWSER and run.user.username == "dave"
    assert run.status == RunStatus.QUEUED


def test_it_shows_every_problem_on_its_field(developer_client, search):
    response = submit(
        developer_client,
        form_url(search),
        {"query": "", "limit": "many", "ratio": "x", "mode": "slow"},
        form_id="run-form",
    )

    assert response.status_code == 400
    errors = response.context["form"].errors
    assert set(errors) == {"query", "limit", "ratio", "mode"}
    assert not Run.objects.exists()


def raw_json(client: Client, url: str, text: str):
    """Open "Raw JSON" on the run form, type `text`, press "Run with this JSON"."""
    return submit(client, url, {"params": text}, form_id="raw-json-form")


def test_it_starts_a_run_from_raw_json(developer_client, search):
    response = raw_json(developer_client, form_url(search), '{"query": "dogs", "api_key": "k"}')

    assert response.status_code == 302
    assert Run.objects.get().params == {
        "query": "dogs",
        "limit": 10,
        "exact": False,
        "mode": "fast",
        "api_key": run_start.MASK,
    }


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("{nope", ["Not valid JSON: Expecting property name enclosed in double quotes"]),
        ("[1, 2]", ["The params must be a JSON object"]),
        ("[" * 100_000 + "]" * 100_000, ["params[0][0]"]),
        ('{"limit": ' + "9" * 5000 + "}", ["Not usable JSON"]),
        (
            '{"limit": "ten", "other": 1}',
            ["limit: must be an integer", "other: unknown parameter", "query: is required"],
        ),
    ],
)
def test_it_lists_raw_json_problems(developer_client, search, raw, expected):
    response = raw_json(developer_client, form_url(search), raw)

    assert response.status_code == 400
    messages = response.context["raw"].errors["params"]
    assert len(messages) == len(expected)
    for message, start in zip(messages, expected, strict=True):
        assert message.startswith(start)
    assert response.context["json_mode"] is True
    assert not Run.objects.exists()
    # What the person sees: the JSON panel still open, their problems under it, the
    # generated form left alone (no "required" under its fields).
    html = response.content.decode()
    generated, _, panel = html.partition('<details id="raw-json" class="raw" open>')
    assert panel, "the JSON panel is closed"
    assert 'class="error"' not in generated.partition('id="run-form"')[2]
    assert panel.count('<p class="error" role="alert">') == len(expected)


def test_raw_json_runs_what_was_typed_when_every_input_is_optional(developer_client, make_tool):
    """A tool whose inputs all have defaults: the run form alone would be valid too, so a
    raw JSON post read as the form ran {"limit": 10} when {"limit": 3} was typed."""
    tool = make_tool("lister", language="python", inputs={"limit": INPUTS["limit"]})

    response = raw_json(developer_client, form_url(tool), '{"limit": 3}')

    assert response.status_code == 302
    assert Run.objects.get().params == {"limit": 3}


def test_it_prefills_the_last_values_used_but_never_secrets(developer, developer_client, search):
    make_run(search, developer, params={"query": "last time", "limit": 3, "api_key": "sk-1"})

    html = developer_client.get(form_url(search)).content.decode()

    assert 'value="last time"' in html and 'name="limit" value="3"' in html
    assert "sk-1" not in html and run_start.MASK not in html


def test_it_prefills_run_again_with_that_runs_inputs(developer_client, console_admin, search):
    earlier = make_run(search, console_admin, params={"query": "from ada", "api_key": "sk-2"})

    page = developer_client.get(form_url(search, again=earlier.pk))

    html = page.content.decode()
    assert 'value="from ada"' in html and "sensitive inputs must be typed again" in html
    assert "sk-2" not in html and run_start.MASK not in html
    assert developer_client.get(form_url(search, again="not-a-uuid")).status_code == 404


def test_it_runs_a_draft_version_when_asked(developer_client, make_tool, search):
    make_tool("search", language="python", inputs={"q": {"type": "string", "description": "Q"}},
              publish=False)  # fmt: skip

    page = developer_client.get(form_url(search, version=2))
    assert page.status_code == 200 and 'name="q"' in page.content.decode()
    posted = submit(developer_client, form_url(search, version=2), {"q": "x"}, form_id="run-form")
    assert posted.status_code == 302
    assert Run.objects.get().version.number == 2
    assert developer_client.get(form_url(search, version=9)).status_code == 404
    assert developer_client.get(form_url(search, version="1x")).status_code == 404


def test_it_lets_only_developers_and_admins_run_tools(
    client, viewer_client, console_admin_client, search
):
    assert viewer_client.get(form_url(search)).status_code == 403
    assert viewer_client.post(form_url(search), {"query": "x"}).status_code == 403
    assert client.get(form_url(search)).status_code == 302  # to the login page
    assert console_admin_client.get(form_url(search)).status_code == 200
    assert console_admin_client.get(reverse("tool_run", args=["nope"])).status_code == 404
    assert not Run.objects.exists()


# --- The run page and its live part -----------------------------------------------------


def add_updates(run: Run, *texts: str) -> None:
    start = run.updates.count()
    for offset, text in enumerate(texts, start=1):
        RunUpdate.objects.create(
            run=run, seq=start + offset, content=[{"type": "text", "text": text}]
        )


def test_it_shows_a_running_run_that_polls_for_news(developer_client, search, developer):
    run = make_run(search, developer, status=RunStatus.RUNNING, started_at=timezone.now(),
                   heartbeat_at=timezone.now())  # fmt: skip
    add_updates(run, "one", "two")

    html = developer_client.get(reverse("run", args=[run.pk])).content.decode()

    assert "one" in html and "two" in html
    assert f'hx-get="{reverse("run_updates", args=[run.pk])}?after=2"' in html
    assert 'hx-trigger="every 500ms"' in html
    assert 'id="cancel-run"' in html
    assert "Run again with these inputs" in html


def test_the_live_partial_sends_only_new_updates(developer_client, search, developer):
    run = make_run(search, developer, status=RunStatus.RUNNING, started_at=timezone.now(),
                   heartbeat_at=timezone.now())  # fmt: skip
    add_updates(run, "one", "two", "three")
    url = reverse("run_updates", args=[run.pk])

    partial = developer_client.get(url + "?after=2", headers={"HX-Request": "true"})

    html = partial.content.decode()
    assert partial.status_code == 200 and partial["Cache-Control"] == "no-store"
    assert "three" in html and "two" not in html
    assert 'hx-swap-oob="beforeend:#run-updates"' in html
    assert f'hx-get="{url}?after=3"' in html and "every 500ms" in html
    assert "<html" not in html
    # A garbage number is read as 0: every update again, never an error.
    again = developer_client.get(url + "?after=abc", headers={"HX-Request": "true"})
    assert again.status_code == 200 and "one" in again.content.decode()


def test_the_live_partial_stops_polling_when_the_run_ends(developer_client, search, developer):
    run = finished(search, developer)
    add_updates(run, "one")
    url = reverse("run_updates", args=[run.pk])

    html = developer_client.get(url + "?after=1", headers={"HX-Request": "true"}).content.decode()

    assert "hx-trigger" not in html and "hx-get" not in html
    assert "all good" in html and "Succeeded" in html
    assert 'id="cancel-run"' not in html


def test_the_live_partial_makes_few_queries(
    developer_client, search, developer, django_assert_max_num_queries
):
    run = make_run(search, developer, status=RunStatus.RUNNING, started_at=timezone.now(),
                   heartbeat_at=timezone.now())  # fmt: skip
    add_updates(run, *[f"u{i}" for i in range(50)])
    url = reverse("run_updates", args=[run.pk]) + "?after=0"
    developer_client.get(url)  # warm the session and role caches

    # session, user, groups, run, updates + the console banner checks
    with django_assert_max_num_queries(10):
        response = developer_client.get(url, headers={"HX-Request": "true"})
    assert response.status_code == 200 and "u49" in response.content.decode()


def test_it_says_when_a_run_started_in_a_spare_sandbox(viewer_client, search, developer):
    cold, warm = finished(search, developer), finished(search, developer, spare=True)

    cold_html = viewer_client.get(reverse("run", args=[cold.pk])).content.decode()
    warm_html = viewer_client.get(reverse("run", args=[warm.pk])).content.decode()

    assert "sandbox: bwrap</span>" in cold_html and "(spare)" not in cold_html
    assert "sandbox: bwrap (spare)</span>" in warm_html


def test_it_shows_masked_params_only(viewer_client, search, developer):
    run = make_run(search, developer, params={"query": "x", "api_key": "sk-hidden-7"})
    html = viewer_client.get(reverse("run", args=[run.pk])).content.decode()
    assert run_start.MASK in html and "sk-hidden-7" not in html


def test_it_marks_a_run_with_a_dead_worker_lost_when_shown(
    viewer_client, search, developer, settings
):
    settings.RUN_LOST_AFTER_SECONDS = 30
    old = timezone.now() - timedelta(seconds=120)
    run = make_run(search, developer, status=RunStatus.RUNNING, started_at=old, heartbeat_at=old)

    html = viewer_client.get(reverse("run", args=[run.pk])).content.decode()

    assert Run.objects.get(pk=run.pk).status == RunStatus.LOST
    assert "Lost" in html and "stopped answering" in html


def test_run_pages_need_a_role(client, nobody, search, developer):
    run = finished(search, developer)
    assert client.get(reverse("run", args=[run.pk])).status_code == 302
    other = Client()
    other.force_login(nobody)
    assert other.get(reverse("run", args=[run.pk])).status_code == 403
    assert other.get(reverse("runs")).status_code == 403
    missing = "00000000-0000-0000-0000-000000000000"
    developer_client = Client()
    developer_client.force_login(developer)
    assert developer_client.get(f"/runs/{missing}/").status_code == 404
    assert developer_client.get("/runs/not-a-uuid/").status_code == 404


# --- Cancel -----------------------------------------------------------------------------


def test_it_cancels_a_queued_run(developer_client, search, developer):
    run = make_run(search, developer)

    response = submit(developer_client, reverse("run", args=[run.pk]), button="Cancel")

    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.cancel_requested


def test_it_requests_cancel_of_a_running_run_with_htmx(developer_client, search, developer):
    run = make_run(search, developer, status=RunStatus.RUNNING, started_at=timezone.now(),
                   heartbeat_at=timezone.now())  # fmt: skip

    # htmx posts the same form (hx-post on it), with its HX-Request header.
    response = submit(developer_client, reverse("run", args=[run.pk]), button="Cancel",
                      headers={"HX-Request": "true"})  # fmt: skip

    html = response.content.decode()
    assert response.status_code == 200 and 'id="run-live"' in html
    assert "cancel requested" in html and 'id="cancel-run"' not in html
    assert Run.objects.get(pk=run.pk).cancel_requested


def test_only_developers_cancel(viewer_client, developer_client, search, developer):
    run = make_run(search, developer)
    # A viewer is shown no Cancel button; a forged POST is refused.
    assert viewer_client.post(reverse("run_cancel", args=[run.pk])).status_code == 403
    assert developer_client.get(reverse("run_cancel", args=[run.pk])).status_code == 405
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED


# --- Artifacts --------------------------------------------------------------------------


def stored_artifact(run: Run, name: str, data: bytes, settings) -> RunArtifact:
    return RunArtifact.objects.create(run=run, name=name, size=len(data), content=data)


def test_it_downloads_an_artifact(developer_client, search, developer, settings):
    # The run's own starter (tests/runs/test_artifact_access.py: who else may).
    run = finished(search, developer)
    artifact = stored_artifact(run, 'out/re"port\n.html', b"<h1>hi</h1>", settings)

    html = developer_client.get(reverse("run", args=[run.pk])).content.decode()
    url = reverse("run_artifact", args=[run.pk, artifact.pk])
    assert url in html

    response = developer_client.get(url)
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == b"<h1>hi</h1>"
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"] == 'attachment; filename="report.html"'
    assert response["X-Content-Type-Options"] == "nosniff"


def test_it_hides_artifacts_from_the_wrong_run_or_people(
    client, developer_client, search, developer, settings
):
    run = finished(search, developer)
    other = finished(search, developer)
    artifact = stored_artifact(run, "a.txt", b"a", settings)

    wrong_run = reverse("run_artifact", args=[other.pk, artifact.pk])
    assert developer_client.get(wrong_run).status_code == 404
    assert client.get(reverse("run_artifact", args=[run.pk, artifact.pk])).status_code == 302
    RunArtifact.objects.filter(pk=artifact.pk).update(content=None)
    gone = reverse("run_artifact", args=[run.pk, artifact.pk])
    assert developer_client.get(gone).status_code == 404


# --- History ----------------------------------------------------------------------------


@pytest.fixture
def history(make_tool, developer, console_admin):
    fetch = make_tool("fetch", language="python")
    search = make_tool("search", language="python", inputs=INPUTS)
    finished(fetch, developer)
    finished(fetch, console_admin, status=RunStatus.FAILED)
    finished(search, developer, status=RunStatus.CANCELLED)
    make_run(search, None, via=RunVia.API)
    return fetch, search


def listed(client, **query) -> list[Run]:
    response = client.get(reverse("runs"), query)
    assert response.status_code == 200
    return list(response.context["page"])


def test_it_lists_runs_newest_first(viewer_client, history):
    rows = listed(viewer_client)
    assert len(rows) == 4
    assert [r.created_at for r in rows] == sorted((r.created_at for r in rows), reverse=True)


@pytest.mark.parametrize(
    ("query", "count"),
    [
        ({"tool": "fetch"}, 2),
        ({"tool": "search"}, 2),
        ({"tool": "nothing_here"}, 0),
        ({"status": "failed"}, 1),
        ({"person": "dave"}, 2),
        ({"person": "ada", "tool": "fetch"}, 1),
        ({"via": "api"}, 1),
        ({"status": "queued", "via": "browser"}, 0),
    ],
)
def test_it_filters_the_history(viewer_client, history, query, count):
    assert len(listed(viewer_client, **query)) == count


def test_it_refuses_bad_filters(viewer_client, history):
    assert viewer_client.get(reverse("runs"), {"tool": "../x"}).status_code == 400
    assert viewer_client.get(reverse("runs"), {"status": "nope"}).status_code == 400


def test_it_returns_only_the_results_for_htmx(viewer_client, history):
    response = viewer_client.get(
        reverse("runs"),
        {"tool": "fetch"},
        headers={"HX-Request": "true", "HX-Target": "run-results"},
    )
    html = response.content.decode()
    assert 'id="run-results"' in html and "<html" not in html and "2 runs" in html


def test_it_paginates_the_history(viewer_client, make_tool, developer):
    tool = make_tool("fetch", language="python")
    for _ in range(30):
        finished(tool, developer)
    first = viewer_client.get(reverse("runs"))
    second = viewer_client.get(reverse("runs"), {"page": 2})
    assert len(first.context["page"]) == 25 and len(second.context["page"]) == 5
    assert "30 runs, showing 1–25" in first.content.decode()


def test_the_history_query_count_does_not_grow_with_runs(
    viewer_client, make_tool, developer, console_admin, django_assert_num_queries
):
    tool = make_tool("fetch", language="python")
    finished(tool, developer)
    viewer_client.get(reverse("runs"))
    with CaptureQueriesContext(connection) as one_run:
        viewer_client.get(reverse("runs"))
    for index in range(20):
        finished(tool, developer if index % 2 else console_admin)

    with django_assert_num_queries(len(one_run)):
        response = viewer_client.get(reverse("runs"))
    assert len(response.context["page"]) == 21


def test_the_history_reaps_runs_whose_worker_died(viewer_client, search, developer, settings):
    settings.RUN_LOST_AFTER_SECONDS = 30
    old = timezone.now() - timedelta(seconds=120)
    run = make_run(search, developer, status=RunStatus.RUNNING, started_at=old, heartbeat_at=old)

    assert [r.status for r in listed(viewer_client)] == [RunStatus.LOST]
    assert Run.objects.get(pk=run.pk).status == RunStatus.LOST


def test_optional_booleans_and_enums_read_the_same_when_unset(make_tool):
    from tools_app.forms.runs import NOT_SET, RunForm
    from tools_app.runs.setup import manifest_of

    tool = make_tool(
        "flags",
        inputs={
            "exact": {"type": "boolean", "description": "Exact.", "optional": True},
            "mode": {"type": "enum", "values": "a,b", "description": "Mode.", "optional": True},
        },
    )
    form = RunForm(manifest=manifest_of(tool.published_version))

    assert form.fields["exact"].widget.choices[0][1] == NOT_SET
    assert form.fields["mode"].choices[0][1] == NOT_SET
    assert [label for _, label in form.fields["exact"].widget.choices] == [NOT_SET, "Yes", "No"]


def test_a_fresh_run_form_puts_focus_in_its_first_field(developer_client, search):
    page = developer_client.get(f"/tools/{search.name}/run/").content.decode()
    form = page[page.index('id="run-form"') :]
    fields = re.findall(r"<(?:input|select|textarea)[^>]*>", form)
    fields = [f for f in fields if 'type="hidden"' not in f]
    assert "autofocus" in fields[0] and not any("autofocus" in f for f in fields[1:])


def test_status_and_cancel_come_before_the_growing_progress_list(
    developer_client, search, developer
):
    run = make_run(search, developer, status=RunStatus.RUNNING, started_at=timezone.now(),
                   heartbeat_at=timezone.now())  # fmt: skip
    add_updates(run, *[f"step {n}" for n in range(50)])

    html = developer_client.get(reverse("run", args=[run.pk])).content.decode()

    assert (
        html.index('id="run-status"')
        < html.index('id="cancel-run"')
        < html.index('id="run-updates"')
    )


def test_a_running_run_whose_worker_went_quiet_says_so_before_it_is_lost(
    developer_client, search, developer, settings
):
    settings.RUN_HEARTBEAT_SECONDS = 5
    settings.RUN_LOST_AFTER_SECONDS = 30
    quiet = timezone.now() - timedelta(seconds=12)
    run = make_run(search, developer, status=RunStatus.RUNNING, started_at=quiet,
                   heartbeat_at=quiet)  # fmt: skip
    url = reverse("run_updates", args=[run.pk])

    page = developer_client.get(reverse("run", args=[run.pk])).content.decode()
    partial = developer_client.get(url, headers={"HX-Request": "true"}).content.decode()

    for html in (page, partial):
        assert "Its worker has not reported for 12 s" in html
        assert "marked lost after 30 s" in html
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())
    assert "has not reported" not in developer_client.get(url).content.decode()
