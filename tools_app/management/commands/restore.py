"""Restore an archive of `manage.py backup` into an empty, migrated database of either
engine: every check first (hashes, schema, emptiness, every sealed value decrypts), then
all rows in one transaction (tools_app/ops/restore.py). --dry-run checks and writes
nothing."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tools_app.integrations import vault
from tools_app.ops import restore
from tools_app.ops.backup import terminal_progress


class Command(BaseCommand):
    help = "Restore a backup archive into an empty database."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("archive", help="The archive `manage.py backup` wrote.")
        parser.add_argument("--dry-run", action="store_true", help="Do every check, write nothing.")
        parser.add_argument("--quiet", action="store_true", help="Print nothing on success.")

    def handle(self, *args, archive: str, dry_run: bool, quiet: bool, **options) -> None:
        if not Path(archive).is_file():
            raise CommandError(f"{archive} does not exist or is not a file", returncode=2)
        progress = None if quiet else terminal_progress(self.stderr._out)
        try:
            result = restore.restore(archive, dry_run=dry_run, progress=progress)
        except (restore.RestoreError, vault.KeyConfigurationError) as exc:
            if progress is not None:
                self.stderr.write("")
            raise CommandError(str(exc)) from None
        if progress is not None:
            self.stderr.write("")
        if quiet:
            return
        migrated = (
            f"; then migrated forward: {', '.join(result.migrated_from)}"
            if result.migrated_from
            else ""
        )
        if result.dry_run:
            self.stdout.write(
                f"dry run: {archive} checks out: {result.rows} rows in {result.tables} "
                f"tables and {result.artifact_files} artifact files would be restored"
                + (
                    f" (then migrated forward: {', '.join(result.migrated_from)})"
                    if result.migrated_from
                    else ""
                )
                + "; nothing was written"
            )
        else:
            self.stdout.write(
                f"restored {result.rows} rows in {result.tables} tables and "
                f"{result.artifact_files} artifact files from {archive}{migrated}"
            )
