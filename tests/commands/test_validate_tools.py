"""`validate_tools` prints a cases.yaml's problems like TOOL.md's: path:line: key: message."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.support import REPO, tool_files


def test_it_prints_cases_problems_with_their_lines(db, tmp_path: Path):
    folder = tmp_path / "demo"
    folder.mkdir()
    files = tool_files("demo", inputs={"url": {"type": "string", "description": "The URL."}})
    for name, data in files.items():
        (folder / name).write_bytes(data)
    (folder / "cases.yaml").write_text(
        "cases:\n  - name: a\n    inputs: {url: x, urll: y}\n"
        "    expect:\n      - jmespath: 'length(a'\n        value: 1\n"
    )
    out = StringIO()
    with pytest.raises(CommandError) as refused:
        call_command("validate_tools", str(folder), stdout=out)
    assert refused.value.returncode == 1
    assert out.getvalue().splitlines() == [
        f"{folder}/cases.yaml:3: cases[0].inputs.urll: unknown input 'urll' "
        "(TOOL.md's inputs: url)",
        f"{folder}/cases.yaml:5: cases[0].expect[0].jmespath: is not a valid JMESPath "
        "expression: it ends too early",
        "1 checked: 0 valid, 1 invalid, 0 warning(s)",
    ]


def test_it_passes_the_seed_tools_with_their_cases(db):
    out = StringIO()
    call_command("validate_tools", str(REPO / "seed" / "tools"), stdout=out)
    assert out.getvalue().strip().endswith("valid, 0 invalid, 0 warning(s)")
