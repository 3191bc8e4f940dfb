"""The seed tools' own test cases (seed/tools/*/cases.yaml): they parse and check against
their TOOL.md, and each one a code tool runs offline passes when the real runner runs it in
its sandbox. (The console's replay, runs/replay.py, runs them through start_run; here the
runner is called as tests/seed/test_seed_tools.py calls it, with the params start_run
would give it.)"""

from __future__ import annotations

import mimetypes
import shutil
import threading
from pathlib import Path

import pytest

from tests.support import require
from tools_app.cases.document import CASES_FILE, cases_of
from tools_app.cases.evaluate import Outcome, Verdict, evaluate
from tools_app.catalog import bundle
from tools_app.http_tools.checks import ValidationContext
from tools_app.manifest import schema
from tools_app.manifest.folder import validate_tool_dir
from tools_app.manifest.input_files import files_for_code
from tools_app.runner import Limits, RunRequest, run

SEED_TOOLS = Path(__file__).resolve().parents[2] / "seed" / "tools"
# The seed tools that ship cases, and how many each has at least.
WITH_CASES = {"web_fetch": 4, "ocr": 3, "apify_get_run": 1}
NO_CONSOLE = ValidationContext()


def seed_cases(name: str):
    files = bundle.read_tool_dir(SEED_TOOLS / name)
    manifest = validate_tool_dir(SEED_TOOLS / name, context=NO_CONSOLE).manifest
    assert manifest is not None
    return manifest, files, cases_of(files, manifest)


def offline_code_cases() -> list[tuple[str, str]]:
    found = []
    for name in sorted(WITH_CASES):
        manifest, _, result = seed_cases(name)
        if manifest.kind != "http":
            found += [(name, case.name) for case in result.cases]
    return found


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


@pytest.mark.parametrize(("name", "case_name"), offline_code_cases())
def test_it_passes_each_seed_case_with_the_real_runner(
    tmp_path: Path, name: str, case_name: str
) -> None:
    if name == "ocr":
        require(shutil.which("tesseract") is None, "tesseract is not installed (python3 dev.py up)")
    manifest, _, result = seed_cases(name)
    case = result.case(case_name)
    assert case is not None and not case.sealed
    params, errors = schema.validate_params(manifest, dict(case.inputs))
    assert errors == []
    params, input_files, file_params = files_for_code(manifest, params)
    tool_dir = tmp_path / "tool"
    shutil.copytree(SEED_TOOLS / name, tool_dir)
    done = run(
        RunRequest(
            tool_dir=tool_dir,
            language=manifest.language,
            entry=manifest.entry_candidates[0],
            params=params,
            tool_call_id="call-1",
            env={},
            secrets={},
            network=manifest.network,
            limits=Limits(timeout=manifest.timeout),
            work_root=tmp_path / "runs",
            input_files=input_files,
            file_params=file_params,
        ),
        on_update=lambda update: None,
        cancel=threading.Event(),
    )
    outcome = Outcome(
        status=done.status,
        result=done.result,
        duration=done.duration,
        artifacts=tuple((a.name, mimetypes.guess_type(a.name)[0] or "") for a in done.artifacts),
    )
    verdict = evaluate(case, outcome)
    assert verdict.verdict == Verdict.PASSED, [c.to_json() for c in verdict.checks]
