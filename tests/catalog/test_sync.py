"""Seed sync semantics (docs/sync.md), each rule with its own test."""

from __future__ import annotations

import io
import json
import os
import subprocess
import threading
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.support import MANAGE, REPO, console_env, manage, tool_files
from tools_app.audit import Actor
from tools_app.catalog import bundle, datapath, shim
from tools_app.catalog.sync import sync_tools
from tools_app.catalog.versions import save_version, set_enabled
from tools_app.models import AuditEvent, Tool, ToolVersion


def write_seed(seed: Path, name: str, version: int = 1, **kw) -> Path:
    folder = seed / name
    folder.mkdir(parents=True, exist_ok=True)
    for path, data in tool_files(name, version=version, **kw).items():
        (folder / path).write_bytes(data)
    return folder


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    path = tmp_path / "seed_tools"
    path.mkdir()
    return path


def statuses(lines) -> dict[str, str]:
    return {line.name: line.status for line in lines}


def mirrored(name: str) -> Path:
    return Path(settings.DATA_PATH) / "tools" / name


def test_it_imports_new_seed_tools_and_mirrors_them(db, seed):
    write_seed(seed, "alpha")
    write_seed(seed, "beta", version=3, language="python")

    lines = sync_tools(seed)

    assert statuses(lines) == {"alpha": "imported", "beta": "imported"}
    beta = Tool.objects.get(name="beta")
    assert beta.published_version.number == 3
    assert beta.seed_version == 3
    assert (mirrored("beta") / "index.py").exists()
    marker = json.loads((mirrored("beta") / datapath.MARKER).read_text())
    assert marker == {"name": "beta", "version": 3, "sha256": beta.published_version.sha256}


def test_it_is_idempotent(db, seed):
    write_seed(seed, "alpha")
    sync_tools(seed)
    before = (mirrored("alpha") / "TOOL.md").stat().st_ino

    lines = sync_tools(seed)

    assert statuses(lines) == {"alpha": "unchanged"}
    assert ToolVersion.objects.count() == 1
    assert (mirrored("alpha") / "TOOL.md").stat().st_ino == before  # not rewritten


def test_it_imports_a_higher_seed_version(db, seed):
    write_seed(seed, "alpha", version=1)
    sync_tools(seed)
    write_seed(seed, "alpha", version=2, description="Better.")

    lines = sync_tools(seed)

    assert statuses(lines) == {"alpha": "updated"}
    tool = Tool.objects.get(name="alpha")
    assert tool.published_version.number == 2
    assert tool.description == "Better."
    assert "Better." in (mirrored("alpha") / "TOOL.md").read_text()


def test_it_never_overwrites_console_edits_with_an_equal_seed_version(db, seed):
    write_seed(seed, "alpha", version=1)
    sync_tools(seed)
    edit = tool_files("alpha", description="Edited in the console.")
    saved = save_version("alpha", edit, actor=Actor.system(), publish=True)
    assert saved.version.number == 2
    write_seed(seed, "alpha", version=2, description="Seed two.")

    lines = sync_tools(seed)

    assert statuses(lines) == {"alpha": "unchanged"}
    tool = Tool.objects.get(name="alpha")
    assert tool.description == "Edited in the console."
    assert "Edited in the console." in (mirrored("alpha") / "TOOL.md").read_text()


def test_it_never_overwrites_with_a_lower_seed_version(db, seed):
    write_seed(seed, "alpha", version=5)
    sync_tools(seed)
    write_seed(seed, "alpha", version=4, description="Older.")

    lines = sync_tools(seed)

    assert statuses(lines) == {"alpha": "unchanged"}
    assert Tool.objects.get(name="alpha").published_version.number == 5


def test_it_reports_invalid_seed_tools_and_syncs_the_rest(db, seed):
    write_seed(seed, "good")
    bad = write_seed(seed, "bad")
    (bad / "TOOL.md").write_text("---\nname: bad\n---\n")  # no description
    no_entry = write_seed(seed, "noentry")
    (no_entry / "index.ts").unlink()
    (seed / "notatool").mkdir()

    lines = sync_tools(seed)

    by_name = {line.name: line for line in lines}
    assert by_name["good"].status == "imported"
    assert by_name["bad"].status == "invalid"
    assert "description" in by_name["bad"].detail
    assert by_name["noentry"].status == "invalid"
    assert "index.ts" in by_name["noentry"].detail
    assert by_name["notatool"].status == "invalid"
    assert not Tool.objects.filter(name__in=["bad", "noentry", "notatool"]).exists()


