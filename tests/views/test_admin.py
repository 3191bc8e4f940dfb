"""Django admin: every model is there, secrets never are, audit events are read-only."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from tests.support.forms import find_form, submit
from tools_app.audit import Actor, record
from tools_app.models import (
    AgentToken,
    AuditEvent,
    CaseCheck,
    CaseRun,
    EgressException,
    Integration,
    IntegrationSecret,
    LedgerHead,
    OAuthConnection,
    Run,
    RunArtifact,
    RunHour,
    RunHourMark,
    RunUpdate,
    SecretUse,
    Tool,
    ToolPreset,
    ToolVersion,
    WorkerHeartbeat,
)
from tools_app.models.audit import AppendOnlyError
from tools_app.roles import ensure_groups

CIPHERTEXT = "gAAAAAB-ciphertext-sentinel"
SEALED = "sealed-params-sentinel"
REFRESH_CIPHERTEXT = "gAAAAAB-refresh-ciphertext-sentinel"


@pytest.fixture
def superuser(db) -> User:
    return User.objects.create_superuser("root", "root@example.com", "pw-for-tests-only")


@pytest.fixture
def admin_client(superuser) -> Client:
    client = Client()
    client.force_login(superuser)
    return client


@pytest.fixture
def one_of_everything(make_tool, superuser):
    """One row of every model admin shows (the tool's creation also audits)."""
    ensure_groups()
    tool = make_tool("alpha", integrations=["github"])
    ToolVersion.objects.filter(tool=tool).update(note="first cut")  # a note to search for
    integration = Integration.objects.create(
        slug="github", type_slug="github", label="GitHub", values={"url": "https://x"}
    )
    IntegrationSecret.objects.create(
        integration=integration, field="TOKEN", ciphertext=CIPHERTEXT, set_at=timezone.now()
    )
    OAuthConnection.objects.create(
        integration=integration,
        access_ciphertext=CIPHERTEXT,
        refresh_ciphertext=REFRESH_CIPHERTEXT,
        account="octo@example.com",
        connected_at=timezone.now(),
    )
    ToolPreset.objects.create(
        tool=tool, input="account", sensitive=True, ciphertext=CIPHERTEXT, set_at=timezone.now()
    )
    token, raw = AgentToken.issue("bot", ["registry:read"], created_by=superuser)
    run = Run.objects.create(
        tool=tool,
        version=tool.published_version,
        via="browser",
        user=superuser,
        params={"url": "https://example.com"},
        sealed_params=SEALED,
    )
    RunUpdate.objects.create(run=run, seq=1, content={"content": [{"type": "text", "text": "."}]})
    RunArtifact.objects.create(run=run, name="out.txt", size=3, path=f"{run.id}/out.txt")
    hour = timezone.now().replace(minute=0, second=0, microsecond=0)
    RunHour.objects.create(tool=tool, version=tool.published_version, hour=hour, runs=1)
    RunHourMark.objects.create(tool=tool, since=hour, through=hour)
    # Login throttling's records (django-axes), which auditors read too.
    who = {"username": "alpha", "ip_address": "192.0.2.1", "user_agent": "ua"}
    AccessAttempt.objects.create(**who, failures_since_start=1, get_data="", post_data="")
    AccessLog.objects.create(**who)
    AccessFailureLog.objects.create(**who)
    WorkerHeartbeat.objects.create(
        name="celery@host", pid=42, started_at=timezone.now(), seen_at=timezone.now()
    )
    EgressException.objects.create(entry="127.0.0.1:8888", note="searxng", created_by=superuser)
    check = CaseCheck.objects.create(
        tool=tool, version=tool.published_version, user=superuser, via="browser", total=1
    )
    CaseRun.objects.create(case_check=check, position=0, name="fetches_example", run=run)
    # The secret-usage ledger (tools_app/integrations/ledger.py) and its head.
    LedgerHead.objects.create(pk=1, secret_sealed=SEALED, last_seq=1, last_hash="0" * 64)
    SecretUse.objects.create(
        seq=1, created_at=timezone.now(), run_id=run.pk, tool="alpha", version=1,
        integration="github", fields=["token"], key_ids=["k"], fingerprints=["f" * 64],
        via="browser", prev_hash="", row_hash="0" * 64, outcome_mac="1" * 64,
    )  # fmt: skip
    return {"tool": tool, "token": token, "raw_token": raw, "run": run}


def admin_url(model, view: str, *args) -> str:
    meta = model._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_{view}", args=args)


def test_every_model_is_registered():
    for model in apps.get_app_config("tools_app").get_models():
        assert admin.site.is_registered(model), model
    assert admin.site.is_registered(User)
    assert admin.site.is_registered(Group)


def test_every_changelist_and_change_page_loads(admin_client, one_of_everything):
    assert admin_client.get("/admin/").status_code == 200
    for model in admin.site._registry:
        obj = model._default_manager.first()
        assert obj is not None, f"the fixture has no {model.__name__}"
        changelist = admin_client.get(admin_url(model, "changelist"))
        assert changelist.status_code == 200, model
        change = admin_client.get(admin_url(model, "change", obj.pk))
        assert change.status_code == 200, model


def searched_value(obj, path: list[str]) -> str:
    value = obj
    for part in path:
        value = getattr(value, part)
    return "" if value is None else str(value)


# What a person finds each console list by, written here rather than read from admin.py:
# a search box that loses a field (or disappears) fails the test.
SEARCHED_BY: dict[type, tuple[str, ...]] = {
    AuditEvent: ("actor", "action", "target", "summary"),
    Tool: ("name", "description"),
    ToolVersion: ("tool__name", "note", "sha256"),
    Integration: ("slug", "label"),
    AgentToken: ("name", "prefix"),
    Run: ("tool__name", "id"),
    RunArtifact: ("name",),
    CaseCheck: ("tool__name", "id"),
    CaseRun: ("name",),
    WorkerHeartbeat: ("name",),
    User: ("username", "email"),
    Group: ("name",),
}


def search_finds(client: Client, model: type, field: str) -> None:
    """Search for what an object holds in `field`: it must be found, and a term nothing
    holds must find nothing. Not simply the first row: the admin client's own force_login
    leaves an axes AccessLog without an IP address."""
    path = field.lstrip("^=@").split("__")
    held = [(o, searched_value(o, path)) for o in model._default_manager.all()]
    held = [(o, value) for o, value in held if value]
    assert held, f"{model.__name__}: the fixture leaves {field} empty"
    obj, value = held[0]
    url = admin_url(model, "changelist")
    found = client.get(url, {"q": value})
    assert found.status_code == 200, model
    assert obj.pk in [o.pk for o in found.context["cl"].result_list], (model, field, value)
    nothing = client.get(url, {"q": "no-such-thing-xyzzy"})
    assert nothing.context["cl"].result_count == 0, model


def test_changelists_search_by_what_a_person_knows(admin_client, one_of_everything):
    for model, fields in SEARCHED_BY.items():
        for field in fields:
            search_finds(admin_client, model, field)
    # Other apps' lists (axes) are searched by their own first field.
    for model, model_admin in admin.site._registry.items():
        if model_admin.search_fields and model not in SEARCHED_BY:
            search_finds(admin_client, model, model_admin.search_fields[0])


def test_changelists_filter_by_each_plain_field(admin_client, one_of_everything):
    """Each plain list filter of the console's lists keeps exactly the rows holding the
    value picked."""
    filtered = 0
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label != "tools_app":
            continue
        plain = [f for f in model_admin.list_filter if isinstance(f, str)]
        for name in plain:
            field = model._meta.get_field(name)
            if field.many_to_many:  # (Django's own user list: groups, permissions)
                continue
            obj = model._default_manager.first()
            value = getattr(obj, field.attname)
            param = f"{name}__id__exact" if field.is_relation else f"{name}__exact"
            shown = {True: "1", False: "0"}.get(value, str(value))
            response = admin_client.get(admin_url(model, "changelist"), {param: shown})
            assert response.status_code == 200, (model, param)
            listed = {o.pk for o in response.context["cl"].queryset}
            expected = set(
                model._default_manager.filter(**{field.attname: value}).values_list("pk", flat=True)
            )
            assert listed == expected and obj.pk in listed, (model, name, value)
            filtered += 1
    assert filtered >= 8


def test_secrets_never_appear(admin_client, one_of_everything):
    secret = IntegrationSecret.objects.get()
    token = one_of_everything["token"]
    run = one_of_everything["run"]
    pages = [
        admin_url(Integration, "change", secret.integration_id),
        admin_url(IntegrationSecret, "changelist"),
        admin_url(IntegrationSecret, "change", secret.pk),
        admin_url(OAuthConnection, "changelist"),
        admin_url(OAuthConnection, "change", OAuthConnection.objects.get().pk),
        admin_url(AgentToken, "changelist"),
        admin_url(AgentToken, "change", token.pk),
        admin_url(Run, "change", run.pk),
    ]
    for url in pages:
        page = admin_client.get(url).content.decode()
        assert CIPHERTEXT not in page, url
        assert SEALED not in page, url
        assert REFRESH_CIPHERTEXT not in page, url
        assert token.token_hash not in page, url
        assert one_of_everything["raw_token"] not in page, url


def test_audit_events_cannot_be_added(admin_client, one_of_everything):
    assert admin_client.get(admin_url(AuditEvent, "add")).status_code == 403
    response = admin_client.post(admin_url(AuditEvent, "add"), {"actor": "x", "action": "y"})
    assert response.status_code == 403


def test_audit_events_cannot_be_changed(admin_client, one_of_everything):
    event = AuditEvent.objects.first()
    url = admin_url(AuditEvent, "change", event.pk)

    page = admin_client.get(url).content.decode()
    response = admin_client.post(url, {"actor": "mallory", "action": "nothing.happened"})

    assert 'name="_save"' not in page  # a view-only page
    assert response.status_code == 403
    event.refresh_from_db()
    assert event.actor != "mallory"


def test_audit_events_cannot_be_deleted(admin_client, one_of_everything):
    event = AuditEvent.objects.first()
    count = AuditEvent.objects.count()
    url = admin_url(AuditEvent, "delete", event.pk)

    assert admin_client.get(url).status_code == 403
    # Forged requests: the admin offers no delete page or bulk action to submit.
    assert admin_client.post(url, {"post": "yes"}).status_code == 403
    # No bulk action either: the changelist ignores a forged delete_selected.
    changelist = admin_url(AuditEvent, "changelist")
    assert "delete_selected" not in admin_client.get(changelist).content.decode()
    admin_client.post(
        changelist, {"action": "delete_selected", "_selected_action": [event.pk], "post": "yes"}
    )
    assert AuditEvent.objects.count() == count


def test_audit_events_are_append_only_in_the_model(one_of_everything):
    event = AuditEvent.objects.first()
    event.summary = "rewritten"
    with pytest.raises(AppendOnlyError):
        event.save()
    with pytest.raises(AppendOnlyError):
        event.delete()
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.filter(pk=event.pk).update(summary="rewritten")
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.all().delete()
    assert AuditEvent.objects.get(pk=event.pk).summary != "rewritten"


@pytest.fixture
def events(db, viewer, developer) -> dict[str, AuditEvent]:
    found = {
        "vera_publish": record(Actor(user=viewer), "tool.publish", summary="v publish"),
        "dave_publish": record(Actor(user=developer), "tool.publish", summary="d publish"),
        "dave_edit": record(Actor(user=developer), "tool.version.create", summary="d edit"),
        "system_sync": record(Actor.system(), "tools.sync", summary="sync"),
    }
    # Append-only through the ORM; move one event into the past behind its back.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE tools_app_auditevent SET created_at = %s WHERE id = %s",
            [timezone.now() - dt.timedelta(days=30), found["system_sync"].pk],
        )
    return found


