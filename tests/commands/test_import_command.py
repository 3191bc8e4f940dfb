"""`manage.py import_tools DIR_OR_ZIP [--publish]`: one line per tool, exit 0/1/2."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.support import console_env, manage, tool_files
from tests.support.cases import CASES, greet_files
from tests.support.editor import zip_of
from tools_app.models import AuditEvent, CaseCheck, Tool, ToolVersion


def _write_tool(folder: Path, name: str, **kw) -> Path:
    path = folder / name
    path.mkdir(parents=True)
    for rel, data in tool_files(name, **kw).items():
        (path / rel).write_bytes(data)
    return path


def _run(*args: str) -> tuple[str, int]:
    out = io.StringIO()
    try:
        call_command("import_tools", *args, stdout=out)
    except CommandError as exc:
        return out.getvalue() + f"ERROR {exc}\n", exc.returncode
    return out.getvalue(), 0


def test_it_imports_a_folder_of_tools_as_drafts(db, tmp_path):
    _write_tool(tmp_path / "tools", "alpha")
    _write_tool(tmp_path / "tools", "beta", language="python")

    out, code = _run(str(tmp_path / "tools"))

    assert code == 0
    assert out.splitlines() == ["alpha: imported v1", "beta: imported v1"]
    assert {t.name: t.status for t in Tool.objects.all()} == {"alpha": "draft", "beta": "draft"}
    assert ToolVersion.objects.filter(source="import", author=None).count() == 2
    assert AuditEvent.objects.get(action="tools.import").actor == "system"


def test_a_new_version_only_when_the_content_differs(db, tmp_path):
    tool = _write_tool(tmp_path, "alpha")
    assert _run(str(tool)) == ("alpha: imported v1\n", 0)
    assert _run(str(tool)) == ("alpha: unchanged v1\n", 0)

    (tool / "index.ts").write_text("export async function execute() { return {content: []}; }\n")
    assert _run(str(tool)) == ("alpha: updated v2\n", 0)
    assert Tool.objects.get(name="alpha").latest_number == 2


@pytest.mark.django_db(transaction=True)
def test_publish_and_zip(tmp_path):
    archive = tmp_path / "tools.zip"
    entries = {f"alpha/{p}": d for p, d in tool_files("alpha").items()}
    archive.write_bytes(zip_of(entries))

    out, code = _run(str(archive), "--publish")

    assert (out, code) == ("alpha: imported v1, published (no cases: published untested)\n", 0)
    assert Tool.objects.get(name="alpha").published_version.number == 1
    assert (settings.DATA_PATH / "tools" / "alpha" / "TOOL.md").exists()


def test_an_invalid_tool_imports_nothing_and_exits_1(db, tmp_path):
    src = tmp_path / "src"
    _write_tool(src, "alpha")
    _write_tool(src, "beta", extra={"network": "maybe"})
    (src / "not_a_tool").mkdir()
    (src / "not_a_tool" / "notes.txt").write_text("hi")

    out, code = _run(str(src))

    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("alpha: skipped (valid, but nothing is imported")
    assert lines[1].startswith("beta: invalid (beta/TOOL.md:")
    assert "network" in lines[1]
    assert lines[2].startswith("not_a_tool: invalid (not_a_tool/TOOL.md:1: TOOL.md: missing")
    assert lines[3] == "ERROR 2 invalid tool(s); nothing imported"
    assert not Tool.objects.exists()


def test_a_hostile_zip_is_refused_with_exit_1(db, tmp_path):
    archive = tmp_path / "evil.zip"
    archive.write_bytes(zip_of({**{f"alpha/{p}": d for p, d in tool_files("alpha").items()},
                                "../../etc/x": b"x"}))  # fmt: skip

    out, code = _run(str(archive))

    assert code == 1
    assert "refused: unsafe entry '../../etc/x'" in out and "nothing imported" in out
    assert not Tool.objects.exists()


def test_bad_usage_exits_2(db, tmp_path):
    assert _run(str(tmp_path / "missing"))[1] == 2
    not_zip = tmp_path / "tools.txt"
    not_zip.write_text("hello")
    assert _run(str(not_zip))[1] == 2


def test_exit_codes_from_the_command_line(tmp_path):
    env = console_env(tmp_path)

    def command(*args: str) -> subprocess.CompletedProcess:
        return manage(*args, env=env, timeout=120)

    assert command("import_tools").returncode == 2  # missing argument
    assert command("import_tools", str(tmp_path / "nope")).returncode == 2
    assert command("migrate", "-v", "0").returncode == 0
    _write_tool(tmp_path / "tools", "alpha")
    done = command("import_tools", str(tmp_path / "tools"))
    assert (done.returncode, done.stdout) == (0, "alpha: imported v1\n")
    _write_tool(tmp_path / "bad", "beta", extra={"timeout": 0})
    assert command("import_tools", str(tmp_path / "bad")).returncode == 1


def _write_greet(folder: Path, cases: str) -> Path:
    path = folder / "greet"
    path.mkdir(parents=True, exist_ok=True)
    for rel, data in greet_files(cases).items():
        (path / rel).write_bytes(data)
    return path


def test_it_publishes_through_the_gate_when_the_cases_pass(db, tmp_path):
    _write_greet(tmp_path / "tools", CASES)

    out, code = _run(str(tmp_path / "tools"), "--publish")

    assert (out, code) == ("greet: imported v1, published\n", 0)
    tool = Tool.objects.get(name="greet")
    assert tool.published_version.number == 1
    check = CaseCheck.objects.get(version=tool.published_version)
    assert (check.status, check.published, check.total) == ("passed", True, 2)


def test_a_version_whose_cases_fail_stays_an_imported_draft_and_exits_1(db, tmp_path):
    _write_greet(tmp_path / "tools", CASES.replace("hello Ada", "goodbye Ada"))

    out, code = _run(str(tmp_path / "tools"), "--publish")

    assert code == 1
    assert "greet: imported v1 (not published: 1 of 2 case(s) passed)" in out
    assert "not published, their cases did not pass: greet" in out
    tool = Tool.objects.get(name="greet")
    assert tool.published_version is None
    assert tool.versions.get().is_draft
    assert not AuditEvent.objects.filter(action="tool.publish").exists()


def test_an_already_published_unchanged_version_is_not_checked_again(db, tmp_path):
    _write_greet(tmp_path / "tools", CASES)
    _run(str(tmp_path / "tools"), "--publish")

    out, code = _run(str(tmp_path / "tools"), "--publish")

    assert (out, code) == ("greet: unchanged v1, published\n", 0)
    assert CaseCheck.objects.count() == 1


def test_a_bad_timeout_is_bad_usage(db, tmp_path):
    _write_greet(tmp_path / "tools", CASES)
    out, code = _run(str(tmp_path / "tools"), "--publish", "--timeout", "0")
    assert code == 2 and "--timeout must be between" in out
    assert not Tool.objects.exists()
