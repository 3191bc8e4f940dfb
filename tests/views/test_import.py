"""Import (upload a zip of tool folders) and export (download a version as a zip).

Every hostile zip is refused with a clear message and nothing is imported."""

from __future__ import annotations

import io
import os
import stat
import struct
import zipfile

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.support import tool_files
from tests.support.editor import zip_of
from tests.support.forms import submit
from tools_app.audit import Actor
from tools_app.catalog import importer
from tools_app.catalog.versions import save_version
from tools_app.models import AuditEvent, Tool, ToolVersion

MIB = 1024 * 1024


def _upload(client, data: bytes, name: str = "tools.zip", **extra):
    """Choose the file on the import page (and tick what `extra` says), press Import."""
    changes = {"file": SimpleUploadedFile(name, data, "application/zip"), **extra}
    return submit(client, "/tools/-/import/", changes, button="Import")


def _tool_entries(name: str, **kw) -> dict[str, bytes]:
    return {f"{name}/{path}": data for path, data in tool_files(name, **kw).items()}


def _info(name: str, mode: int | None = None) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    if mode is not None:
        info.create_system = 3
        info.external_attr = mode << 16
    return info


def _zip_with(extra: list[tuple[zipfile.ZipInfo, bytes]], base: dict | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in (base if base is not None else _tool_entries("alpha")).items():
            archive.writestr(name, data)
        for info, data in extra:
            archive.writestr(info, data)
    return buffer.getvalue()


def _zeros_zip(name: str, size: int) -> bytes:
    """A zip of one entry of `size` zero bytes, written in chunks (never all in memory)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in _tool_entries("alpha").items():
            archive.writestr(path, data)
        with archive.open(_info(name), "w", force_zip64=True) as member:
            chunk = bytes(MIB)
            for _ in range(size // MIB):
                member.write(chunk)
    return buffer.getvalue()


def _lying_zip(real_size: int, declared: int) -> bytes:
    """A zip whose headers declare `declared` bytes for an entry that inflates to more."""
    data = bytearray(_zeros_zip("alpha/data.bin", real_size))
    # Patch the uncompressed size in the local header and the central directory entry.
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = 0
        while (start := data.find(signature, start)) != -1:
            name_offset = 30 if signature == b"PK\x03\x04" else 46
            name_len = struct.unpack_from("<H", data, start + (26 if name_offset == 30 else 28))[0]
            name = bytes(data[start + name_offset : start + name_offset + name_len])
            if name == b"alpha/data.bin":
                size = struct.unpack_from("<I", data, start + offset)[0]
                if size != 0xFFFFFFFF:  # not a zip64 placeholder
                    struct.pack_into("<I", data, start + offset, declared)
            start += 4
    return bytes(data)


def _assert_nothing_imported() -> None:
    assert not Tool.objects.exists()
    assert not ToolVersion.objects.exists()
    assert not AuditEvent.objects.filter(
        action__in=["tools.import", "tool.version.create"]
    ).exists()
    assert not (settings.DATA_PATH / "tools" / "alpha").exists()


HOSTILE = {
    "path traversal": (
        lambda: _zip_with([(_info("../evil.sh"), b"rm -rf /")]),
        "unsafe entry '../evil.sh'",
    ),
    "traversal inside a tool": (
        lambda: _zip_with([(_info("alpha/../../etc/cron.d/x"), b"x")]),
        "empty, '.' and '..' path parts are not allowed",
    ),
    "absolute path": (
        lambda: _zip_with([(_info("/etc/passwd"), b"root::0:0")]),
        "absolute paths are not allowed",
    ),
    "drive letter": (
        lambda: _zip_with([(_info("C:/Windows/x"), b"x")]),
        "drive letters are not allowed",
    ),
    "backslashes": (
        lambda: _zip_with([(_info("alpha\\..\\..\\x"), b"x")]),
        "backslashes are not allowed",
    ),
    "symlink": (
        lambda: _zip_with([(_info("alpha/link", stat.S_IFLNK | 0o777), b"/etc/passwd")]),
        "alpha/link: symbolic links are not allowed",
    ),
    "duplicate entry": (
        lambda: _zip_with([(_info("alpha/index.ts"), b"again")]),
        "appears twice",
    ),
    "too many files": (
        lambda: _zip_with([(_info(f"alpha/f{n}.txt"), b"x") for n in range(1000)]),
        "the zip holds 1002 files; at most 1,000 are allowed",
    ),
    "toolmd at the root": (
        lambda: zip_of(tool_files("alpha")),
        "TOOL.md is at the top of the zip",
    ),
    # Names that read as other names: bidi controls and other invisible format characters.
    "bidi override": (
        lambda: _zip_with([(_info("alpha/evil\u202egnp.sh"), b"x")]),
        "alpha/evil\\u202egnp.sh: names may not hold invisible formatting characters "
        "(U+202E RIGHT-TO-LEFT OVERRIDE)",
    ),
    "bidi isolate in a folder": (
        lambda: _zip_with([(_info("alpha/lib\u2067/x.ts"), b"x")]),
        "(U+2067 RIGHT-TO-LEFT ISOLATE)",
    ),
    "left-to-right mark": (
        lambda: _zip_with([(_info("alpha/a\u200e.ts"), b"x")]),
        "(U+200E LEFT-TO-RIGHT MARK)",
    ),
    "zero-width space": (
        lambda: _zip_with([(_info("alpha/in\u200bdex.ts"), b"x")]),
        "(U+200B ZERO WIDTH SPACE)",
    ),
    # One file on a case-insensitive disk: which one wins depends on the order of writing.
    "names differing by case": (
        lambda: _zip_with([(_info("alpha/INDEX.ts"), b"x")]),
        "alpha/INDEX.ts and alpha/index.ts: names that differ only by case are not allowed",
    ),
    "folders differing by case": (
        lambda: _zip_with([(_info("alpha/Lib/a.ts"), b"x"), (_info("alpha/lib/b.ts"), b"x")]),
        "alpha/Lib and alpha/lib: names that differ only by case",
    ),
    "tool folders differing by case": (
        lambda: _zip_with([(_info("Alpha/TOOL.md"), b"x")]),
        "Alpha and alpha: names that differ only by case",
    ),
    "normalization": (
        lambda: _zip_with(
            [(_info("alpha/caf\u00e9.ts"), b"x"), (_info("alpha/cafe\u0301.ts"), b"y")]
        ),
        "names that differ only by case are not allowed",
    ),
    "not a zip": (lambda: b"this is not a zip file", "not a readable zip file"),
    "empty zip": (lambda: zip_of({}), "the zip holds no tool folders"),
}


@pytest.mark.filterwarnings("ignore:Duplicate name")  # building the duplicate-entry zip
@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_zips_are_refused_and_nothing_is_imported(developer_client, case):
    build, message = HOSTILE[case]

    response = _upload(developer_client, build())

    assert response.status_code == 400
    html = response.content.decode()
    assert "Refused, nothing imported" in html
    assert message.replace("'", "&#x27;") in html
    _assert_nothing_imported()


def test_more_than_20_mib_unpacked_is_refused(developer_client):
    # Incompressible enough to pass the ratio check: 21 files of 1 MiB of hex text.
    entries = {f"alpha/data{n}.txt": os.urandom(MIB // 2).hex().encode() for n in range(21)}
    data = zip_of({**_tool_entries("alpha"), **entries})
    assert len(data) < importer.MAX_ZIP_BYTES

    response = _upload(developer_client, data)

    assert response.status_code == 400
    assert "the zip unpacks to more than 20 MiB (declared sizes)" in response.content.decode()
    _assert_nothing_imported()


def test_a_zip_bomb_declaring_a_huge_size_is_refused_before_inflating(developer_client):
    data = _zeros_zip("alpha/bomb.bin", 200 * MIB)
    assert len(data) < MIB  # small to upload, huge unpacked

    response = _upload(developer_client, data)

    assert response.status_code == 400
    assert "unpacks to more than 20 MiB" in response.content.decode()
    _assert_nothing_imported()


def test_a_zip_bomb_under_the_size_limit_is_refused_by_its_ratio(developer_client):
    response = _upload(developer_client, _zeros_zip("alpha/bomb.bin", 10 * MIB))

    assert response.status_code == 400
    assert "looks like a zip bomb" in response.content.decode()
    _assert_nothing_imported()


def test_a_zip_lying_about_its_sizes_is_refused(developer_client):
    data = _lying_zip(real_size=8 * MIB, declared=1000)
    [info] = [
        i for i in zipfile.ZipFile(io.BytesIO(data)).infolist() if i.filename.endswith(".bin")
    ]
    assert info.file_size == 1000  # what the zip claims

    response = _upload(developer_client, data)

    assert response.status_code == 400
    assert "alpha/data.bin: cannot be read from the zip" in response.content.decode()
    _assert_nothing_imported()


def test_inflating_stops_at_the_limit_whatever_the_headers_said(monkeypatch):
    # zipfile itself stops at a declared size (and the CRC check fails); the running count
    # while inflating is a second, independent cap: here the declared-size checks are
    # skipped altogether and it still stops.
    monkeypatch.setattr(importer, "MAX_RATIO", 10**9)
    monkeypatch.setattr(importer, "MAX_UNPACKED_BYTES", 2 * MIB)
    archive = zipfile.ZipFile(io.BytesIO(_zeros_zip("alpha/big.bin", 3 * MIB)))
    entries = [i for i in archive.infolist() if not i.is_dir()]

    with pytest.raises(importer.ZipRefused, match="unpacks to more than 2 MiB"):
        importer._read_entries(archive, entries)


def test_an_invalid_tool_means_nothing_is_imported(developer_client):
    entries = {
        **_tool_entries("alpha"),
        **_tool_entries("beta", extra={"timeout": 5000}),
        "gamma/README.md": b"no TOOL.md here",
    }

    response = _upload(developer_client, zip_of(entries))

    assert response.status_code == 422
    html = response.content.decode()
    assert "Nothing imported" in html
    assert "beta/TOOL.md:" in html and "timeout" in html
    assert "gamma/TOOL.md:1: TOOL.md: missing" in html
    assert "alpha</code>: skipped" in html
    _assert_nothing_imported()


def test_a_tool_over_the_per_tool_limits_is_invalid(developer_client):
    entries = {**_tool_entries("alpha"), **{f"alpha/f{n}.txt": b"x" for n in range(250)}}
    response = _upload(developer_client, zip_of(entries))
    assert response.status_code == 422
    assert "a tool may have at most 200" in response.content.decode()
    _assert_nothing_imported()


def test_a_valid_zip_of_several_tools_becomes_drafts(developer_client):
    entries = {
        **_tool_entries("alpha"),
        **_tool_entries("beta", language="python"),
        "alpha/lib/extra.ts": b"export const x = 1;\n",
        "README.md": b"beside the tools: ignored",
        "__MACOSX/._alpha": b"junk",
    }

    response = _upload(developer_client, zip_of(entries), name="my-tools.zip")

    assert response.status_code == 200
    html = response.content.decode()
    assert "alpha</code></a>: imported (version 1)" in html
    alpha = Tool.objects.get(name="alpha")
    beta = Tool.objects.get(name="beta")
    assert alpha.status == beta.status == "draft"  # a developer cannot publish
    version = alpha.versions.get()
    assert version.source == "import"
    assert version.note == "imported from my-tools.zip"
    assert version.author.username == "dave"
    assert set(version.file_bytes()) == {"TOOL.md", "index.ts", "lib/extra.ts"}
    assert beta.language == "python"
    event = AuditEvent.objects.get(action="tools.import")
    assert event.actor == "dave" and "alpha: imported v1" in event.summary


def test_an_admin_can_import_and_publish(console_admin_client, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = _upload(console_admin_client, zip_of(_tool_entries("alpha")), publish="on")

    assert response.status_code == 200
    tool = Tool.objects.get(name="alpha")
    assert tool.published_version.number == 1
    assert (settings.DATA_PATH / "tools" / "alpha" / "TOOL.md").exists()


def test_a_zipped_folder_of_tools_is_read_as_those_tools(developer_client):
    entries = {f"tools/{path}": data for path, data in _tool_entries("alpha").items()}
    entries.update({f"tools/{path}": data for path, data in _tool_entries("beta").items()})

    assert _upload(developer_client, zip_of(entries)).status_code == 200
    assert sorted(Tool.objects.values_list("name", flat=True)) == ["alpha", "beta"]


def test_importing_the_same_content_again_changes_nothing(developer_client):
    data = zip_of(_tool_entries("alpha"))
    _upload(developer_client, data)
    response = _upload(developer_client, data)

    assert "alpha</code></a>: unchanged (version 1)" in response.content.decode()
    assert ToolVersion.objects.count() == 1


def test_export_downloads_a_version_as_a_zip_that_imports_back(developer_client, viewer_client, db):
    save_version("alpha", tool_files("alpha"), actor=Actor.system())
    save_version("alpha", tool_files("alpha", description="Two."), actor=Actor.system())

    response = viewer_client.get("/tools/alpha/versions/1/download.zip")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == 'attachment; filename="alpha-v1.zip"'
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    v1 = ToolVersion.objects.get(number=1)
    assert {
        info.filename.removeprefix("alpha/"): archive.read(info)
        for info in archive.infolist()
        if not info.is_dir()
    } == v1.file_bytes()
    assert AuditEvent.objects.filter(action="tool.export", actor="vera").exists()

    # Importing version 1 back makes it the latest again (a new version 3)...
    response = _upload(developer_client, response.content)
    assert "alpha</code></a>: updated (version 3)" in response.content.decode()
    v3 = ToolVersion.objects.get(number=3)
    assert v3.manifest["description"] == "The alpha tool."
    assert {k: v for k, v in v3.file_bytes().items() if k != "TOOL.md"} == {
        k: v for k, v in v1.file_bytes().items() if k != "TOOL.md"
    }
    # ...and the export of version 3 imports as unchanged.
    again = developer_client.get("/tools/alpha/versions/3/download.zip").content
    assert "unchanged (version 3)" in _upload(developer_client, again).content.decode()


def test_export_of_a_missing_version_is_404(viewer_client, make_tool):
    make_tool("alpha")
    assert viewer_client.get("/tools/alpha/versions/2/download.zip").status_code == 404
    assert viewer_client.get("/tools/alpha/versions/0/download.zip").status_code == 404


def test_import_needs_a_developer(viewer_client, client):
    data = zip_of(_tool_entries("alpha"))
    upload = {"file": SimpleUploadedFile("tools.zip", data, "application/zip")}
    assert viewer_client.post("/tools/-/import/", upload).status_code == 403
    upload["file"].seek(0)
    assert client.post("/tools/-/import/", upload).status_code == 302
    assert not Tool.objects.exists()


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["evil\u202egnp.sh"], "alpha/evil\\u202egnp.sh: names may not hold invisible"),
        (["lib/A.ts", "lib/a.ts"], "alpha/lib/A.ts and alpha/lib/a.ts: names that differ only"),
    ],
    ids=["bidi", "case"],
)
def test_a_folder_with_names_that_read_as_others_is_not_imported(db, tmp_path, names, message):
    folder = tmp_path / "alpha"
    folder.mkdir()
    for path, data in tool_files("alpha").items():
        (folder / path).write_bytes(data)
    for name in names:
        (folder / name).parent.mkdir(exist_ok=True)
        (folder / name).write_bytes(b"x")

    with pytest.raises(importer.ImportRefused) as refused:
        importer.import_tools(importer.read_dir(tmp_path), actor=Actor.system())

    assert message in refused.value.lines[0].detail
    _assert_nothing_imported()
