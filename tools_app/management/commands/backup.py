"""Write one archive of the console: every table (sealed values as ciphertext), artifact
files kept outside the database and a manifest with hashes, the schema state and the
fingerprints of the keys that sealed the secrets (tools_app/ops/backup.py)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tools_app.ops import backup


class Command(BaseCommand):
    help = "Back up the console's database and artifacts into one archive."
    # A backup is wanted most when something is wrong: the key checks must not stop it.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--output", required=True, help="The archive to write (a .tar).")
        parser.add_argument("--quiet", action="store_true", help="Print nothing (for cron).")

    def handle(self, *args, output: str, quiet: bool, **options) -> None:
        if not Path(output).expanduser().resolve().parent.is_dir():
            raise CommandError(f"the folder of {output} does not exist", returncode=2)
        progress = None if quiet else backup.terminal_progress(self.stderr._out)
        try:
            result = backup.backup(output, progress=progress)
        except backup.BackupError as exc:
            raise CommandError(str(exc)) from None
        if progress is not None:
            self.stderr.write("")
        if not quiet:
            manifest = result.manifest
            self.stdout.write(
                f"wrote {result.path}: {result.rows} rows in {result.tables} tables, "
                f"{result.artifact_files} artifact files, {result.size} bytes; "
                f"{manifest['runs_in_progress']} runs in progress; secrets sealed under "
                f"key{'s' if len(manifest['key_ids']) != 1 else ''} "
                f"{', '.join(manifest['key_ids']) or '(none)'}"
            )
            if manifest["missing_artifacts"]:
                self.stderr.write(
                    f"warning: {len(manifest['missing_artifacts'])} artifact files were "
                    "missing from their storage: " + ", ".join(manifest["missing_artifacts"][:5])
                )
