"""Re-encrypt every stored secret under the first key of CONSOLE_ENCRYPTION_KEYS.

Rotation: put the new key first and keep the old one after it, run this command, then
remove the old key. Batches commit one by one; an interrupted run resumes where it stopped
and a second run changes nothing. A secret no configured key can decrypt stops the run
with exit status 1, naming its integration and field; nothing is changed for it."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tools_app.integrations import vault
from tools_app.integrations.errors import RotationError
from tools_app.integrations.rotation import rotate_keys


class Command(BaseCommand):
    help = "Re-encrypt every stored secret under the first encryption key."
    # The key checks' errors are what this command is run about; it checks keys itself.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch-size",
            type=int,
            default=500,
            help="Secrets re-encrypted per transaction (default 500).",
        )

    def handle(self, *args, batch_size: int, **options) -> None:
        if batch_size < 1:
            self.stderr.write("--batch-size must be at least 1")
            raise SystemExit(2)
        try:
            vault.keyring()
        except vault.KeyConfigurationError as exc:
            raise CommandError(str(exc)) from None
        if vault.is_development_key():
            self.stderr.write(
                "warning: CONSOLE_ENCRYPTION_KEYS is not set; using the development key file"
            )
        try:
            result = rotate_keys(batch_size=batch_size)
        except RotationError as exc:
            self.stdout.write(f"re-encrypted {exc.rotated} secrets before stopping")
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"re-encrypted {result.rotated} secrets under the first key "
            f"({result.already_current} already were; {result.total} in total)"
        )