def listed(admin_client, params: dict) -> set[str]:
    response = admin_client.get(admin_url(AuditEvent, "changelist"), params)
    assert response.status_code == 200
    return {event.summary for event in response.context["cl"].result_list}


def test_audit_events_filter_by_actor(admin_client, events):
    assert listed(admin_client, {"actor": "dave"}) == {"d publish", "d edit"}
    assert listed(admin_client, {"actor_kind": "system"}) == {"sync"}


def test_audit_events_filter_by_action(admin_client, events):
    assert listed(admin_client, {"action": "tool.publish"}) == {"v publish", "d publish"}


def test_audit_events_filter_by_date(admin_client, events):
    # The same parameters the filter's own "Past 7 days" link carries: aware datetimes.
    # Days come from the stored events, not the clock: midnight may pass during the test.
    def day_of(event: AuditEvent) -> dt.datetime:
        created = AuditEvent.objects.get(pk=event.pk).created_at.astimezone(dt.UTC)
        return dt.datetime.combine(created.date(), dt.time(), tzinfo=dt.UTC)

    today = day_of(events["dave_edit"])

    def between(start: dt.datetime, end: dt.datetime) -> set[str]:
        return listed(admin_client, {"created_at__gte": str(start), "created_at__lt": str(end)})

    week_ago, tomorrow = today - dt.timedelta(days=7), today + dt.timedelta(days=1)
    assert between(week_ago, tomorrow) == {"v publish", "d publish", "d edit"}
    month_ago = day_of(events["system_sync"])
    assert month_ago <= today - dt.timedelta(days=29)
    assert between(month_ago, month_ago + dt.timedelta(days=1)) == {"sync"}