def test_it_rewrites_a_tampered_mirror(db, seed):
    write_seed(seed, "alpha")
    sync_tools(seed)
    (mirrored("alpha") / "index.ts").write_text("tampered")

    sync_tools(seed)

    assert "tampered" not in (mirrored("alpha") / "index.ts").read_text()


def test_it_never_mirrors_a_version_changed_in_the_database_after_it_was_signed(db, seed):
    write_seed(seed, "alpha")
    sync_tools(seed)
    good = bundle.read_tool_dir(mirrored("alpha"))
    version = Tool.objects.get(name="alpha").published_version
    files = {**version.files, "index.ts": "export async function execute() { /* pwned */ }\n"}
    ToolVersion.objects.filter(pk=version.pk).update(files=files)

    lines = sync_tools(seed)

    (line,) = [line for line in lines if line.status == "refused"]
    assert line.name == "alpha"
    assert "index.ts does not match its signed sha256" in line.detail
    # The folder keeps what was signed; the attacker's code never reaches a loader.
    assert bundle.read_tool_dir(mirrored("alpha")) == good
    with pytest.raises(CommandError, match="1 not mirrored: they fail their signature check"):
        call_command("sync_tools", "--seed", str(seed), stdout=io.StringIO())


def test_it_rewrites_a_mirror_holding_another_version(db, seed):
    write_seed(seed, "alpha")
    sync_tools(seed)
    marker = mirrored("alpha") / datapath.MARKER
    marker.write_text(json.dumps({"name": "alpha", "version": 9, "sha256": "x"}))

    sync_tools(seed)

    assert json.loads(marker.read_text())["version"] == 1


def test_it_removes_disabled_tools_from_the_mirror(db, seed):
    write_seed(seed, "alpha")
    sync_tools(seed)
    tool = Tool.objects.get(name="alpha")

    set_enabled(tool, False, actor=Actor.system())
    sync_tools(seed)

    assert not mirrored("alpha").exists()
    assert ToolVersion.objects.filter(tool=tool).count() == 1  # history is kept


def test_it_reports_but_never_deletes_foreign_folders(db, seed):
    write_seed(seed, "alpha")
    foreign = mirrored("handmade")
    foreign.mkdir(parents=True)
    (foreign / "TOOL.md").write_text("mine")

    lines = sync_tools(seed)

    assert statuses(lines)["handmade"] == "foreign"
    assert (foreign / "TOOL.md").read_text() == "mine"


def test_it_leaves_no_temporary_folders_behind(db, seed):
    write_seed(seed, "alpha")
    sync_tools(seed)
    write_seed(seed, "alpha", version=2)
    sync_tools(seed)

    tools = Path(settings.DATA_PATH) / "tools"
    # The replaced version waits, whole, for readers that had it open, then goes.
    assert [p.name for p in tools.iterdir() if ".retired-" in p.name]
    bundle.sweep_retired(tools, grace=-1)
    expected = [".lock", datapath.KEYS_FILE, datapath.ROOT_FILE, "alpha"]
    assert sorted(p.name for p in tools.iterdir()) == sorted(expected)


def test_readers_never_see_a_half_written_tool(db, seed):
    write_seed(seed, "alpha")
    sync_tools(seed)
    folder = mirrored("alpha")
    stop = threading.Event()
    torn: list[str] = []

    def read_forever() -> None:
        while not stop.is_set():
            try:
                names = {p.name for p in folder.iterdir()}
            except FileNotFoundError:
                torn.append("folder missing")
                continue
            if names and not {"TOOL.md", "index.ts", datapath.MARKER} <= names:
                torn.append(f"partial: {sorted(names)}")

    reader = threading.Thread(target=read_forever)
    reader.start()
    try:
        for version in range(2, 12):
            write_seed(seed, "alpha", version=version)
            sync_tools(seed)
    finally:
        stop.set()
        reader.join()
    # A rename-based swap has one instant where the old folder moved away; the reader may
    # see "missing" at that instant, but never a folder with only some of the files.
    assert not [t for t in torn if t.startswith("partial")]


