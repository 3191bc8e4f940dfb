"""`manage.py run_tool NAME [--version N] [--params JSON] [--timeout S]`
(docs/commands.md, "run_tool"): run a tool in this process, through the same runner and
sandbox as the browser, with no worker. Progress goes to stderr, the result JSON to stdout.

Exit status: 0 when the result's isError is false, 1 when true, 2 on bad usage (unknown
tool or version, params that are not JSON or do not match the inputs)."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tools_app.audit import Actor
from tools_app.manifest.toolmd import NAME_RE
from tools_app.models import Tool, ToolVersion
from tools_app.models.runs import RunVia
from tools_app.runs import execute, start

MAX_TIMEOUT = 24 * 3600


class Command(BaseCommand):
    help = (
        "Run a tool in this process (no worker needed) through the sandboxed runner. "
        "Progress updates go to stderr, the final result JSON to stdout. Exit 0 when the "
        "result's isError is false, 1 when true, 2 on bad usage."
    )

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        # docs/commands.md promises `--version N`; Django's own --version (print Django's version)
        # gives way to it.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", metavar="NAME", help="the tool's name")
        parser.add_argument(
            "--version",
            type=int,
            metavar="N",
            help="run version N (drafts too); default: the published version, else the latest",
        )
        parser.add_argument(
            "--params",
            default="{}",
            metavar="JSON",
            help="the params as a JSON object; '-' reads it from stdin (keeps secrets out "
            "of the process list)",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            metavar="S",
            help="wall-time limit in seconds instead of the tool's own timeout",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        version = self._version(options["name"], options["version"])
        params = self._params(options["params"])
        timeout = options["timeout"]
        if timeout is not None and not 0 < timeout <= MAX_TIMEOUT:
            raise CommandError(f"--timeout must be between 0 and {MAX_TIMEOUT} s", returncode=2)
        try:
            run = start.start_run(
                version,
                params,
                actor=Actor.system(),
                via=RunVia.COMMAND,
                timeout=timeout,
                enqueue=False,
            )
        except start.InvalidParams as exc:
            for error in exc.errors:
                self.stderr.write(f"params: {error}")
            raise CommandError(
                f"invalid params for {version.tool.name} v{version.number}", returncode=2
            ) from None

        self.stderr.write(f"run {run.pk}: {version.tool.name} v{version.number} started")
        finished = execute.execute_run(run.pk, on_progress=self._progress)
        if finished is None:  # someone cancelled it between start and claim
            run.refresh_from_db()
            finished = run
        self.stdout.write(json.dumps(finished.result, ensure_ascii=False))
        duration = f" in {finished.duration:.2f} s" if finished.duration is not None else ""
        isolation = f", isolation {finished.isolation}" if finished.isolation else ""
        self.stderr.write(f"run {run.pk}: {finished.status}{duration}{isolation}")
        for notice in finished.notices:
            self.stderr.write(f"notice: {notice}")
        if not finished.result or finished.result.get("isError"):
            raise CommandError(f"{version.tool.name} reported an error", returncode=1)

    def _version(self, name: str, number: int | None) -> ToolVersion:
        tool = Tool.objects.filter(name=name).first() if NAME_RE.fullmatch(name) else None
        if tool is None:
            raise CommandError(f"no tool is named {name!r}", returncode=2)
        if number is not None:
            version = tool.versions.filter(number=number).first()
            if version is None:
                raise CommandError(f"{name} has no version {number}", returncode=2)
            return version
        number = tool.published_version.number if tool.published_version else tool.latest_number
        return tool.versions.get(number=number)

    def _params(self, raw: str) -> object:
        if raw == "-":
            raw = sys.stdin.read()
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CommandError(
                f"--params is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                returncode=2,
            ) from None
        except (ValueError, RecursionError):
            raise CommandError(
                "--params is not usable JSON: a number is too long or the nesting is too deep",
                returncode=2,
            ) from None

    def _progress(self, content: list[dict[str, Any]]) -> None:
        texts = [block.get("text", "") for block in content if block.get("type") == "text"]
        self.stderr.write("progress: " + (" ".join(texts) if texts else json.dumps(content)))