def test_audit_events_past_7_days_link(admin_client, events):
    """The date filter's own link, followed as a person clicks it (the events of the
    fixture are today's and a month old: midnight passing changes neither answer)."""
    page = admin_client.get(admin_url(AuditEvent, "changelist"))
    cl = page.context["cl"]
    dates = [s for s in cl.filter_specs if getattr(s, "field_path", "") == "created_at"]
    assert len(dates) == 1, "the audit log has no date filter"
    links = {choice["display"]: choice["query_string"] for choice in dates[0].choices(cl)}
    url = admin_url(AuditEvent, "changelist") + links["Past 7 days"]
    shown = admin_client.get(url).context["cl"].result_list
    assert {event.summary for event in shown} == {"v publish", "d publish", "d edit"}


def test_audit_events_filters_combine(admin_client, events):
    assert listed(admin_client, {"actor": "dave", "action": "tool.publish"}) == {"d publish"}


def test_tool_versions_and_runs_are_read_only(admin_client, one_of_everything):
    tool = one_of_everything["tool"]
    version = tool.published_version
    run = one_of_everything["run"]
    for model, obj in [(version.__class__, version), (Run, run), (RunUpdate, run.updates.get())]:
        assert admin_client.get(admin_url(model, "add")).status_code == 403
        assert admin_client.get(admin_url(model, "delete", obj.pk)).status_code == 403
        assert admin_client.post(admin_url(model, "change", obj.pk), {}).status_code == 403
    assert admin_client.get(admin_url(Tool, "add")).status_code == 403
    assert admin_client.get(admin_url(Tool, "delete", tool.pk)).status_code == 403


