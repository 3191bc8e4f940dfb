"""cases.yaml travels with its tool: saved in every version, refused when broken, carried
by the zip export and import and by seed sync, mirrored into DATA_PATH/tools."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.conf import settings

from tests.support import REPO, tool_files
from tools_app.audit import Actor
from tools_app.catalog import bundle, importer
from tools_app.catalog.sync import sync_tools
from tools_app.catalog.versions import InvalidTool, save_version
from tools_app.models import Tool

INPUTS = {
    "url": {"type": "string", "description": "The URL."},
    "token": {"type": "string", "description": "A key.", "optional": True, "sensitive": True},
}
CASES = b"""\
# The demo's cases.
cases:
  - name: refuses_ftp
    inputs: {url: "ftp://example.org"}
    expect:
      - is_error: true
      - contains: only http
"""
BROKEN = b"""\
cases:
  - name: refuses_ftp
    inputs: {url: "ftp://example.org", urll: x}
    expect:
      - regex: "("
"""


def demo_files(cases: bytes = CASES, **kw) -> dict[str, bytes]:
    return {**tool_files("demo", inputs=INPUTS, **kw), "cases.yaml": cases}


def test_it_keeps_cases_yaml_in_every_version(db):
    saved = save_version("demo", demo_files(), actor=Actor.system())
    assert saved.version.file_bytes()["cases.yaml"] == CASES
    changed = CASES.replace(b"only http", b"only fetches http")
    again = save_version("demo", demo_files(changed), actor=Actor.system())
    assert again.version.number == 2
    assert again.version.file_bytes()["cases.yaml"] == changed


def test_it_refuses_to_save_a_broken_cases_yaml(db):
    with pytest.raises(InvalidTool) as refused:
        save_version("demo", demo_files(BROKEN), actor=Actor.system())
    assert [str(p) for p in refused.value.problems] == [
        "demo/cases.yaml:3: cases[0].inputs.urll: unknown input 'urll' (TOOL.md's inputs: "
        "url, token)",
        "demo/cases.yaml:5: cases[0].expect[0].regex: is not a valid regular expression: "
        "missing ), unterminated subpattern at position 0",
    ]
    assert not Tool.objects.filter(name="demo").exists()


def test_it_refuses_a_sensitive_input_written_in_plain(db):
    plain = CASES.replace(b'{url: "ftp://example.org"}', b'{url: "ftp://x", token: hunter2}')
    with pytest.raises(InvalidTool, match="'token' is a sensitive input: it must be sealed"):
        save_version("demo", demo_files(plain), actor=Actor.system())


def test_cases_survive_export_and_import(db):
    saved = save_version("demo", demo_files(), actor=Actor.system())
    # The version page's download (views/editor.tool_download) zips it like this.
    exported = bundle.zip_bytes("demo", saved.version.file_bytes())
    Tool.objects.all().delete()

    tools = importer.read_zip(io.BytesIO(exported))
    lines = importer.import_tools(tools, actor=Actor.system(), origin="demo.zip")

    assert [(line.name, line.status) for line in lines] == [("demo", "imported")]
    version = Tool.objects.get(name="demo").versions.get()
    assert version.file_bytes()["cases.yaml"] == CASES


def test_an_import_with_a_broken_cases_yaml_is_refused_with_its_line(db, tmp_path: Path):
    folder = tmp_path / "tools" / "demo"
    folder.mkdir(parents=True)
    for name, data in demo_files(BROKEN).items():
        (folder / name).write_bytes(data)
    with pytest.raises(importer.ImportRefused) as refused:
        importer.import_tools(importer.read_dir(folder.parent), actor=Actor.system())
    text = "\n".join(str(line) for line in refused.value.lines)
    assert "demo/cases.yaml:3: cases[0].inputs.urll: unknown input 'urll'" in text
    assert not Tool.objects.exists()


def test_seed_sync_carries_cases_and_refuses_broken_ones(db, tmp_path: Path):
    seed = tmp_path / "seed"
    for name, cases in (("demo", CASES), ("broken", BROKEN)):
        (seed / name).mkdir(parents=True)
        files = {**tool_files(name, inputs=INPUTS, version=2), "cases.yaml": cases}
        for path, data in files.items():
            (seed / name / path).write_bytes(data)

    lines = {line.name: line for line in sync_tools(seed)}

    assert lines["demo"].status == "imported"
    assert Tool.objects.get(name="demo").published_version.file_bytes()["cases.yaml"] == CASES
    assert (Path(settings.DATA_PATH) / "tools" / "demo" / "cases.yaml").read_bytes() == CASES
    assert lines["broken"].status == "invalid"
    assert "broken/cases.yaml:5: cases[0].expect[0].regex" in lines["broken"].detail


def test_the_shipped_seed_tools_sync_with_their_cases(db):
    sync_tools(REPO / "seed" / "tools")
    for name in ("web_fetch", "ocr", "apify_get_run"):
        shipped = (REPO / "seed" / "tools" / name / "cases.yaml").read_bytes()
        version = Tool.objects.get(name=name).published_version
        assert version.number >= 2
        assert version.file_bytes()["cases.yaml"] == shipped
