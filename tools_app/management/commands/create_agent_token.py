"""`create_agent_token NAME --scope SCOPE...`: print a new agent token, once.

Only the token goes to stdout (so `TOKEN=$(manage.py create_agent_token ...)` works); what
it is and what it may do go to stderr."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tools_app.audit import Actor, record
from tools_app.models import AgentToken
from tools_app.models.tokens import Scope

MAX_NAME = AgentToken._meta.get_field("name").max_length


class Command(BaseCommand):
    help = "Create an agent token and print it once (only its hash is stored)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="Who or what uses the token.")
        parser.add_argument(
            "--scope",
            dest="scopes",
            action="extend",
            nargs="+",
            required=True,
            metavar="SCOPE",
            help=f"One or more of: {', '.join(Scope.values)}.",
        )

    def handle(self, *args, name: str, scopes: list[str], **options) -> None:
        # Checked here rather than with argparse choices so that call_command() callers
        # get the same exit status 2 as the command line.
        unknown = sorted(set(scopes) - set(Scope.values))
        if unknown:
            raise CommandError(
                f"unknown scope {', '.join(unknown)}; use {', '.join(Scope.values)}", returncode=2
            )
        name = name.strip()
        if not name or len(name) > MAX_NAME or not name.isprintable():
            raise CommandError(f"NAME must be 1..{MAX_NAME} printable characters", returncode=2)
        token, raw = AgentToken.issue(name, scopes)
        record(
            Actor.system(),
            "token.create",
            token,
            f"{token.name} ({', '.join(token.scopes)}) from the command line",
            {"prefix": token.prefix, "scopes": token.scopes},
        )
        self.stderr.write(
            f"Agent token {token.name!r} ({', '.join(token.scopes)}); shown once, store it now:"
        )
        self.stdout.write(raw)
