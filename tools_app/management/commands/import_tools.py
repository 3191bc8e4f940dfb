"""`manage.py import_tools DIR_OR_ZIP [--publish]` (docs/commands.md).

DIR_OR_ZIP is a tool folder, a folder of tool folders, or a .zip of tool folders. Each
tool whose content differs from its latest version becomes a new draft version (or a
published one with --publish). One line per tool. All or nothing, like the import page:
when any tool is invalid, nothing is imported. Exit 0 on success, 1 when a tool is
invalid or the zip is refused, 2 on bad usage."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tools_app.audit import Actor
from tools_app.catalog import importer


class Command(BaseCommand):
    help = (
        "Import tools from a tool folder, a folder of tool folders or a .zip: each tool "
        "whose content differs from its latest version becomes a new draft (or published, "
        "with --publish) version. Nothing is imported when any tool is invalid."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source", metavar="DIR_OR_ZIP")
        parser.add_argument("--publish", action="store_true", help="Publish each imported version.")

    def handle(self, *args: Any, source: str, publish: bool, **options: Any) -> None:
        path = Path(source)
        if not path.exists():
            raise CommandError(f"{source}: no such file or folder", returncode=2)
        try:
            tools = self._read(path)
        except importer.ZipRefused as exc:
            raise CommandError(
                f"{source}: refused: {exc}; nothing imported", returncode=1
            ) from None
        if not tools:
            raise CommandError(f"{source}: no tool folders found; nothing imported", returncode=1)
        try:
            lines = importer.import_tools(
                tools, actor=Actor.system(), publish=publish, origin=path.name
            )
        except importer.ImportRefused as exc:
            for line in exc.lines:
                self.stdout.write(str(line))
            raise CommandError(str(exc), returncode=1) from None
        for line in lines:
            self.stdout.write(str(line))

    def _read(self, path: Path) -> list[importer.ToolImport]:
        if path.is_dir():
            return importer.read_dir(path)
        if not zipfile.is_zipfile(path):
            raise CommandError(f"{path}: not a folder or a .zip file", returncode=2)
        return importer.read_zip(path)
