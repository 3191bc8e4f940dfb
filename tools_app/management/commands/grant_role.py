"""`grant_role USER ROLE`: make ROLE the user's one role (viewer, auditor, developer,
admin, or none to take every role away). An auditor becomes staff, so Django admin opens
for them, read-only; nobody else is made staff. Audited."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tools_app.audit import Actor, record
from tools_app.roles import ROLES, role_of, set_role

NONE = "none"


class Command(BaseCommand):
    help = "Give a user one role: " + ", ".join(ROLES) + f", or {NONE}."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("role", metavar="ROLE", help=", ".join((*ROLES, NONE)))

    def handle(self, *args, username: str, role: str, **options) -> None:
        # Checked here rather than with argparse choices so that call_command() callers
        # get the same exit status 2 as the command line.
        if role not in (*ROLES, NONE):
            raise CommandError(
                f"unknown role {role!r}; use one of {', '.join((*ROLES, NONE))}", returncode=2
            )
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r} (create one: createsuperuser, or admin)")
        if user.is_superuser and role != "admin":
            raise CommandError(
                f"{username!r} is a superuser, an admin whatever the groups say; "
                "take superuser status away in Django admin first"
            )
        before = role_of(user)
        set_role(user, None if role == NONE else role)
        record(
            Actor.system(),
            "user.role",
            user,
            f"{username}: {before or NONE} → {role} from the command line",
            {"before": before, "after": None if role == NONE else role},
        )
        self.stdout.write(
            f"{username} is now {role}" + (" (staff, admin read-only)" if role == "auditor" else "")
        )
