"""The seed tools' own test cases (seed/tools/*/cases.yaml): they parse and check against
their TOOL.md, and every one passes when the console replays it (runs/replay.py: start_run,
the real runner in its sandbox; an http tool's case offline from its sample). Seed sync
publishes without the gate because of this test (docs/cases.md, "The publish gate")."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import require
from tools_app.audit import Actor
from tools_app.cases.document import CASES_FILE, cases_of
from tools_app.catalog import bundle
from tools_app.catalog.sync import sync_tools
from tools_app.http_tools.checks import ValidationContext
from tools_app.manifest.folder import validate_tool_dir
from tools_app.models import Tool
from tools_app.models.cases import CheckStatus
from tools_app.models.runs import RunVia
from tools_app.runs import local, replay

SEED_TOOLS = Path(__file__).resolve().parents[2] / "seed" / "tools"
# The seed tools that ship cases, and how many each has at least.
WITH_CASES = {"web_fetch": 4, "ocr": 3, "apify_get_run": 1}
NO_CONSOLE = ValidationContext()


def seed_cases(name: str):
    files = bundle.read_tool_dir(SEED_TOOLS / name)
    manifest = validate_tool_dir(SEED_TOOLS / name, context=NO_CONSOLE).manifest
    assert manifest is not None
    return manifest, files, cases_of(files, manifest)


@pytest.mark.parametrize("name", sorted(WITH_CASES))
def test_it_ships_cases_that_parse_without_problems(name: str) -> None:
    assert (SEED_TOOLS / name / CASES_FILE).is_file()
    manifest, _, result = seed_cases(name)
    assert [str(p) for p in result.problems] == []
    assert len(result.cases) >= WITH_CASES[name]
    assert all(case.expect for case in result.cases)
    # A seed tool's cases are found by sync once its version is above the first one.
    assert manifest.version >= 2


def test_it_replays_the_http_tools_cases_against_their_samples() -> None:
    manifest, files, result = seed_cases("apify_get_run")
    assert manifest.kind == "http"
    assert all(case.sample and f"samples/{case.sample}.json" in files for case in result.cases)


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(WITH_CASES))
def test_the_console_replays_every_seed_case_green(name: str) -> None:
    """As `test_tools NAME` does: sync the seeds, replay the shipped version's cases
    through start_run and the real runner in its sandbox, in this process."""
    if name == "ocr":
        require(shutil.which("tesseract") is None, "tesseract is not installed (python3 dev.py up)")
    sync_tools(SEED_TOOLS)
    version = Tool.objects.get(name=name).published_version
    check = replay.start_check(version, actor=Actor.system(), via=RunVia.COMMAND, enqueue=False)

    check = local.run_here(check, timeout=300)

    result = replay.check_json(check)
    assert check.status == CheckStatus.PASSED, result["cases"]
    assert result["total"] == len(seed_cases(name)[2].cases)
