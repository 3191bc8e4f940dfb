"""Tool folders as data: reading, hashing, atomic writing and zipping."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import zipfile
from pathlib import Path

import pytest

from tools_app.catalog.bundle import (
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_TOOL_BYTES,
    BundleError,
    canonical_sha256,
    check_files,
    read_tool_dir,
    read_zip,
    safe_relpath,
    sweep_retired,
    write_tool_dir_atomic,
    zip_bytes,
)

FILES = {
    "TOOL.md": b"---\nname: t\ndescription: D.\nlanguage: bash\n---\n",
    "index.sh": b"#!/bin/bash\necho ok\n",
    "lib/util.sh": b"x=1\n",
    "lib/deep/data.json": b"{}",
}


def write(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- safe_relpath -----------------------------------------------------------------------


@pytest.mark.parametrize("path", ["TOOL.md", "lib/a.ts", ".hidden", "a b/ü.txt", "x..y"])
def test_it_accepts_safe_relative_paths(path: str) -> None:
    assert safe_relpath(path) == path


@pytest.mark.parametrize(
    "path",
    [
        "",
        "/etc/passwd",
        "../x",
        "a/../../x",
        "a/..",
        "./a",
        "a//b",
        "a/",
        "a\\b",
        "a\x00b",
        "a\nb",
        "C:/x",
        "x" * 256,
        "a/" * 600 + "b",
        "\udcff",
    ],
)
def test_it_refuses_unsafe_paths(path: str) -> None:
    with pytest.raises(BundleError):
        safe_relpath(path)


# --- read_tool_dir ----------------------------------------------------------------------


def test_it_reads_a_folder_into_sorted_relative_paths(tmp_path: Path) -> None:
    root = write(tmp_path / "t", FILES)
    files = read_tool_dir(root)
    assert files == FILES
    assert list(files) == sorted(FILES)


def test_it_skips_only_obvious_junk(tmp_path: Path) -> None:
    root = write(tmp_path / "t", FILES)
    write(root, {"__pycache__/x.pyc": b"", ".DS_Store": b"", "node_modules/a/b.js": b""})
    write(root, {".env.example": b"A=1", "lib/__pycache__/y.pyc": b""})
    assert read_tool_dir(root) == {**FILES, ".env.example": b"A=1"}


def test_it_refuses_symlinks_inside(tmp_path: Path) -> None:
    root = write(tmp_path / "t", FILES)
    os.symlink("/etc/passwd", root / "lib" / "passwd")
    with pytest.raises(BundleError, match="symbolic link"):
        read_tool_dir(root)


def test_it_refuses_a_symlinked_folder_inside(tmp_path: Path) -> None:
    root = write(tmp_path / "t", FILES)
    os.symlink(tmp_path, root / "up")
    with pytest.raises(BundleError, match="symbolic link"):
        read_tool_dir(root)


def test_it_reads_a_tool_folder_reached_through_a_symlink(tmp_path: Path) -> None:
    root = write(tmp_path / "t", FILES)
    os.symlink(root, tmp_path / "link")
    assert read_tool_dir(tmp_path / "link") == FILES


def test_it_refuses_special_files(tmp_path: Path) -> None:
    root = write(tmp_path / "t", FILES)
    os.mkfifo(root / "pipe")
    with pytest.raises(BundleError, match="not a regular file"):
        read_tool_dir(root)


def test_it_refuses_a_file_that_is_too_big(tmp_path: Path) -> None:
    root = write(tmp_path / "t", {"big.bin": b"x" * (MAX_FILE_BYTES + 1)})
    with pytest.raises(BundleError, match="big.bin"):
        read_tool_dir(root)


def test_it_refuses_a_tool_that_is_too_big(tmp_path: Path) -> None:
    count = MAX_TOOL_BYTES // MAX_FILE_BYTES + 1
    root = write(tmp_path / "t", {f"f{i}": b"x" * MAX_FILE_BYTES for i in range(count)})
    with pytest.raises(BundleError, match="bytes"):
        read_tool_dir(root)


def test_it_refuses_too_many_files(tmp_path: Path) -> None:
    root = write(tmp_path / "t", {f"f{i}": b"" for i in range(MAX_FILES + 1)})
    with pytest.raises(BundleError, match=str(MAX_FILES)):
        read_tool_dir(root)


def test_it_refuses_a_path_that_is_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(BundleError):
        read_tool_dir(tmp_path / "missing")


# --- canonical_sha256 ---------------------------------------------------------------------


def test_it_hashes_independently_of_dict_order() -> None:
    reordered = dict(reversed(list(FILES.items())))
    assert canonical_sha256(reordered) == canonical_sha256(FILES)


def test_it_hashes_length_prefixed_paths_and_contents() -> None:
    # The documented algorithm, recomputed by hand (sync clients do the same).
    files = {"b": b"2", "a": b"1"}
    digest = hashlib.sha256()
    for path, data in sorted(files.items()):
        digest.update(len(path).to_bytes(8, "big") + path.encode())
        digest.update(len(data).to_bytes(8, "big") + data)
    assert canonical_sha256(files) == digest.hexdigest()


def test_it_tells_apart_where_path_and_content_meet() -> None:
    assert canonical_sha256({"ab": b"c"}) != canonical_sha256({"a": b"bc"})
    assert canonical_sha256({"a": b"", "b": b""}) != canonical_sha256({"a": b"b"})
    assert canonical_sha256({}) == hashlib.sha256().hexdigest()


def test_it_refuses_to_hash_unsafe_paths() -> None:
    with pytest.raises(BundleError):
        canonical_sha256({"../x": b""})


# --- check_files --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "files",
    [
        {"a": b"", "a/b": b""},
        {"a": "text"},
        {"/abs": b""},
        {f"f{i}": b"" for i in range(MAX_FILES + 1)},
        {"big": b"x" * (MAX_FILE_BYTES + 1)},
    ],
)
def test_it_refuses_bad_file_maps(files: dict) -> None:
    with pytest.raises(BundleError):
        check_files(files)


# --- write_tool_dir_atomic ------------------------------------------------------------------


def test_it_writes_a_new_folder_with_modes(tmp_path: Path) -> None:
    dest = tmp_path / "tools" / "t"
    write_tool_dir_atomic(dest, FILES)
    assert read_tool_dir(dest) == FILES
    assert mode(dest / "index.sh") == 0o755
    assert mode(dest / "TOOL.md") == 0o644 and mode(dest / "lib" / "util.sh") == 0o644
    assert mode(dest) == 0o755 and mode(dest / "lib") == 0o755
    assert sorted(p.name for p in dest.parent.iterdir()) == ["t"]


def test_it_replaces_an_existing_folder_entirely(tmp_path: Path) -> None:
    dest = write(tmp_path / "tools" / "t", {"old.txt": b"old", "TOOL.md": b"old"})
    write_tool_dir_atomic(dest, FILES)
    assert read_tool_dir(dest) == FILES
    # The old folder is kept whole under a dot name for readers that had it open...
    (retired,) = [p for p in dest.parent.iterdir() if p.name != "t"]
    assert retired.name.startswith(".t.retired-")
    assert read_tool_dir(retired) == {"old.txt": b"old", "TOOL.md": b"old"}
    # ... and deleted once its grace is over.
    sweep_retired(dest.parent, grace=-1)
    assert sorted(p.name for p in dest.parent.iterdir()) == ["t"]


def test_it_modes_ignore_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        write_tool_dir_atomic(tmp_path / "t", FILES)
    finally:
        os.umask(old)
    assert mode(tmp_path / "t" / "TOOL.md") == 0o644


def test_it_leaves_the_old_folder_when_the_new_files_are_bad(tmp_path: Path) -> None:
    dest = write(tmp_path / "tools" / "t", FILES)
    with pytest.raises(BundleError):
        write_tool_dir_atomic(dest, {"../escape": b"x"})
    assert read_tool_dir(dest) == FILES
    assert sorted(p.name for p in dest.parent.iterdir()) == ["t"]


def test_it_replaces_a_symlink_without_following_it(tmp_path: Path) -> None:
    target = write(tmp_path / "elsewhere", {"keep.txt": b"keep"})
    os.symlink(target, tmp_path / "t")
    write_tool_dir_atomic(tmp_path / "t", FILES)
    assert not (tmp_path / "t").is_symlink() and read_tool_dir(tmp_path / "t") == FILES
    assert (target / "keep.txt").read_bytes() == b"keep"


# --- zip --------------------------------------------------------------------------------


def test_it_zips_a_tool_under_its_folder_name() -> None:
    data = zip_bytes("t", FILES)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = archive.namelist()
        assert "t/TOOL.md" in names and "t/lib/deep/data.json" in names
        assert all(name.startswith("t/") for name in names)
        assert archive.read("t/index.sh") == FILES["index.sh"]
        info = archive.getinfo("t/index.sh")
        assert stat.S_IMODE(info.external_attr >> 16) == 0o755
        assert info.date_time == (1980, 1, 1, 0, 0, 0)


def test_it_zips_deterministically() -> None:
    assert zip_bytes("t", FILES) == zip_bytes("t", dict(reversed(list(FILES.items()))))


@pytest.mark.parametrize("name", ["", "a/b", "..", "/t"])
def test_it_refuses_bad_zip_folder_names(name: str) -> None:
    with pytest.raises(BundleError):
        zip_bytes(name, FILES)


def test_it_reads_back_a_zip_it_wrote() -> None:
    assert read_zip(zip_bytes("t", FILES)) == {"t": FILES}


def raw_zip(entries: dict[str, bytes], *, link: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
        if link:
            info = zipfile.ZipInfo(link)
            info.create_system = 3
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, b"/etc/passwd")
    return buffer.getvalue()


def test_it_reads_several_tools_and_skips_zip_junk() -> None:
    data = raw_zip(
        {
            "a/TOOL.md": b"a",
            "b/TOOL.md": b"b",
            "b/__pycache__/x.pyc": b"",
            "__MACOSX/a/._TOOL.md": b"",
            "README.md": b"about",
        }
    )
    assert read_zip(data) == {"a": {"TOOL.md": b"a"}, "b": {"TOOL.md": b"b"}}


@pytest.mark.parametrize(
    "entries",
    [
        {"../evil/TOOL.md": b""},
        {"/abs/TOOL.md": b""},
        {"t/a\\b": b""},
        {"TOOL.md": b"at the root"},
        {"t/big": b"x" * (MAX_FILE_BYTES + 1)},
    ],
)
def test_it_refuses_unsafe_zips(entries: dict[str, bytes]) -> None:
    with pytest.raises(BundleError):
        read_zip(raw_zip(entries))


def test_it_refuses_links_in_a_zip() -> None:
    with pytest.raises(BundleError, match="symbolic link"):
        read_zip(raw_zip({"t/TOOL.md": b""}, link="t/passwd"))


def test_it_refuses_what_is_not_a_zip() -> None:
    with pytest.raises(BundleError):
        read_zip(b"PK\x03\x04 definitely not")
