"""Create or update an integration from automation.

    manage.py set_integration SLUG --type TYPE [--field NAME=VALUE ...] [--secret-stdin NAME]

Secret values are read only from standard input, never from arguments (they would end up
in shell history and the process list). With one --secret-stdin, all of standard input is
the secret (a trailing newline is dropped); with several, standard input holds one line per
secret in the order given. On a terminal the secret is prompted for without echo.

Exit status: 0 done, 1 a reported problem (unknown type, field or slug, invalid value),
2 bad usage.
"""

from __future__ import annotations

import getpass
import sys

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.views.decorators.debug import sensitive_variables

from tools_app.audit import Actor
from tools_app.integrations.errors import IntegrationError, InvalidIntegration, UnknownType
from tools_app.integrations.fields import fields_of, parse_custom_fields, type_of
from tools_app.integrations.service import create_integration, update_integration
from tools_app.integrations.types import get_type, integration_types
from tools_app.integrations.validation import slug_problem
from tools_app.models import Integration


class Command(BaseCommand):
    # It repairs what the key checks report (a secret no key decrypts can be set again), so
    # those errors must not stop it; it reports key problems itself.
    requires_system_checks: list[str] = []
    help = (
        "Create or update an integration. Plain values with --field NAME=VALUE; secret "
        "values only from standard input with --secret-stdin NAME."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="The integration's slug (tools name it).")
        parser.add_argument(
            "--type",
            dest="type_slug",
            help="Integration type (a file in seed/integrations). Required to create; "
            "when updating it must match the existing type.",
        )
        parser.add_argument(
            "--field",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="Set a non-secret field (repeatable). An empty VALUE unsets it.",
        )
        parser.add_argument(
            "--secret-stdin",
            action="append",
            default=[],
            metavar="NAME",
            help="Read this secret field from standard input (repeatable: one line each).",
        )
        parser.add_argument(
            "--clear",
            action="append",
            default=[],
            metavar="NAME",
            help="Remove a stored secret or value (repeatable).",
        )
        parser.add_argument(
            "--define",
            action="append",
            default=[],
            metavar="'ENV_NAME [secret] [required] [url|path]'",
            help="Custom types only: the variables (repeatable; replaces the list when given).",
        )
        parser.add_argument("--label", help="Display label.")
        state = parser.add_mutually_exclusive_group()
        state.add_argument("--enable", action="store_true", help="Enable the integration.")
        state.add_argument("--disable", action="store_true", help="Disable the integration.")

    @sensitive_variables()
    def handle(self, *args, **options) -> None:
        slug: str = options["slug"]
        type_slug: str | None = options["type_slug"]
        existing = Integration.objects.filter(slug=slug).first()
        try:
            if type_slug is not None:
                itype = get_type(type_slug)
            elif existing is not None:
                itype = type_of(existing)
                if itype is None:
                    raise CommandError(
                        f"integration {slug!r} has type {existing.type_slug!r}, "
                        "which is not installed"
                    )
            else:
                # Bad usage (exit 2): creating needs --type, as a missing argument would.
                raise CommandError(
                    f"unknown integration {slug!r}: give --type TYPE to create it "
                    f"(types: {', '.join(sorted(integration_types()))})",
                    returncode=2,
                )
        except UnknownType as exc:
            # Bad usage, like create_agent_token's unknown scope.
            raise CommandError(str(exc), returncode=2) from None
        if existing is not None and existing.type_slug != itype.slug:
            raise CommandError(
                f"integration {slug!r} has type {existing.type_slug!r}, not {itype.slug!r}"
            )
        if existing is None and (problem := slug_problem(slug)):
            raise CommandError(problem)

        definitions = None
        if options["define"]:
            if not itype.custom:
                raise CommandError(
                    f"--define is only for custom types; {itype.slug!r} has fixed fields"
                )
            definitions = "\n".join(options["define"])
            try:
                specs = parse_custom_fields(definitions)
            except InvalidIntegration as exc:
                raise CommandError(str(exc)) from None
        elif existing is not None:
            specs = list(fields_of(existing))
        else:
            specs = list(itype.fields)
        by_name = {s.name: s for s in specs}
        known = ", ".join(by_name) or "none"

        values: dict[str, str] = {}
        for item in options["field"]:
            name, sep, value = item.partition("=")
            name = name.strip()
            if not sep or not name:
                # Bad usage (exit 2), like a missing argument: nothing was looked up yet.
                raise CommandError(
                    f"--field needs NAME=VALUE, got {name or item[:40]!r}", returncode=2
                )
            spec = by_name.get(name)
            if spec is None:
                raise CommandError(
                    f"unknown field {name!r} for type {itype.slug!r} (fields: {known})"
                )
            if spec.secret:
                # Never echo the value: it is a secret given where it must not be.
                raise CommandError(
                    f"field {name!r} is secret: pass it on standard input with "
                    f"--secret-stdin {name}, never on the command line"
                )
            values[name] = value
        names = options["secret_stdin"]
        for name in names:
            spec = by_name.get(name)
            if spec is None:
                raise CommandError(
                    f"unknown field {name!r} for type {itype.slug!r} (fields: {known})"
                )
            if not spec.secret:
                raise CommandError(f"field {name!r} is not secret: use --field {name}=VALUE")
        if len(set(names)) != len(names):
            raise CommandError("--secret-stdin names a field twice")
        for name in options["clear"]:
            if name not in by_name:
                raise CommandError(
                    f"unknown field {name!r} for type {itype.slug!r} (fields: {known})"
                )
        secrets = self._read_secrets(names)
        enabled = True if options["enable"] else False if options["disable"] else None
        actor = Actor.system()
        try:
            if existing is None:
                integration = create_integration(
                    slug,
                    itype.slug,
                    actor=actor,
                    label=options["label"] or "",
                    values=values,
                    secrets=secrets,
                    custom_fields=definitions if itype.custom else None,
                    enabled=enabled if enabled is not None else True,
                )
                verb = "created"
            else:
                integration = update_integration(
                    existing,
                    actor=actor,
                    label=options["label"],
                    values=values,
                    secrets=secrets,
                    clear=options["clear"],
                    custom_fields=definitions,
                    enabled=enabled,
                )
                verb = "updated"
        except IntegrationError as exc:
            raise CommandError(str(exc)) from None
        changed = sorted(set(values) | {n for n, v in secrets.items() if v} | set(options["clear"]))
        detail = f" ({', '.join(changed)})" if changed else ""
        state = "enabled" if integration.enabled else "disabled"
        self.stdout.write(f"{verb} integration {integration.slug} [{itype.slug}, {state}]{detail}")

    @sensitive_variables()
    def _read_secrets(self, names: list[str]) -> dict[str, str]:
        if not names:
            return {}
        stdin = sys.stdin
        if stdin is None:
            raise CommandError("--secret-stdin needs standard input")
        if stdin.isatty():
            return {name: getpass.getpass(f"{name}: ") for name in names}
        if len(names) == 1:
            value = stdin.read()
            secrets = {names[0]: value.rstrip("\r\n")}
        else:
            lines = stdin.read().splitlines()
            if len(lines) < len(names):
                raise CommandError(
                    f"standard input has {len(lines)} line(s) for {len(names)} secrets "
                    f"({', '.join(names)}): give one line per secret"
                )
            secrets = dict(zip(names, lines, strict=False))
        empty = [n for n, v in secrets.items() if not v]
        if empty:
            raise CommandError(
                f"standard input is empty for {', '.join(empty)}: nothing to set "
                "(use --clear NAME to remove a secret)"
            )
        return secrets
