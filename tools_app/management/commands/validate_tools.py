"""`manage.py validate_tools PATH...`: check tool folders (docs/commands.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tools_app.http_tools.context import validation_context
from tools_app.manifest.folder import scan


class Command(BaseCommand):
    help = (
        "Validate tools. PATH is a tool folder, a TOOL.md, or a folder of tool folders. "
        "Prints path:line: key: message for every problem; exit 1 if any error."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", metavar="PATH")

    def handle(self, *args: Any, paths: list[str], **options: Any) -> None:
        missing = [path for path in paths if not Path(path).exists()]
        if missing:
            raise CommandError(f"{missing[0]}: no such file or folder", returncode=2)
        checked = invalid = warnings = 0
        for label, result in scan(paths, context=validation_context()):
            checked += 1
            invalid += not result.ok
            warnings += len(result.warnings)
            for problem in result.problems:
                self.stdout.write(str(problem))
            if result.ok and options["verbosity"] >= 2:
                self.stdout.write(f"{label}: ok")
        self.stdout.write(
            f"{checked} checked: {checked - invalid} valid, {invalid} invalid, "
            f"{warnings} warning(s)"
        )
        if invalid:
            raise CommandError(f"{invalid} invalid tool(s)", returncode=1)
