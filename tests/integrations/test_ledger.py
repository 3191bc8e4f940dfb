"""The secret-usage ledger (tools_app/integrations/ledger.py, docs/security.md): a row per
run x integration received, from the browser and the API (MCP: test_ledger_mcp.py), the
chain that `verify_ledger` checks, find by value, Django admin and its exports, retention,
and a ledger that cannot be written refusing the run."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tests.support import integrations as support
from tests.support.agent_api import agent_client
from tools_app.audit import Actor
from tools_app.integrations import ledger
from tools_app.integrations.environment import Delivered
from tools_app.models import AuditEvent, LedgerHead, Run, SecretUse
from tools_app.models.runs import RunStatus, RunVia
from tools_app.roles import AUDITOR, ensure_groups
from tools_app.runs import execute as run_execute
from tools_app.runs import start

pytestmark = pytest.mark.django_db

TOKEN = "ledger-test-token-0123456789abcdef"
# Prints the length of what it received, never the value.
LENGTH_PY = """
import os

def execute(tool_call_id, params, signal, on_update):
    return {"content": [{"type": "text", "text": str(len(os.environ.get("SEARXNG_TOKEN", "")))}]}
"""


@pytest.fixture
def searxng(db):
    return support.create(
        "searxng", values={"url": "https://search.example"}, secrets={"token": TOKEN}
    )


@pytest.fixture
def search_tool(make_tool, searxng):
    return make_tool("search", language="python", source=LENGTH_PY, integrations=["searxng"])


@pytest.fixture
def no_broker(monkeypatch):
    """This test runs its runs itself: no message may reach a worker another test started."""
    monkeypatch.setattr(start, "enqueue_run", lambda run_id: None)


def run_now(run_id) -> Run:
    run = run_execute.execute_run(run_id)
    assert run is not None
    return run


def test_it_records_a_browser_run(developer, developer_client, search_tool, no_broker):
    response = developer_client.post(reverse("tool_run", args=["search"]), {})
    assert response.status_code == 302, response.content[-2000:]
    run = run_now(Run.objects.get().pk)
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert run.result["content"][0]["text"] == str(len(TOKEN))
    [row] = SecretUse.objects.all()
    assert (row.run_id, row.tool, row.version, row.draft) == (run.pk, "search", 1, False)
    assert (row.integration, row.fields, row.via) == ("searxng", ["token"], RunVia.BROWSER)
    assert row.integration_id == search_tool.pk or row.integration_id is not None
    assert (row.user_id, row.username, row.token_id) == (developer.pk, developer.username, None)
    assert row.key_ids == [search_key_id()]
    assert row.fingerprints == [ledger.fingerprint(TOKEN)] and TOKEN not in str(row.__dict__)
    assert row.outcome == RunStatus.SUCCEEDED
    assert ledger.verify() == (1, [])


def search_key_id() -> str:
    from tools_app.models import IntegrationSecret

    return IntegrationSecret.objects.get(integration__slug="searxng").key_id


def test_it_records_an_api_run_with_its_token(
    search_tool, no_broker, django_capture_on_commit_callbacks
):
    api = agent_client(name="ledger-agent")
    with django_capture_on_commit_callbacks(execute=False):
        response = api.post("/api/v1/tools/search/invoke", {}, content_type="application/json")
    assert response.status_code == 202, response.content
    run = run_now(response.json()["run"])
    [row] = SecretUse.objects.all()
    assert (row.via, row.token_name, row.user_id) == (RunVia.API, "ledger-agent", None)
    assert row.token_id == run.token_id and row.token_prefix == run.token.prefix
    assert row.who == "token:ledger-agent" and row.outcome == RunStatus.SUCCEEDED


def test_it_records_a_draft_and_nothing_for_a_run_without_integrations(
    console_admin, make_tool, searxng
):
    tool = make_tool("draft", language="python", source=LENGTH_PY, integrations=["searxng"],
                     publish=False)  # fmt: skip
    plain = make_tool("plain", language="python")
    for version in (tool.versions.get(), plain.versions.get()):
        run = start.start_run(version, {}, actor=Actor(user=console_admin), via="browser",
                              enqueue=False)  # fmt: skip
        run_now(run.pk)
    [row] = SecretUse.objects.all()
    assert row.tool == "draft" and row.draft is True


def test_it_refuses_the_run_when_the_ledger_cannot_be_written(console_admin, search_tool):
    """A real failing write: a trigger makes the database refuse every ledger INSERT."""
    refuse_ledger_inserts()
    run = start.start_run(search_tool.versions.get(), {}, actor=Actor(user=console_admin),
                          via="browser", enqueue=False)  # fmt: skip
    run = run_now(run.pk)
    assert run.status == RunStatus.FAILED
    assert "secret-usage ledger could not be written, so the run was not started" in run.error
    # The tool never ran: no result of its own, no runner outcome at all.
    assert run.result["isError"] is True and run.exit_code is None and run.isolation == ""
    assert not run.updates.exists() and SecretUse.objects.count() == 0


def refuse_ledger_inserts() -> None:
    table = SecretUse._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                f'CREATE TRIGGER ledger_refuses BEFORE INSERT ON "{table}" '
                "BEGIN SELECT RAISE(ABORT, 'ledger refuses'); END"
            )
        else:
            cursor.execute(
                "CREATE FUNCTION ledger_refuses() RETURNS trigger AS $$ "
                "BEGIN RAISE EXCEPTION 'ledger refuses'; END $$ LANGUAGE plpgsql"
            )
            cursor.execute(
                f'CREATE TRIGGER ledger_refuses BEFORE INSERT ON "{table}" '
                "FOR EACH ROW EXECUTE FUNCTION ledger_refuses()"
            )


def test_a_run_reaped_as_lost_gets_its_real_outcome_when_it_ends(console_admin, search_tool):
    run = start.start_run(search_tool.versions.get(), {}, actor=Actor(user=console_admin),
                          via="browser", enqueue=False)  # fmt: skip
    run = Run.objects.select_related("tool", "version", "user", "token").get(pk=run.pk)
    grant = ledger.append(run, [delivered("a-value")])
    assert ledger.record_outcome_of_runs([run.pk], RunStatus.LOST) == 1
    assert SecretUse.objects.get().outcome == "lost" and ledger.verify() == (1, [])
    ledger.record_outcome(grant, RunStatus.SUCCEEDED)
    assert SecretUse.objects.get().outcome == "succeeded" and ledger.verify() == (1, [])


# --- The chain ---------------------------------------------------------------------------


def delivered(value: str, slug: str = "searxng") -> Delivered:
    return Delivered(slug, 1, ("token",), ("k",), (value,))


@pytest.fixture
def three_rows(console_admin, search_tool) -> list[SecretUse]:
    for value in ("one", "two", "three"):
        run = start.start_run(search_tool.versions.get(), {}, actor=Actor(user=console_admin),
                              via="browser", enqueue=False)  # fmt: skip
        run = Run.objects.select_related("tool", "version", "user", "token").get(pk=run.pk)
        ledger.record_outcome(ledger.append(run, [delivered(value)]), RunStatus.SUCCEEDED)
    return list(SecretUse.objects.order_by("seq"))


def verify_command() -> str:
    out = io.StringIO()
    call_command("verify_ledger", stdout=out)
    return out.getvalue()


def broken(capsys=None) -> str:
    err = io.StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("verify_ledger", stderr=err)
    return err.getvalue() + str(raised.value)


def test_it_verifies_an_intact_chain(three_rows):
    assert verify_command().startswith("3 rows, chain intact")
    assert [r.seq for r in three_rows] == [1, 2, 3]
    assert [r.prev_hash for r in three_rows[1:]] == [r.row_hash for r in three_rows[:2]]


def test_it_detects_an_edited_row(three_rows):
    SecretUse.objects.filter(seq=2).update(username="someone-else")
    assert "row seq 2 edited" in broken()


def test_it_detects_an_edited_outcome(three_rows):
    SecretUse.objects.filter(seq=3).update(outcome="failed")
    assert "row seq 3 outcome edited" in broken()


def test_it_detects_a_deleted_row(three_rows):
    SecretUse.objects.filter(seq=2).delete()
    assert "rows missing between seq 1 and 3" in broken()


def test_it_detects_the_last_row_deleted(three_rows):
    SecretUse.objects.filter(seq=3).delete()
    assert "rows missing between seq 2 and 4" in broken()


def test_it_detects_reordered_rows(three_rows):
    # Swap rows 1 and 2 by their seq (through a free number: seq is unique).
    SecretUse.objects.filter(seq=1).update(seq=100)
    SecretUse.objects.filter(seq=2).update(seq=1)
    SecretUse.objects.filter(seq=100).update(seq=2)
    said = broken()
    assert "row seq 1 edited" in said and "row seq 2 edited" in said


def test_it_detects_a_forged_row_with_recomputed_plain_hashes(three_rows):
    """Without the chain key a row cannot be rewritten consistently: a SHA-256 chain
    recomputed by whoever edits the database does not verify."""
    import hashlib

    row = three_rows[1]
    row.username = "forger"
    forged = hashlib.sha256(row.prev_hash.encode() + b"\n" + ledger.canonical(row)).hexdigest()
    SecretUse.objects.filter(seq=2).update(username="forger", row_hash=forged)
    SecretUse.objects.filter(seq=3).update(prev_hash=forged)
    assert "row seq 2 edited" in broken()


def test_it_appends_in_three_statements(three_rows, console_admin, search_tool,
                                        django_assert_max_num_queries):  # fmt: skip
    run = Run.objects.select_related("tool", "version", "user", "token").get(
        pk=three_rows[0].run_id
    )
    # The head locked and read, the rows inserted, the head moved; the savepoint around
    # them is this test's transaction (a worker has BEGIN/COMMIT, no statements).
    with django_assert_max_num_queries(5) as captured:
        ledger.append(run, [delivered("four"), delivered("five", "apify")])
    statements = [
        q["sql"]
        for q in captured.captured_queries
        if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))
    ]
    assert len(statements) <= 3, statements
    assert verify_command().startswith("5 rows, chain intact")


def test_retention_prunes_old_rows_and_the_rest_still_verifies(three_rows, settings):
    assert ledger.prune() == 0  # all younger than CONSOLE_LEDGER_RETENTION_DAYS
    assert ledger.prune(timezone.now() + timedelta(seconds=1)) == 3
    said = verify_command()
    assert said.startswith("0 rows, chain intact (3 older rows pruned, up to seq 3")
    run = Run.objects.select_related("tool", "version", "user", "token").first()
    ledger.append(run, [delivered("later")])
    assert verify_command().startswith("1 rows, chain intact (3 older rows pruned")
    head = LedgerHead.objects.get()
    assert (head.pruned_seq, head.pruned_hash) == (3, three_rows[2].row_hash)
    # Deleting the row after the checkpoint is still seen.
    SecretUse.objects.all().delete()
    assert "rows missing between seq 3 and 5" in broken()


def test_the_key_is_sealed_by_the_vault_and_resealed_by_rotation(make_tool, settings):
    from tools_app.integrations import vault

    old, fresh = support.new_key(), support.new_key()
    settings.CONSOLE_ENCRYPTION_KEYS = [old]
    version = make_tool("plain", language="python").versions.get()
    run = start.start_run(version, {}, actor=Actor.system(), via="command", enqueue=False)
    run = Run.objects.select_related("tool", "version", "user", "token").get(pk=run.pk)
    ledger.append(run, [delivered("v")])
    head = LedgerHead.objects.get()
    assert head.sealed_key_id == vault.key_id(old)
    settings.CONSOLE_ENCRYPTION_KEYS = [fresh, old]
    call_command("rotate_encryption_keys", stdout=io.StringIO())
    head.refresh_from_db()
    assert head.sealed_key_id == vault.key_id(fresh)
    settings.CONSOLE_ENCRYPTION_KEYS = [fresh]  # the old key removed: still verifies
    ledger._keys.clear()
    assert verify_command().startswith("1 rows, chain intact")


# --- Find by value -------------------------------------------------------------------------


def test_an_admin_finds_the_runs_that_received_a_value(
    console_admin, console_admin_client, search_tool, no_broker
):
    run = start.start_run(search_tool.versions.get(), {}, actor=Actor(user=console_admin),
                          via="browser", enqueue=False)  # fmt: skip
    run_now(run.pk)
    url = reverse("secret_find")
    page = console_admin_client.get(url)
    assert page.status_code == 200 and b'type="password"' in page.content
    found = console_admin_client.post(url, {"value": TOKEN})
    assert found.status_code == 200
    body = found.content.decode()
    assert reverse("run", args=[run.pk]) in body and "searxng.token" in body
    assert "1 use of this value" in body
    assert TOKEN not in body and ledger.fingerprint(TOKEN) not in body
    missed = console_admin_client.post(url, {"value": TOKEN + "x"}).content.decode()
    assert "No run in the ledger received this value" in missed
    events = list(AuditEvent.objects.filter(action="ledger.find").order_by("id").values())
    assert [e["data"]["matches"] for e in events] == [1, 0]
    assert TOKEN not in json.dumps(events, default=str)
    assert ledger.fingerprint(TOKEN) not in json.dumps(events, default=str)


def test_find_by_value_is_for_admins_only_and_needs_csrf(
    console_admin, developer_client, viewer_client, auditor_client, client
):
    url = reverse("secret_find")
    for other in (developer_client, viewer_client, auditor_client):
        assert other.post(url, {"value": "x"}).status_code == 403
    assert client.post(url, {"value": "x"}).status_code == 302  # to the login page
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(console_admin)
    assert strict.post(url, {"value": "x"}).status_code == 403
    assert not AuditEvent.objects.filter(action="ledger.find").exists()


@pytest.fixture
def auditor_client(db) -> Client:
    ensure_groups()
    user = User.objects.create_user("audrey", "a@example.com", "pw-for-tests-only")
    user.groups.add(Group.objects.get(name=AUDITOR))
    client = Client()
    client.force_login(User.objects.get(pk=user.pk))
    return client


# --- Django admin --------------------------------------------------------------------------


def test_auditors_read_filter_and_export_the_ledger_read_only(auditor_client, three_rows):
    changelist = reverse("admin:tools_app_secretuse_changelist")
    page = auditor_client.get(changelist)
    assert page.status_code == 200
    assert b"Export CSV" in page.content and b"Export JSONL" in page.content
    assert auditor_client.get(changelist, {"integration": "searxng"}).status_code == 200
    row = three_rows[0]
    change = reverse("admin:tools_app_secretuse_change", args=[row.pk])
    assert b'name="_save"' not in auditor_client.get(change).content
    assert auditor_client.get(reverse("admin:tools_app_secretuse_add")).status_code == 403
    delete = reverse("admin:tools_app_secretuse_delete", args=[row.pk])
    assert auditor_client.post(delete, {"post": "yes"}).status_code == 403
    assert SecretUse.objects.count() == 3

    export = reverse("admin:tools_app_secretuse_csv")
    response = auditor_client.get(export)
    assert response.status_code == 200 and response.streaming
    lines = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [line["seq"] for line in lines] == ["1", "2", "3"]
    assert lines[0]["row_hash"] == row.row_hash
    # The filters of the list apply to the export.
    SecretUse.objects.filter(seq=3).update(via="api")  # (breaks the chain; not verified here)
    jsonl = reverse("admin:tools_app_secretuse_jsonl")
    filtered = auditor_client.get(jsonl, {"via": "api"})
    records = [json.loads(line) for line in b"".join(filtered.streaming_content).splitlines()]
    assert [r["seq"] for r in records] == [3] and records[0]["via"] == "api"
    # A filter the database cannot run is a bad request, as on the list itself.
    assert auditor_client.get(jsonl, {"created_at__year": "99999"}).status_code == 400


def test_the_export_is_refused_without_the_view_permission(developer, three_rows):
    developer.is_staff = True
    developer.save()
    client = Client()
    client.force_login(developer)
    response = client.get(reverse("admin:tools_app_secretuse_csv"))
    assert response.status_code == 403


def test_the_integration_page_shows_recent_uses_to_auditors_only(
    console_admin_client, viewer_client, three_rows
):
    url = reverse("integration", args=["searxng"])
    assert b"Recent uses" in console_admin_client.get(url).content
    assert b"Recent uses" not in viewer_client.get(url).content