def test_disabling_a_tool_goes_through_versions_and_is_audited(admin_client, one_of_everything):
    tool = one_of_everything["tool"]
    url = admin_url(Tool, "change", tool.pk)
    form = find_form(admin_client.get(url).content.decode(), form_id="tool_form")
    data = form.filled({"enabled": None})  # untick Enabled, press Save
    data["_save"] = "Save"
    assert "label" not in form.controls  # read-only on the page; a forged value is ignored
    data["label"] = "Renamed behind the console's back"

    response = admin_client.post(url, data)

    assert response.status_code == 302, response.context and response.context["errors"]
    tool.refresh_from_db()
    assert tool.enabled is False
    assert tool.label == "alpha"
    event = AuditEvent.objects.filter(action="tool.disable").get()
    assert event.actor == "root"
    assert event.target == "alpha"


def test_admin_changes_are_audited_without_values(admin_client, one_of_everything):
    integration = Integration.objects.get()
    url = admin_url(Integration, "change", integration.pk)
    form = find_form(admin_client.get(url).content.decode(), form_id="integration_form")
    data = form.filled({"label": "GitHub Enterprise"})
    data["_save"] = "Save"
    assert "slug" not in form.controls  # read-only on the page; a forged value is ignored
    data["slug"] = "renamed"

    response = admin_client.post(url, data)

    assert response.status_code == 302
    integration.refresh_from_db()
    assert integration.label == "GitHub Enterprise"
    assert integration.slug == "github"
    assert integration.revision == 2
    assert IntegrationSecret.objects.get().ciphertext == CIPHERTEXT
    event = AuditEvent.objects.filter(action="admin.change").get()
    assert event.actor == "root"
    assert event.target == "github"
    assert "Label" in event.summary
    assert "GitHub Enterprise" not in event.summary


