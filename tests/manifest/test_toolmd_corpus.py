"""validate_tools over the TOOL.md corpus in tests/data/toolmd, which carries a copy of every
case of the workplace's shared corpus (../shared, absent from a clone): nothing here needs it.

EXPECTED lines read `case/folder verdict [pattern]`: the verdict is valid or invalid, and one
of the `|`-separated pattern alternatives must appear in validate_tools' output."""

from __future__ import annotations

from dataclasses import dataclass
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tools_app.http_tools.checks import ValidationContext
from tools_app.manifest.folder import scan

# Code tools: their checks read nothing of a console.
NO_CONSOLE = ValidationContext()

OURS = Path(__file__).resolve().parents[1] / "data" / "toolmd"
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "testdata" / "toolmd"


@dataclass(frozen=True)
class Case:
    path: Path
    valid: bool
    patterns: tuple[str, ...]

    def __str__(self) -> str:
        return self.path.parent.name


def load_cases(root: Path) -> list[Case]:
    if not (root / "EXPECTED").is_file():
        return []
    cases = []
    for line in (root / "EXPECTED").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        folder, verdict, *rest = line.split(maxsplit=2)
        assert verdict in ("valid", "invalid"), line
        patterns = tuple(rest[0].strip().split("|")) if rest else ()
        cases.append(Case(root / folder, verdict == "valid", patterns))
    return cases


OUR_CASES = load_cases(OURS)
# The shared corpus's cases, copied byte for byte into tests/data/toolmd.
COPIED_FROM_SHARED = {
    "i01_missing_name", "i02_uppercase_name", "i04_missing_description", "i07_language_ruby",
    "i08_bad_input_type", "i09_enum_no_values", "i12_default_wrong_type", "i14_no_frontmatter",
    "i16_yaml_syntax", "i19_missing_entry", "i21_timeout_too_big", "i23_input_no_description",
    "v01_minimal", "v02_full_python", "v03_bash", "v05_unknown_top_key", "v10_crlf",
}  # fmt: skip


def scan_output(case: Case) -> tuple[bool, str]:
    results = list(scan([case.path], context=NO_CONSOLE))
    output = "\n".join(str(p) for _, result in results for p in result.problems)
    return all(result.ok for _, result in results), output


def command_output(case: Case) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("validate_tools", str(case.path), stdout=out)
    except CommandError as exc:
        return exc.returncode, out.getvalue() + str(exc)
    return 0, out.getvalue()


def check(case: Case, valid: bool, output: str) -> None:
    assert valid == case.valid, output
    if not case.valid:
        lowered = output.lower()
        assert any(p.lower() in lowered for p in case.patterns), (case.patterns, output)


def test_it_has_enough_cases_of_its_own() -> None:
    assert sum(not c.valid for c in OUR_CASES) >= 12 + 15
    assert sum(c.valid for c in OUR_CASES) >= 5 + 5
    assert all(c.path.is_dir() for c in OUR_CASES)


def test_it_carries_every_shared_case() -> None:
    ours = {c.path.relative_to(OURS).parts[0] for c in OUR_CASES}
    assert ours >= COPIED_FROM_SHARED
    # Where the shared corpus is beside the clone, the copy must still match it (where it
    # is not, the copy above is what the suite runs: nothing is skipped).
    for case in load_cases(SHARED):
        folder = case.path.relative_to(SHARED).parts[0]
        assert folder in COPIED_FROM_SHARED, f"copy {SHARED / folder} into {OURS}"
        for file in (SHARED / folder).rglob("*"):
            if file.is_file():
                copy = OURS / file.relative_to(SHARED)
                assert copy.read_bytes() == file.read_bytes(), copy
        copied = OURS / case.path.relative_to(SHARED)
        assert [c.valid for c in OUR_CASES if c.path == copied] == [case.valid]


@pytest.mark.parametrize("case", OUR_CASES, ids=str)
def test_it_gives_each_case_its_verdict_via_scan(case: Case) -> None:
    check(case, *scan_output(case))


@pytest.mark.parametrize("case", OUR_CASES, ids=str)
def test_it_gives_each_case_its_verdict_via_the_command(case: Case) -> None:
    code, output = command_output(case)
    assert code in (0, 1)
    check(case, code == 0, output)


def test_it_checks_a_whole_corpus_in_one_command() -> None:
    out = StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("validate_tools", *(str(c.path) for c in OUR_CASES), stdout=out)
    assert caught.value.returncode == 1
    invalid = sum(not c.valid for c in OUR_CASES)
    summary = out.getvalue().splitlines()[-1]
    assert summary.startswith(f"{len(OUR_CASES)} checked:") and f"{invalid} invalid" in summary


def test_it_exits_0_for_valid_tools_and_prints_a_summary() -> None:
    valid = [str(c.path) for c in OUR_CASES if c.valid]
    out = StringIO()
    call_command("validate_tools", *valid, stdout=out)
    assert f"{len(valid)} valid, 0 invalid" in out.getvalue()


def test_it_exits_2_for_a_path_that_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(CommandError) as caught:
        call_command("validate_tools", str(tmp_path / "nope"), stdout=StringIO())
    assert caught.value.returncode == 2


def test_it_reports_non_tool_folders_in_a_folder_of_tools(tmp_path: Path) -> None:
    good = OURS / "v01_minimal" / "hello"
    root = tmp_path / "tools"
    (root / "hello").mkdir(parents=True)
    for item in good.iterdir():
        (root / "hello" / item.name).write_bytes(item.read_bytes())
    (root / "stray").mkdir()
    (root / "stray" / "notes.txt").write_text("not a tool")
    out = StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("validate_tools", str(root), stdout=out)
    assert caught.value.returncode == 1
    assert f"{root / 'stray' / 'TOOL.md'}:1: TOOL.md: missing" in out.getvalue()
    assert "2 checked: 1 valid, 1 invalid" in out.getvalue()
