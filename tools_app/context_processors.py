from django.http import HttpRequest

from tools_app.roles import ADMIN, DEVELOPER, can_audit, has_role


def console(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    from tools_app.checks import console_warnings
    from tools_app.health import worker_alive

    return {
        "is_admin": has_role(user, ADMIN),
        "is_developer": has_role(user, DEVELOPER),
        "can_audit": can_audit(user),
        "console_warnings": console_warnings(),
        # The nav's warning dot: one query.
        "worker_alive": worker_alive(),
    }
