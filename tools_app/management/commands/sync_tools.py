from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from tools_app.catalog.sync import sync_tools


class Command(BaseCommand):
    help = "Import seed tools into the database and mirror published tools to DATA_PATH/tools."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--seed", type=Path, help="Folder of seed tool folders (seed/tools).")
        parser.add_argument("--data-path", type=Path, help="DATA_PATH to mirror into.")

    def handle(self, *args, seed: Path | None, data_path: Path | None, **options) -> None:
        if seed is not None and not seed.is_dir():
            self.stderr.write(f"--seed {seed}: no such folder")
            raise SystemExit(2)
        lines = sync_tools(seed, data_path)
        for line in lines:
            self.stdout.write(str(line))
        invalid = [line for line in lines if line.status == "invalid"]
        blocked = [line for line in lines if line.status == "blocked"]
        refused = [line for line in lines if line.status == "refused"]
        if invalid or blocked or refused:
            parts = [f"{len(invalid)} invalid seed tool(s) skipped"] if invalid else []
            if blocked:
                parts.append(f"{len(blocked)} not imported for want of a signing key")
            if refused:
                parts.append(f"{len(refused)} not mirrored: they fail their signature check")
            raise CommandError("; ".join(parts), returncode=1)
