"""Roles are Django groups: viewer < developer < admin. Superusers are admins.

An auditor sees the console as a viewer does, and also reads the audit page and Django
admin, read-only: the group holds every model's view permission and nothing else
(migration 0010 and `ensure_groups`), and `is_staff` follows the role (`sync_staff`)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import PermissionDenied

VIEWER = "viewer"
AUDITOR = "auditor"
DEVELOPER = "developer"
ADMIN = "admin"
ROLES = (VIEWER, AUDITOR, DEVELOPER, ADMIN)  # lowest first
_RANK = {None: 0, VIEWER: 1, AUDITOR: 1, DEVELOPER: 2, ADMIN: 3}
# The apps whose models an auditor may read in Django admin.
AUDITED_APPS = ("tools_app", "auth", "axes")


def ensure_groups(**kwargs) -> None:
    """After every migrate: the role groups exist, and the auditor's holds the view
    permission of every model, those added since the migration that first gave them too."""
    for name in ROLES:
        Group.objects.get_or_create(name=name)
    grant_view_permissions(Group, Permission)


def grant_view_permissions(group_model, permission_model) -> None:
    """Give the auditor group every view permission of AUDITED_APPS, and only those.
    Takes the models so a migration can pass its historical ones."""
    group, _ = group_model.objects.get_or_create(name=AUDITOR)
    views = permission_model.objects.filter(
        codename__startswith="view_", content_type__app_label__in=AUDITED_APPS
    )
    group.permissions.set(views)


def role_of(user) -> str | None:
    if not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    # Cached on the user object: templates ask several times per page.
    if not hasattr(user, "_console_role"):
        names = set(user.groups.values_list("name", flat=True))
        held = [role for role in ROLES if role in names]
        user._console_role = max(held, key=_RANK.__getitem__, default=None)
        user._console_auditor = AUDITOR in names
    return user._console_role


def can_audit(user) -> bool:
    """Admins and auditors read the audit log (a developer, who outranks an auditor,
    does not)."""
    role = role_of(user)
    return role == ADMIN or (role is not None and getattr(user, "_console_auditor", False))


def set_role(user, role: str | None) -> None:
    """Make `role` the user's only role group (None: no role); is_staff follows."""
    if role is not None and role not in ROLES:
        raise ValueError(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
    user.groups.remove(*Group.objects.filter(name__in=ROLES).exclude(name=role or ""))
    if role is not None:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    sync_staff(user)


def sync_staff(user) -> None:
    """Django admin lets in staff only: an auditor (or superuser) is staff, nobody else.
    A user made staff by hand loses it with the next change of groups."""
    staff = user.is_superuser or user.groups.filter(name=AUDITOR).exists()
    if user.is_staff != staff:
        type(user).objects.filter(pk=user.pk).update(is_staff=staff)
        user.is_staff = staff
    for cached in ("_console_role", "_console_auditor"):
        user.__dict__.pop(cached, None)


def staff_follows_groups(sender, instance, action: str, reverse: bool, pk_set, **kwargs) -> None:
    """m2m_changed on User.groups, from either side (user.groups.add, group.user_set.add)."""
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    if not reverse:
        sync_staff(instance)
        return
    users = get_user_model().objects
    # A group's clear() names no users: every staff user may have lost the role.
    changed = users.filter(is_staff=True) if action == "post_clear" else users.filter(pk__in=pk_set)
    for user in changed:
        sync_staff(user)


def has_role(user, role: str) -> bool:
    return _RANK[role_of(user)] >= _RANK[role]


def allowed_if(check: Callable[[object], bool]) -> Callable:
    """login_required, then 403 unless `check(user)` holds."""

    def decorator(view: Callable) -> Callable:
        @login_required
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not check(request.user):
                raise PermissionDenied
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


def role_required(role: str) -> Callable:
    """login_required, then 403 unless the user has at least `role`."""
    return allowed_if(lambda user: has_role(user, role))