def test_adding_a_user_is_audited_without_the_password(admin_client, db):
    changes = {
        "username": "newbie",
        "password1": "A-long-password-1234",
        "password2": "A-long-password-1234",
    }
    response = submit(admin_client, admin_url(User, "add"), changes, button="Save")

    assert response.status_code == 302
    event = AuditEvent.objects.filter(action="admin.add").get()
    assert event.target == "newbie"
    assert "A-long-password-1234" not in event.summary


def test_revoking_tokens_in_admin_is_audited(admin_client, one_of_everything):
    token = one_of_everything["token"]

    # Tick the token's row, choose the action, press Go: the changelist's own form.
    changes = {"action": "revoke", "_selected_action": str(token.pk)}
    response = submit(admin_client, admin_url(AgentToken, "changelist"), changes,
                      form_id="changelist-form", button="Go")  # fmt: skip

    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    event = AuditEvent.objects.filter(action="token.revoke").get()
    assert event.actor == "root"
    assert AgentToken.authenticate(one_of_everything["raw_token"]) is None


def test_tokens_and_integrations_cannot_be_added_in_admin(admin_client, db):
    assert admin_client.get(admin_url(AgentToken, "add")).status_code == 403
    assert admin_client.get(admin_url(Integration, "add")).status_code == 403
    assert admin_client.get(admin_url(IntegrationSecret, "add")).status_code == 403


def test_viewers_cannot_use_admin(viewer_client, db):
    response = viewer_client.get("/admin/tools_app/auditevent/")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


# --- The audit log's list: readable targets with links, 24-hour times, compact columns ---


def changelist(admin_client, params: dict | None = None) -> str:
    response = admin_client.get(admin_url(AuditEvent, "changelist"), params or {})
    assert response.status_code == 200
    return response.content.decode()


def row_of(page: str, text: str) -> str:
    rows = re.findall(r"<tr><th class=\"field-when\">(.*?)</tr>", page, re.S)
    [row] = [r for r in rows if text in r]
    return row


