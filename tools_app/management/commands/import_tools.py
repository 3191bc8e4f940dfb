"""`manage.py import_tools DIR_OR_ZIP [--publish]` (docs/commands.md).

DIR_OR_ZIP is a tool folder, a folder of tool folders, or a .zip of tool folders. Each
tool whose content differs from its latest version becomes a new draft version. One line
per tool. All or nothing, like the import page: when any tool is invalid, nothing is
imported. With --publish, each version then goes through the publish gate
(tools_app/runs/gate.py): its cases are replayed in this process (as `test_tools` does)
and it is published only when every one passes; one that fails stays an imported draft.
Exit 0 on success, 1 when a tool is invalid, the zip is refused or a version's cases
failed, 2 on bad usage."""

from __future__ import annotations

import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tools_app.audit import Actor
from tools_app.catalog import importer
from tools_app.models import ToolVersion
from tools_app.models.cases import CheckStatus
from tools_app.models.runs import RunVia
from tools_app.runs import gate, local, replay
from tools_app.signing.keyring import SigningKeyMissing

MAX_TIMEOUT = 24 * 3600


class Command(BaseCommand):
    help = (
        "Import tools from a tool folder, a folder of tool folders or a .zip: each tool "
        "whose content differs from its latest version becomes a new draft version, published "
        "with --publish when its cases pass. Nothing is imported when any tool is invalid."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source", metavar="DIR_OR_ZIP")
        parser.add_argument(
            "--publish",
            action="store_true",
            help="Publish each imported version whose cases pass (cases.yaml).",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=None,
            metavar="S",
            help="with --publish, how long each tool's cases may take (default: "
            "CONSOLE_CASES_PUBLISH_WAIT_SECONDS, 120)",
        )

    def handle(
        self, *args: Any, source: str, publish: bool, timeout: float | None, **options: Any
    ) -> None:
        if timeout is None:
            timeout = float(settings.CASES_PUBLISH_WAIT_SECONDS)
        if not 0 < timeout <= MAX_TIMEOUT:
            raise CommandError(f"--timeout must be between 0 and {MAX_TIMEOUT} s", returncode=2)
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
            lines = importer.import_tools(tools, actor=Actor.system(), origin=path.name)
        except importer.ImportRefused as exc:
            for line in exc.lines:
                self.stdout.write(str(line))
            raise CommandError(str(exc), returncode=1) from None
        blocked = []
        for line in lines:
            if publish:
                try:
                    line = self._publish(line, timeout)
                except SigningKeyMissing as exc:
                    self.stdout.write(str(line))
                    raise CommandError(
                        f"not published: {exc} (imported as drafts)", returncode=1
                    ) from None
                if not line.published:
                    blocked.append(line.name)
            self.stdout.write(str(line))
        if blocked:
            raise CommandError(
                f"not published, their cases did not pass: {', '.join(blocked)} "
                "(imported as drafts; `manage.py test_tools NAME` shows why)",
                returncode=1,
            )

    def _publish(self, line: importer.ImportLine, timeout: float) -> importer.ImportLine:
        """Publish the line's version through the gate; the line says what happened."""
        version = ToolVersion.objects.select_related("tool").get(
            tool__name=line.name, number=line.version
        )
        if version.pk == version.tool.published_version_id:
            return replace(line, published=True)
        asked = gate.request_publish(
            version, actor=Actor.system(), via=RunVia.COMMAND, enqueue=False
        )
        if asked.check is None:
            detail = "no cases: published untested" if asked.no_cases else ""
            return replace(line, published=asked.published, detail=detail)
        check = local.run_here(asked.check, timeout)
        if check.published:
            return replace(line, published=True)
        result = replay.check_json(check)
        if check.status == CheckStatus.RUNNING:
            detail = "not published: cases still running at the timeout"
        else:
            detail = f"not published: {result['passed']} of {result['total']} case(s) passed"
        return replace(line, detail=detail)

    def _read(self, path: Path) -> list[importer.ToolImport]:
        if path.is_dir():
            return importer.read_dir(path)
        if not zipfile.is_zipfile(path):
            raise CommandError(f"{path}: not a folder or a .zip file", returncode=2)
        return importer.read_zip(path)
