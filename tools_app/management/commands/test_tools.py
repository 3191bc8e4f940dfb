"""`manage.py test_tools [NAME...] [--version N] [--junit FILE] [--timeout S] [--worker]`
(docs/commands.md, "test_tools"): replay tools' cases (cases.yaml, docs/cases.md) for CI,
through the same core as the page and the API (tools_app/runs/replay.py). One line per
case; exit 0 when every case passed, 1 when any failed or errored (or had no result within
the timeout), 2 on bad usage (unknown tool or version, bad arguments).

By default the runs execute in this process, one after another, like `run_tool`: CI needs
no worker, broker or web server, only the database, and the output is in the order of the
cases. `--worker` queues them on Celery instead, where the worker pool runs them in
parallel: faster for many cases when a worker is up (it must be; nothing runs otherwise).
Runs count as the operator's (via `command`), like `run_tool`: someone on the console's host
can read the keys anyway, so integrations, sensitive presets and sealed inputs are given."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tools_app.audit import Actor
from tools_app.manifest.limits import MAX_VERSION
from tools_app.manifest.toolmd import NAME_RE
from tools_app.models import CaseCheck, Tool, ToolVersion
from tools_app.models.cases import CaseOutcome, CheckStatus
from tools_app.models.runs import RunVia
from tools_app.runs import local, replay

MAX_TIMEOUT = 24 * 3600
MARK = {
    CaseOutcome.PASSED: "PASS",
    CaseOutcome.FAILED: "FAIL",
    CaseOutcome.ERROR: "ERROR",
    CaseOutcome.PENDING: "TIMEOUT",
}


class Command(BaseCommand):
    help = (
        "Replay tools' cases (cases.yaml): every tool with cases, or those named, at their "
        "latest version (--version N for one tool). One line per case; exit 0 when all "
        "pass, 1 when any fails, 2 on bad usage. Runs in this process unless --worker."
    )

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        # `--version N` as run_tool has it: Django's own --version gives way.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("names", nargs="*", metavar="NAME", help="tools to test (default: all)")
        parser.add_argument(
            "--version",
            type=int,
            metavar="N",
            help="test version N (drafts too) of the one tool named; default: the latest",
        )
        parser.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report")
        parser.add_argument(
            "--timeout",
            type=float,
            metavar="S",
            help="how long to wait for each tool's cases (default: "
            "CONSOLE_CASES_PUBLISH_WAIT_SECONDS, 120)",
        )
        parser.add_argument(
            "--worker",
            action="store_true",
            help="queue the runs on the Celery worker (in parallel) instead of running "
            "them in this process",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        timeout = options["timeout"]
        if timeout is None:
            timeout = float(settings.CASES_PUBLISH_WAIT_SECONDS)
        if not 0 < timeout <= MAX_TIMEOUT:
            raise CommandError(f"--timeout must be between 0 and {MAX_TIMEOUT} s", returncode=2)
        junit = Path(options["junit"]) if options["junit"] else None
        if junit is not None and not junit.parent.is_dir():
            raise CommandError(f"--junit: no folder {junit.parent}", returncode=2)
        versions = self._versions(options["names"], options["version"])
        if not versions:
            self.stdout.write("no tool has cases")
        checks = []
        for version in versions:
            checks.append(self._test(version, timeout=timeout, worker=options["worker"]))
        results = [replay.check_json(check) for check in checks]
        cases = sum(r["total"] for r in results)
        passed = sum(r["passed"] for r in results)
        bad = [r for r in results if r["status"] not in (CheckStatus.PASSED, CheckStatus.EMPTY)]
        if versions:
            self.stdout.write(f"{passed} of {cases} case(s) passed in {len(results)} tool(s)")
        if junit is not None:
            try:
                junit.write_bytes(junit_xml(results))
            except OSError as exc:
                raise CommandError(f"--junit: cannot write {junit}: {exc.strerror}") from None
        if bad:
            raise CommandError(f"cases failed in {', '.join(r['tool'] for r in bad)}", returncode=1)

    def _versions(self, names: list[str], number: int | None) -> list[ToolVersion]:
        if number is not None:
            if len(names) != 1:
                raise CommandError("--version takes exactly one tool NAME", returncode=2)
            if not 1 <= number <= MAX_VERSION:
                raise CommandError(f"--version must be 1..{MAX_VERSION}", returncode=2)
        if not names:
            # Every enabled tool whose latest version has cases.
            latest = [
                tool.versions.get(number=tool.latest_number)
                for tool in Tool.objects.filter(enabled=True).order_by("name")
            ]
            return [v for v in latest if replay.has_cases(v)]
        versions = []
        for name in dict.fromkeys(names):
            tool = Tool.objects.filter(name=name).first() if NAME_RE.fullmatch(name) else None
            if tool is None:
                raise CommandError(f"no tool is named {name!r}", returncode=2)
            wanted = tool.latest_number if number is None else number
            version = tool.versions.filter(number=wanted).first()
            if version is None:
                raise CommandError(f"{name} has no version {wanted}", returncode=2)
            versions.append(version)
        return versions

    def _test(self, version: ToolVersion, *, timeout: float, worker: bool) -> CaseCheck:
        check = replay.start_check(
            version, actor=Actor.system(), via=RunVia.COMMAND, enqueue=worker
        )
        label = f"{version.tool.name} v{version.number}"
        if check.status == CheckStatus.EMPTY:
            self.stdout.write(f"{label}: no cases")
            return check
        wait = local.wait_or_give_up if worker else local.run_here
        check = wait(check, timeout)
        if check.status == CheckStatus.RUNNING:
            self.stderr.write(f"{check.tool.name}: no result within the timeout for some cases")
        for case in replay.check_json(check)["cases"]:
            self.stdout.write(case_line(label, case))
        return check


def case_line(label: str, case: dict[str, Any]) -> str:
    line = f"{MARK.get(case['outcome'], case['outcome'].upper())} {label} {case['name']}"
    why = case["message"] or next(
        (c["message"] for c in case["checks"] if c["verdict"] != "passed"), ""
    )
    return f"{line}: {why}" if why and case["outcome"] != CaseOutcome.PASSED else line


def shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)[:2000]


def junit_xml(results: list[dict[str, Any]]) -> bytes:
    """One <testsuite> per tool, one <testcase> per case: a failed case is a <failure>,
    an errored or unfinished one an <error>, with each check's message."""
    root = ET.Element("testsuites", name="test_tools")
    for result in results:
        label = f"{result['tool']} v{result['version']}"
        counts = {
            "tests": str(result["total"]),
            "failures": str(result["failed"]),
            "errors": str(result["total"] - result["passed"] - result["failed"]),
        }
        suite = ET.SubElement(root, "testsuite", name=label, **counts)
        for case in result["cases"]:
            element = ET.SubElement(
                suite, "testcase", classname=f"{result['tool']}.v{result['version']}",
                name=case["name"],
            )  # fmt: skip
            if case["outcome"] == CaseOutcome.PASSED:
                continue
            tag = "failure" if case["outcome"] == CaseOutcome.FAILED else "error"
            lines = [case["message"]] if case["message"] else []
            for c in case["checks"]:
                lines.append(f"{c['verdict']}: {c['message']}")
                if c["verdict"] != "passed":
                    lines.append(f"  expected: {shown(c.get('expected'))}")
                    lines.append(f"  actual: {shown(c.get('actual'))}")
                    if c.get("diff"):
                        lines.append(c["diff"])
            message = case_line(label, case)
            if case["outcome"] == CaseOutcome.PENDING:
                message += ": no result within the timeout"
            ET.SubElement(element, tag, message=message).text = "\n".join(lines)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"