def test_audit_targets_read_as_names_and_link_to_their_objects(admin_client, one_of_everything):
    run, token = one_of_everything["run"], one_of_everything["token"]
    tool = one_of_everything["tool"]
    actor = Actor.system()
    record(actor, "run.cancel", run, "cancelled a run of alpha")
    record(actor, "token.revoke", token, "bot revoked")
    record(actor, "tool.publish", tool, "alpha published again")
    integration = Integration.objects.get(slug="github")
    record(actor, "integration.update", integration, "github saved")

    page = changelist(admin_client)

    short = str(run.pk)[:8]
    assert f'<a href="/runs/{run.pk}/">Run of alpha · {short}</a>' in row_of(page, "cancelled a")
    assert f"{run.tool_id} {run.pk}" not in page  # never the raw "2 ef8da48f-…" form
    token_url = admin_url(AgentToken, "change", token.pk)
    assert f'<a href="{token_url}">bot (' in row_of(page, "bot revoked")
    assert '<a href="/tools/alpha/">alpha</a>' in row_of(page, "alpha published again")
    assert '<a href="/integrations/github/">github</a>' in row_of(page, "github saved")


def test_audit_targets_that_are_gone_are_named_without_a_link(admin_client, one_of_everything):
    run = one_of_everything["run"]
    record(Actor.system(), "run.cancel", run, "cancelled it")
    run_id = str(run.pk)
    Run.objects.filter(pk=run.pk).delete()

    row = row_of(changelist(admin_client), "cancelled it")

    assert f"Run · {run_id[:8]}" in row and f"/runs/{run_id}/" not in row


def test_audit_targets_are_looked_up_once_per_model(admin_client, one_of_everything):
    tool = one_of_everything["tool"]

    def cancel_runs(count: int) -> None:
        for n in range(count):
            run = Run.objects.create(tool=tool, version=tool.published_version, via="api")
            record(Actor.system(), "run.cancel", run, f"run {n}")

    cancel_runs(1)
    changelist(admin_client)  # warm up
    with CaptureQueriesContext(connection) as one:
        changelist(admin_client)
    cancel_runs(29)
    with CaptureQueriesContext(connection) as many:
        page = changelist(admin_client)

    assert page.count("Run of alpha · ") == 30
    assert len(many) == len(one)  # never one query per row


def test_audit_times_are_24_hour(admin_client, db, superuser):
    event = record(Actor(user=superuser), "tool.publish", summary="late")
    afternoon = dt.datetime(2026, 11, 30, 17, 9, 3, tzinfo=dt.UTC)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE tools_app_auditevent SET created_at = %s WHERE id = %s", [afternoon, event.pk]
        )

    page = changelist(admin_client)
    row = row_of(page, "late")
    assert '<time datetime="2026-11-30T17:09:03+00:00">2026-11-30 17:09:03 UTC</time>' in row
    assert "p.m." not in page and "a.m." not in page
    detail = admin_client.get(admin_url(AuditEvent, "change", event.pk)).content.decode()
    assert "2026-11-30 17:09" in detail and "p.m." not in detail


def test_long_audit_summaries_are_shortened_with_the_whole_text_in_a_tooltip(admin_client, db):
    long = "changed " + "very " * 60 + "much <b>"
    record(Actor.system(), "admin.change", summary=long)
    record(Actor.system(), "admin.change", summary="short one")

    page = changelist(admin_client)

    escaped = long.replace("<", "&lt;").replace(">", "&gt;")
    assert f'<span title="{escaped}">' in page
    assert escaped not in page.replace(f'title="{escaped}"', "")  # only in the tooltip
    assert "short one</td>" in page
    assert '<link href="/static/css/admin-audit.css"' in page


@pytest.mark.parametrize("target_id", ["99999999999999999999", "abc", "-1", ""])
def test_audit_targets_that_can_not_exist_are_shown_as_recorded(admin_client, db, target_id):
    AuditEvent.objects.create(
        actor_kind="system", actor="system", action="token.revoke", target_type="agenttoken",
        target_id=target_id, target="old token", summary="odd target",
    )  # fmt: skip

    row = row_of(changelist(admin_client), "odd target")

    assert "old token" in row and "<a href" not in row.split("field-target_link")[1]
