"""A tool folder checked as a whole (tools_app/manifest/folder.py): cases.yaml beside TOOL.md
is checked against the inputs, kind and samples TOOL.md declares, its problems named
`<tool>/cases.yaml` with their lines."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import tool_files
from tools_app.http_tools.checks import ValidationContext
from tools_app.manifest.folder import cases_path, scan, validate_files, validate_tool_dir

NO_CONSOLE = ValidationContext()
INPUTS = {"url": {"type": "string", "description": "The URL."}}
GOOD = b"cases:\n  - name: a\n    inputs: {url: x}\n    expect: [{is_error: false}]\n"
HTTP_TOOLMD = """\
---
name: getter
description: Gets a thing.
kind: http
inputs:
  id: {type: string, description: The id.}
request:
  method: GET
  url: https://api.example.com/things/{{id}}
  response: json
outputs:
  name: {type: string, path: data.name, description: The name.}
---

# Getter
"""
SAMPLE = {"source": "https://docs.example.com", "status": 200, "body": {"data": {"name": "x"}}}


def problems(files: dict[str, bytes], path: str = "tools/demo") -> list[str]:
    return [str(p) for p in validate_files(files, path, context=NO_CONSOLE).problems]


def test_it_accepts_good_cases():
    result = validate_files(
        {**tool_files("demo", inputs=INPUTS), "cases.yaml": GOOD}, "demo", context=NO_CONSOLE
    )
    assert result.ok and result.problems == []


def test_it_reports_cases_problems_beside_tool_md_problems():
    files = {
        **tool_files("demo", inputs=INPUTS),
        "cases.yaml": b"cases:\n  - name: a\n    inputs: {uri: x, url: y}\n    expect: "
        b"[{regex: '['}]\n",
    }
    result = validate_files(files, "tools/demo", context=NO_CONSOLE)
    assert not result.ok and result.manifest is None
    assert [str(p) for p in result.problems] == [
        "tools/demo/cases.yaml:3: cases[0].inputs.uri: unknown input 'uri' (TOOL.md's inputs: url)",
        "tools/demo/cases.yaml:4: cases[0].expect[0].regex: is not a valid regular expression: "
        "unterminated character set at position 0",
    ]


def test_it_still_reads_the_cases_when_tool_md_is_broken():
    files = {"TOOL.md": b"---\nname: demo\n---\n", "index.ts": b"", "cases.yaml": b"cases: [\n"}
    found = problems(files)
    assert any(p.startswith("tools/demo/TOOL.md:") for p in found)
    assert any(p.startswith("tools/demo/cases.yaml:2: yaml: YAML syntax error") for p in found)


def test_it_checks_samples_against_the_http_tools_files():
    files = {
        "TOOL.md": HTTP_TOOLMD.encode(),
        "samples/ok.json": json.dumps(SAMPLE).encode(),
        "cases.yaml": b"cases:\n  - name: a\n    inputs: {id: '1'}\n    sample: ok\n"
        b"    expect: [{is_error: false}]\n",
    }
    assert problems(files, "getter") == []
    files["cases.yaml"] = files["cases.yaml"].replace(b"sample: ok", b"sample: nope")
    assert problems(files, "getter") == [
        "getter/cases.yaml:4: cases[0].sample: no samples/nope.json in the tool (samples: ok)"
    ]
    code = {
        **tool_files("demo", inputs=INPUTS),
        "cases.yaml": GOOD.replace(b"    expect", b"    sample: ok\n    expect"),
    }
    assert "is only for kind: http tools" in problems(code)[0]


def test_it_names_the_cases_file_beside_tool_md():
    assert cases_path("tools/demo/TOOL.md") == "tools/demo/cases.yaml"
    assert cases_path("TOOL.md") == "cases.yaml"


def test_it_validates_the_folder_of_a_cases_yaml_given_to_scan(tmp_path: Path):
    folder = tmp_path / "demo"
    folder.mkdir()
    for name, data in {**tool_files("demo", inputs=INPUTS), "cases.yaml": GOOD}.items():
        (folder / name).write_bytes(data)
    assert validate_tool_dir(folder, context=NO_CONSOLE).ok
    [(label, result)] = list(scan([folder / "cases.yaml"], context=NO_CONSOLE))
    assert label == str(folder) and result.ok
