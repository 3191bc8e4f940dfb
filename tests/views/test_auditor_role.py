"""The auditor role: Django admin read-only for every model (view permissions only, from
the group), staff status that follows the role, and `grant_role` for every role."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command
from django.test import Client

from tests.views.test_admin import CIPHERTEXT, SEALED, admin_url, one_of_everything, superuser  # noqa: F401
from tools_app.models import AuditEvent, Tool
from tools_app.roles import ADMIN, AUDITOR, DEVELOPER, VIEWER, can_audit, ensure_groups, role_of


@pytest.fixture
def auditor(db) -> User:
    ensure_groups()
    user = User.objects.create_user("audrey", "audrey@example.com", "pw-for-tests-only")
    user.groups.add(Group.objects.get(name=AUDITOR))
    return User.objects.get(pk=user.pk)


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_it_gives_the_group_every_view_permission_and_nothing_else(db):
    ensure_groups()
    codenames = set(Group.objects.get(name=AUDITOR).permissions.values_list("codename", flat=True))
    for model in admin.site._registry:
        assert f"view_{model._meta.model_name}" in codenames, model
    assert all(codename.startswith("view_") for codename in codenames)


def test_it_makes_an_auditor_staff_and_takes_it_away_with_the_role(auditor):
    assert auditor.is_staff
    auditor.groups.clear()
    auditor.refresh_from_db()
    assert not auditor.is_staff


def test_it_follows_the_role_from_the_groups_side_too(db):
    ensure_groups()
    group = Group.objects.get(name=AUDITOR)
    user = User.objects.create_user("gus")
    group.user_set.add(user)
    assert User.objects.get(pk=user.pk).is_staff
    group.user_set.remove(user)
    assert not User.objects.get(pk=user.pk).is_staff
    group.user_set.add(user)
    group.user_set.clear()
    assert not User.objects.get(pk=user.pk).is_staff


def test_a_developer_made_staff_by_hand_is_not_let_into_admin_by_the_role(developer):
    developer.groups.add(Group.objects.get(name=VIEWER))
    developer.refresh_from_db()
    assert not developer.is_staff


def test_an_auditor_reads_every_changelist_and_change_page(auditor, one_of_everything):  # noqa: F811
    client = logged_in(auditor)
    assert client.get("/admin/").status_code == 200
    for model in admin.site._registry:
        obj = model._default_manager.first()
        changelist = client.get(admin_url(model, "changelist"))
        assert changelist.status_code == 200, model
        change = client.get(admin_url(model, "change", obj.pk))
        assert change.status_code == 200, model
        # Read-only: no save button on any change page, and nothing to add anywhere.
        assert b'name="_save"' not in change.content, model
        assert client.get(admin_url(model, "add")).status_code == 403, model
        body = changelist.content + change.content
        assert CIPHERTEXT.encode() not in body and SEALED.encode() not in body, model


def test_an_auditor_cannot_change_or_delete_anything(auditor, one_of_everything):  # noqa: F811
    client = logged_in(auditor)
    tool = one_of_everything["tool"]
    changed = client.post(admin_url(Tool, "change", tool.pk), {"enabled": ""})
    assert changed.status_code == 403
    assert client.post(admin_url(Tool, "delete", tool.pk), {"post": "yes"}).status_code == 403
    assert Tool.objects.get(pk=tool.pk).enabled
    user_page = client.post(admin_url(User, "change", auditor.pk), {"is_superuser": "on"})
    assert user_page.status_code == 403
    assert not User.objects.get(pk=auditor.pk).is_superuser


def test_an_auditor_browses_the_console_as_a_viewer(auditor):
    client = logged_in(auditor)
    assert role_of(auditor) == AUDITOR and can_audit(auditor)
    assert client.get("/tools/").status_code == 200
    assert client.get("/tokens/").status_code == 403
    assert client.get("/tools/-/new/").status_code == 403


def test_only_admins_and_auditors_can_audit(viewer, developer, console_admin, auditor):
    assert [can_audit(u) for u in (viewer, developer, console_admin, auditor)] == [
        False,
        False,
        True,
        True,
    ]


@pytest.mark.parametrize("role", [VIEWER, AUDITOR, DEVELOPER, ADMIN])
def test_grant_role_makes_the_role_the_only_one(role, developer):
    call_command("grant_role", developer.username, role)
    user = User.objects.get(pk=developer.pk)
    assert list(user.groups.values_list("name", flat=True)) == [role]
    assert role_of(user) == role
    assert user.is_staff is (role == AUDITOR)
    event = AuditEvent.objects.get(action="user.role")
    assert event.data == {"before": DEVELOPER, "after": role}


def test_grant_role_none_takes_every_role_away(auditor):
    call_command("grant_role", auditor.username, "none")
    user = User.objects.get(pk=auditor.pk)
    assert not user.groups.exists() and not user.is_staff and role_of(user) is None


def test_grant_role_refuses_an_unknown_role_and_a_missing_user(viewer):
    with pytest.raises(CommandError, match="unknown role 'root'") as bad:
        call_command("grant_role", viewer.username, "root")
    assert bad.value.returncode == 2
    with pytest.raises(CommandError, match="no user 'ghost'"):
        call_command("grant_role", "ghost", VIEWER)
    assert not AuditEvent.objects.filter(action="user.role").exists()


def test_grant_role_does_not_demote_a_superuser_by_groups(superuser):  # noqa: F811
    with pytest.raises(CommandError, match="superuser"):
        call_command("grant_role", superuser.username, VIEWER)
