"""`pin_token PREFIX --approve NAME... | --all | --show`: a pinned agent token's approvals.

A pinned token (create_agent_token --pin) sees and runs a tool only at the digest approved
for it (catalog/pins.py). When a tool changes, an admin looks at the change and approves
it here: `--approve NAME` (repeatable) pins the tool's current digest, `--all` every
published tool's (which pins an unpinned token too). `--show` lists where each tool
stands. PREFIX is the token's prefix as the Tokens page shows it (`tc_...`)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tools_app.audit import Actor
from tools_app.catalog import pins
from tools_app.models import AgentToken

MIN_PREFIX = 4
# AgentToken.issue keeps the token's first 10 characters as its prefix.
PREFIX_LENGTH = 10


class Command(BaseCommand):
    help = "Approve tools for a pinned agent token, or show its pins."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("prefix", help="The token's prefix (tc_...), as the Tokens page shows.")
        action = parser.add_mutually_exclusive_group(required=True)
        action.add_argument(
            "--approve",
            dest="names",
            action="append",
            metavar="NAME",
            help="Approve tool NAME at its current digest (repeatable).",
        )
        action.add_argument(
            "--all",
            dest="approve_all",
            action="store_true",
            help="Approve every published tool's current digest.",
        )
        action.add_argument("--show", action="store_true", help="List the token's pins.")

    def handle(
        self,
        *args,
        prefix: str,
        names: list[str] | None = None,
        approve_all: bool = False,
        show: bool = False,
        **options,
    ) -> None:
        token = find_token(prefix)
        if show:
            self.show(token)
            return
        if not (names or approve_all):
            raise CommandError("say what to do: --approve NAME, --all or --show", returncode=2)
        try:
            approved = pins.approve(token, None if approve_all else names, actor=Actor.system())
        except pins.PinError as exc:
            raise CommandError(str(exc)) from None
        for name, digest in sorted(approved.items()):
            self.stdout.write(f"approved {name} {digest}")
        self.stderr.write(
            f"Token {token.name!r} ({token.prefix}…) is pinned to {len(token.pins)} tools."
        )

    def show(self, token: AgentToken) -> None:
        if not token.pins:
            self.stdout.write(f"{token.name} ({token.prefix}…) is not pinned: it sees every tool.")
            return
        for line in pins.states(token):
            pinned = line.pinned or "-"
            current = line.current or "-"
            self.stdout.write(f"{line.state:9} {line.name} pinned {pinned} current {current}")


def find_token(prefix: str) -> AgentToken:
    """The one token whose prefix starts with `prefix`; a whole token pasted is cut down
    to its prefix."""
    prefix = prefix.strip()[:PREFIX_LENGTH]
    if len(prefix) < MIN_PREFIX:
        raise CommandError(f"PREFIX must be at least {MIN_PREFIX} characters", returncode=2)
    found = list(AgentToken.objects.filter(prefix__startswith=prefix)[:2])
    if not found:
        raise CommandError(f"no agent token has the prefix {prefix!r}")
    if len(found) > 1:
        raise CommandError(f"several agent tokens start with {prefix!r}: give more characters")
    return found[0]
