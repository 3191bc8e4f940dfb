"""`create_agent_token NAME --scope SCOPE... [--pin [NAME]]...`: print a new agent token, once.

Only the token goes to stdout (so `TOKEN=$(manage.py create_agent_token ...)` works); what
it is and what it may do go to stderr. `--pin` pins it to the current digests of every
published tool, `--pin NAME` (repeated) of those tools only (catalog/pins.py): a tool that
changes later is hidden from it until `pin_token` approves the change."""

from __future__ import annotations

from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from tools_app.audit import Actor, record
from tools_app.catalog import pins as tool_pins
from tools_app.models import AgentToken
from tools_app.models.tokens import Scope

MAX_NAME = AgentToken._meta.get_field("name").max_length
MAX_DAYS = 3650
# `--pin` without a name: every published tool.
ALL = "*"


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
        parser.add_argument(
            "--pin",
            dest="pins",
            action="append",
            nargs="?",
            const=ALL,
            metavar="NAME",
            help=(
                "Pin the token to the current digest of tool NAME (repeatable); without "
                "NAME, of every published tool. A pinned token sees and runs only approved "
                "digests: approve changes with pin_token."
            ),
        )
        parser.add_argument(
            "--expires-in",
            dest="days",
            type=int,
            metavar="DAYS",
            help="Refuse the token after this many days (default: it never expires).",
        )

    def handle(
        self,
        *args,
        name: str,
        scopes: list[str],
        days: int | None = None,
        pins: list[str] | None = None,
        **options,
    ) -> None:
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
        if days is not None and not 1 <= days <= MAX_DAYS:
            raise CommandError(f"--expires-in must be 1..{MAX_DAYS} days", returncode=2)
        expires_at = timezone.now() + timedelta(days=days) if days else None
        # Before the token exists: a pin that cannot be made leaves no token behind.
        try:
            digests = tool_pins.current_digests(None if ALL in pins else pins) if pins else {}
        except tool_pins.PinError as exc:
            raise CommandError(str(exc)) from None
        token, raw = AgentToken.issue(name, scopes, expires_at=expires_at)
        expires = expires_at.isoformat() if expires_at else None
        record(
            Actor.system(),
            "token.create",
            token,
            f"{token.name} ({', '.join(token.scopes)}) from the command line, "
            f"expires {expires or 'never'}",
            {"prefix": token.prefix, "scopes": token.scopes, "expires_at": expires},
        )
        if digests:
            tool_pins.pin(token, digests, actor=Actor.system())
            self.stderr.write(f"Pinned to {len(digests)} tools: {', '.join(sorted(digests))}.")
        self.stderr.write(
            f"Agent token {token.name!r} ({', '.join(token.scopes)}); shown once, store it now:"
        )
        self.stdout.write(raw)