def test_it_audits_imports(db, seed):
    write_seed(seed, "alpha")
    sync_tools(seed)
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"tool.version.create", "tool.publish", "tools.sync"} <= actions
    assert AuditEvent.objects.filter(actor="system").exists()


def test_the_command_prints_one_line_per_tool(db, seed, tmp_path):
    write_seed(seed, "alpha")
    out = io.StringIO()
    call_command("sync_tools", "--seed", str(seed), "--data-path", str(tmp_path / "d"), stdout=out)
    assert out.getvalue().strip() == "alpha: imported (v1)"
    assert (tmp_path / "d" / "tools" / "alpha" / "TOOL.md").exists()


def test_the_command_exits_1_on_invalid_seed_tools(db, seed):
    bad = write_seed(seed, "bad")
    (bad / "TOOL.md").write_text("no frontmatter")
    with pytest.raises(CommandError) as excinfo:
        call_command("sync_tools", "--seed", str(seed), stdout=io.StringIO())
    assert excinfo.value.returncode == 1


def test_the_command_exits_2_when_the_seed_folder_is_missing(db, tmp_path):
    err = io.StringIO()
    with pytest.raises(SystemExit) as excinfo:
        call_command("sync_tools", "--seed", str(tmp_path / "nope"), stdout=io.StringIO(),
                     stderr=err)  # fmt: skip
    assert excinfo.value.code == 2
    assert f"--seed {tmp_path / 'nope'}: no such folder" in err.getvalue()
    assert not Tool.objects.exists()


def test_the_shipped_seed_tools_all_sync(db):
    lines = sync_tools(REPO / "seed" / "tools")
    assert {line.name for line in lines} >= {
        "web_fetch",
        "web_search",
        "email_db",
        "convert_audio_to_mp3",
        "ocr",
    }
    assert all(line.status == "imported" for line in lines), lines


def _database_for_subprocesses(tmp_path: Path) -> str:
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        import psycopg

        name = f"sync_race_{uuid.uuid4().hex[:8]}"
        admin = url.rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return url.rsplit("/", 1)[0] + "/" + name
    return f"sqlite:///{tmp_path / 'race.sqlite3'}"


@pytest.mark.database  # its processes share a PostgreSQL database in that run
def test_several_processes_starting_at_once_sync_safely(tmp_path, seed):
    """Web servers sync at start-up; several starting together must not clash."""
    for name in ("alpha", "beta", "gamma"):
        write_seed(seed, name, version=2)
    env = console_env(tmp_path, DATABASE_URL=_database_for_subprocesses(tmp_path))
    manage("migrate", "-v", "0", env=env, check=True)
    manage("signing_keys", "create", "--if-missing", env=env, check=True)

    procs = [
        subprocess.Popen(
            [*MANAGE, "sync_tools", "--seed", str(seed)],
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [proc.communicate(timeout=120) for proc in procs]

    assert [proc.returncode for proc in procs] == [0, 0, 0, 0], outputs
    check = (
        "from tools_app.models import ToolVersion;"
        "print(sorted(ToolVersion.objects.values_list('tool__name', 'number')))"
    )
    result = manage("shell", "-v", "0", "-c", check, env=env)
    assert result.stdout.strip() == "[('alpha', 2), ('beta', 2), ('gamma', 2)]"
    for name in ("alpha", "beta", "gamma"):
        assert (tmp_path / "data" / "tools" / name / "index.ts").exists()


def test_it_mirrors_python_and_bash_tools_with_their_generated_index_js(db, seed):
    write_seed(seed, "alpha", language="python")
    write_seed(seed, "beta", language="bash")
    write_seed(seed, "gamma")
    sync_tools(seed)
    for name in ("alpha", "beta"):
        manifest = Tool.objects.get(name=name).published_version.manifest
        assert (mirrored(name) / "index.js").read_bytes() == shim.render(manifest)
    assert not (mirrored("gamma") / "index.js").exists()

    # A copy without it (an older console's, or damaged) is rewritten; the others stay.
    (mirrored("alpha") / "index.js").unlink()
    before = (mirrored("beta") / "index.js").stat().st_ino
    lines = sync_tools(seed)

    assert "rewrote DATA_PATH copy" in next(line.detail for line in lines if line.name == "alpha")
    assert (mirrored("alpha") / "index.js").exists()
    assert (mirrored("beta") / "index.js").stat().st_ino == before
