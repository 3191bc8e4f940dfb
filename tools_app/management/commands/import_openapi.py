"""`manage.py import_openapi FILE_OR_URL [--prefix P] [--operation ID ...] [--server URL]`
(docs/http-tools.md, "Importing OpenAPI"): draft kind: http tools from an OpenAPI 3.0/3.1 document.

One line per operation: created / skipped (reason). All or nothing: when any chosen
operation cannot be imported, its line says why and nothing is imported. A URL is fetched
through the console's egress policy, read up to the document size cap. `--server` gives the
API's base URL when the document's server is relative, templated or not the one to use.
Exit 0 on success, 1 when the document or an operation is refused, 2 on bad usage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tools_app.audit import Actor
from tools_app.http_tools.openapi import document as openapi_document
from tools_app.http_tools.openapi import plan
from tools_app.http_tools.openapi.document import MAX_DOCUMENT, OpenApiError


class Command(BaseCommand):
    help = (
        "Create draft HTTP tools from an OpenAPI 3.0/3.1 document (JSON or YAML, a file or "
        "an https URL). Nothing is imported when any chosen operation cannot be."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source", metavar="FILE_OR_URL")
        parser.add_argument("--prefix", default="", help="Prefix of the tools' names.")
        parser.add_argument(
            "--operation",
            action="append",
            dest="operations",
            metavar="ID",
            help="An operationId (or 'METHOD /path') to import; repeat it. Default: all.",
        )
        parser.add_argument(
            "--server", default="", help="The API's base URL, instead of the document's."
        )

    def handle(
        self, *args: Any, source: str, prefix: str, operations: list[str] | None, server: str,
        **options: Any,
    ) -> None:  # fmt: skip
        data, origin = self._read(source)
        try:
            lines = plan.import_document(
                data,
                operations,
                actor=Actor.system(),
                prefix=prefix,
                origin=origin,
                server=server,
            )
        except OpenApiError as exc:
            raise CommandError(f"{source}: {exc}; nothing imported", returncode=1) from None
        except plan.ImportRefused as exc:
            for line in exc.lines:
                self.stdout.write(str(line))
            raise CommandError(str(exc), returncode=1) from None
        for line in lines:
            self.stdout.write(str(line))
            for warning in line.warnings:
                self.stdout.write(f"  warning: {warning}")

    def _read(self, source: str) -> tuple[bytes, str]:
        if source.startswith(("https://", "http://")):
            return self._fetch(source), source
        path = Path(source)
        if not path.is_file():
            raise CommandError(f"{source}: no such file", returncode=2)
        size = path.stat().st_size
        if size > MAX_DOCUMENT:  # refused by its size, before a byte is parsed
            raise CommandError(
                f"{source}: the document is {size / 1048576:.1f} MiB; at most "
                f"{MAX_DOCUMENT // 1048576} MiB are read; nothing imported",
                returncode=1,
            )
        return path.read_bytes(), path.name

    def _fetch(self, url: str) -> bytes:
        try:
            return openapi_document.fetch_document(url)
        except OpenApiError as exc:
            raise CommandError(str(exc), returncode=1) from None
