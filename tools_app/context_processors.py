from django.http import HttpRequest

from tools_app.roles import ADMIN, DEVELOPER, can_audit, has_role


def console(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    from tools_app.config_warnings import console_warnings
    from tools_app.ops.health import worker_alive

    is_admin = has_role(user, ADMIN)
    return {
        "is_admin": is_admin,
        "is_developer": has_role(user, DEVELOPER),
        "can_audit": can_audit(user),
        "section": nav_section(request.path),
        # The configuration banner is for those who can fix it: admins (System page).
        "console_warnings": console_warnings() if is_admin else [],
        # The nav's warning dot: one query.
        "worker_alive": worker_alive(),
    }


# The first part of a path, for the nav's aria-current: tools/-/new/ is under Tools.
_SECTIONS = {"tools", "runs", "analytics", "integrations", "tokens", "audit", "system", "docs"}
# A check of a version's cases is a page of its tool.
_UNDER = {"checks": "tools"}


def nav_section(path: str) -> str:
    first = path.strip("/").split("/", 1)[0]
    first = _UNDER.get(first, first)
    return first if first in _SECTIONS else ""
