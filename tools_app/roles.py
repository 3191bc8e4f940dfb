"""Roles are Django groups: viewer < developer < admin. Superusers are admins."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied

VIEWER = "viewer"
DEVELOPER = "developer"
ADMIN = "admin"
ROLES = (VIEWER, DEVELOPER, ADMIN)
_RANK = {None: 0, VIEWER: 1, DEVELOPER: 2, ADMIN: 3}


def ensure_groups(**kwargs) -> None:
    for name in ROLES:
        Group.objects.get_or_create(name=name)


def role_of(user) -> str | None:
    if not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    # Cached on the user object: templates ask several times per page.
    if not hasattr(user, "_console_role"):
        names = set(user.groups.values_list("name", flat=True))
        user._console_role = next((r for r in reversed(ROLES) if r in names), None)
    return user._console_role


def has_role(user, role: str) -> bool:
    return _RANK[role_of(user)] >= _RANK[role]


def role_required(role: str) -> Callable:
    """login_required, then 403 unless the user has at least `role`."""

    def decorator(view: Callable) -> Callable:
        @login_required
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not has_role(request.user, role):
                raise PermissionDenied
            return view(request, *args, **kwargs)

        return wrapped

    return decorator
