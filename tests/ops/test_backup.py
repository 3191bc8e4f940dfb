"""manage.py backup and restore (tools_app/ops/backup.py, tools_app/ops/restore.py,
docs/operations.md "Backup and restore"): round trips between the engines through the
commands, every refusal (each test fails without its check), the canary, and a backup
taken while a run is in progress."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import time
import uuid
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.apps import apps
from django.core.management import CommandError, call_command
from django.db import connection, models

from tests.support import MANAGE, REPO, console_env, manage, require, tool_files
from tools_app.audit import Actor
from tools_app.integrations import vault
from tools_app.integrations.rotation import SEALED
from tools_app.integrations.service import create_integration
from tools_app.models import AuditEvent, Integration, Run, RunArtifact, Tool
from tools_app.ops import backup
from tools_app.ops.restore import BLANK_SECOND as RESTORE_BLANK
from tools_app.ops.restore import SEEDED, RestoreError, restore

CANARY = f"canary-backup-{uuid.uuid4().hex}"

# A console with data of every kind the commands create, run in the source's process.
POPULATE = """
from django.utils import timezone
from tests.support import make_user, tool_files
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.integrations.service import create_integration
from tools_app.models import AgentToken, Run, RunArtifact, RunUpdate, Tool
from tools_app.models.runs import ArtifactStore
from django.conf import settings

from tools_app.signing import keyring

keyring.ensure(actor=Actor.system())
admin = make_user("ada", "admin")
make_user("vera", "viewer")
actor = Actor(user=admin)
save_version("alpha", tool_files("alpha", "python"), actor=actor, publish=True)
save_version("alpha", tool_files("alpha", "python", description="Second."), actor=actor)
create_integration("apify", "apify", actor=actor, secrets={"token": "s3cret-for-backup"})
AgentToken.issue("agent", ["tools:invoke"])
tool = Tool.objects.get(name="alpha")
done = Run.objects.create(
    tool=tool, version=tool.published_version, via="api", status="succeeded", user=admin,
    # Backslashes, quotes, a newline and a tab: what JSON and COPY both escape.
    params={"b": 1, "a": [1, 2]},
    result={"content": [{"type": "text", "text": "ok \\\\ \\"q\\" \\n\\t \u00e9 \\\\."}]},
    duration=0.123456, started_at=timezone.now(), finished_at=timezone.now(),
)
RunUpdate.objects.create(run=done, seq=1, content={"z": 1, "y": "two"}, progress=1, total=2)
RunArtifact.objects.create(run=done, name="a.bin", size=3, content=b"\\x00\\xffz")
old = settings.ARTIFACTS_PATH / "old" / "report.txt"
old.parent.mkdir(parents=True, exist_ok=True)
old.write_bytes(b"kept before 0006")
RunArtifact.objects.create(run=done, name="report.txt", size=16, store=ArtifactStore.FILE,
                           path="old/report.txt")
Run.objects.create(tool=tool, version=tool.published_version, via="browser", status="running",
                   user=admin, started_at=timezone.now())
# An analytics rollup: its packed durations are bytes (bytea on PostgreSQL).
from tools_app.analytics.rollup import pack
from tools_app.models import RunHour
RunHour.objects.create(tool=tool, version=tool.published_version, hour=timezone.now().replace(
    minute=0, second=0, microsecond=0), runs=1, succeeded=1, durations=pack([0.123456]),
    waits=pack([0.5]))
"""

DIGESTS = (
    "\nimport json\nfrom tools_app.ops.backup import table_digests\n"
    "print(json.dumps(table_digests(), sort_keys=True))\n"
)


def postgres_server() -> str:
    """The PostgreSQL server dev.py's PostgreSQL run uses (TEST_DATABASE_URL, else the one
    on 127.0.0.1:5432), whichever database this run tests on: a move between the engines
    needs both, so these tests run once, in the SQLite run."""
    import psycopg

    url = os.environ.get("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    try:
        psycopg.connect(url, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        require(True, f"a move between SQLite and PostgreSQL needs PostgreSQL at {url}: {exc}")
    return url


@pytest.fixture
def postgres_url():
    """postgres_url(name) -> a new, empty PostgreSQL database, dropped after the test."""
    import psycopg

    url = postgres_server()
    admin = url.rsplit("/", 1)[0] + "/postgres"
    made: list[str] = []

    def make(name: str) -> str:
        database = f"backup_{name}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{database}"')
        made.append(database)
        return url.rsplit("/", 1)[0] + "/" + database

    yield make
    with psycopg.connect(admin, autocommit=True) as conn:
        for database in made:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


# One key for every console of this module, as an admin moving a console keeps theirs.
KEYS = Fernet.generate_key().decode()


@pytest.fixture(scope="module")
def migrated(tmp_path_factory) -> Path:
    """A migrated SQLite database file, copied for each console (migrate takes seconds)."""
    root = tmp_path_factory.mktemp("migrated")
    env = console_env(root, CONSOLE_ENCRYPTION_KEYS=KEYS)
    result = manage("migrate", "-v", "0", env=env)
    assert result.returncode == 0, result.stderr
    return root / "db.sqlite3"


def _console(tmp_path: Path, name: str, migrated: Path, database_url: str | None) -> dict:
    root = tmp_path / name
    root.mkdir()
    env = console_env(root, CONSOLE_ENCRYPTION_KEYS=KEYS)
    if database_url:
        env["DATABASE_URL"] = database_url
        result = manage("migrate", "-v", "0", env=env)
        assert result.returncode == 0, result.stderr
    else:
        shutil.copyfile(migrated, root / "db.sqlite3")
    return env


def _shell(env: dict, code: str) -> list[str]:
    result = manage("shell", "-v", "0", "-c", code, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def round_trip(
    tmp_path: Path, migrated: Path, source_url: str | None, target_url: str | None
) -> None:
    source = _console(tmp_path, "source", migrated, source_url)
    before = json.loads(_shell(source, POPULATE + DIGESTS)[-1])
    archive = tmp_path / "console.tar"
    made = manage("backup", "--output", str(archive), env=source)
    assert made.returncode == 0, made.stderr
    assert "1 runs in progress" in made.stdout
    assert made.stderr == ""  # no progress bar: stderr is not a terminal

    target = _console(tmp_path, "target", migrated, target_url)
    restored = manage("restore", str(archive), env=target)
    assert restored.returncode == 0, restored.stderr
    assert "1 artifact files" in restored.stdout

    # The restored console holds the same rows, and works: its secret decrypts, its pk
    # sequences go on, its pre-0006 artifact file is back, its signing root is pinned.
    check = (
        "from tools_app.integrations.environment import environment_for\n"
        "from tools_app.catalog.versions import save_version\n"
        "from tools_app.audit import Actor\nfrom tests.support import tool_files\n"
        "from tools_app.models import Run, RunArtifact\n"
        "from tools_app.runs.artifacts import open_artifact\n"
        "print(environment_for(['apify'])[0]['APIFY_TOKEN'])\n"
        "print(open_artifact(RunArtifact.objects.get(name='report.txt')).read().decode())\n"
        "print(Run.objects.get(status='running').via)\n"
        + DIGESTS
        + "\nsave_version('beta', tool_files('beta', 'python'), actor=Actor.system(), "
        "publish=True)\n"
    )
    *works, after = _shell(target, check)
    assert json.loads(after) == before
    assert before["tools_app_run"]["count"] == 2 and before["auth_user"]["count"] == 2
    assert works == ["s3cret-for-backup", "kept before 0006", "browser"]
    assert (tmp_path / "target" / "data" / "signing" / "root.json").read_bytes() == (
        tmp_path / "source" / "data" / "signing" / "root.json"
    ).read_bytes()


def test_it_round_trips_sqlite_to_sqlite(tmp_path, migrated):
    round_trip(tmp_path, migrated, None, None)


def test_it_round_trips_sqlite_to_postgresql(tmp_path, migrated, postgres_url):
    round_trip(tmp_path, migrated, None, postgres_url("to_pg"))


def test_it_round_trips_postgresql_to_sqlite(tmp_path, migrated, postgres_url):
    round_trip(tmp_path, migrated, postgres_url("from_pg"), None)


def test_it_migrates_an_older_archive_forward(tmp_path, migrated):
    """An archive of a console one migration behind (backed up before `migrate`): loaded
    into that schema, then migrated forward on the restored rows."""
    source = _console(tmp_path, "source", migrated, None)
    _shell(
        source,
        "from django.core.management import call_command\n"
        "from django.contrib.auth.models import User\n"
        "call_command('migrate', 'tools_app', '0021', verbosity=0)\n"
        "User.objects.create(username='old')",
    )
    archive = tmp_path / "old.tar"
    made = manage("backup", "--quiet", "--output", str(archive), env=source)
    assert made.returncode == 0, made.stderr
    assert made.stdout == made.stderr == ""

    target = _console(tmp_path, "target", migrated, None)
    restored = manage("restore", str(archive), env=target)
    assert restored.returncode == 0, restored.stderr
    assert "then migrated forward: tools_app.0022_secret_ledger" in restored.stdout
    assert _shell(
        target,
        "from django.contrib.auth.models import User\n"
        "from django.db.migrations.recorder import MigrationRecorder\n"
        "from django.db import connection\n"
        "applied = MigrationRecorder(connection).applied_migrations()\n"
        "print(list(User.objects.values_list('username', flat=True)),"
        "('tools_app', '0022_secret_ledger') in applied)",
    ) == ["['old'] True"]


# Runs written while the backup reads: each run and its update in one transaction, so a
# consistent snapshot holds as many updates as runs (and every update's run).
WRITER = """
import pathlib
from django.db import transaction
from tests.support import tool_files
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.models import Run, RunUpdate, Tool
from tools_app.signing import keyring

keyring.ensure(actor=Actor.system())
save_version("alpha", tool_files("alpha", "python"), actor=Actor.system(), publish=True)
tool = Tool.objects.get(name="alpha")
n = 0
while not pathlib.Path(STOP).exists() and n < 200000:
    with transaction.atomic():
        run = Run.objects.create(tool=tool, version=tool.published_version, via="api",
                                 status="running")
        RunUpdate.objects.create(run=run, seq=1, content={"n": n})
    n += 1
    if n == 20:
        pathlib.Path(READY).touch()
print(n)
"""


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_it_backs_up_a_consistent_snapshot_while_runs_are_written(
    tmp_path, migrated, engine, request
):
    url = request.getfixturevalue("postgres_url")("live") if engine == "postgresql" else None
    source = _console(tmp_path, "source", migrated, url)
    ready, stop = tmp_path / "ready", tmp_path / "stop"
    code = f"STOP = {str(stop)!r}\nREADY = {str(ready)!r}\n" + WRITER
    writer = subprocess.Popen(
        [*MANAGE, "shell", "-v", "0", "-c", code], env=source, cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for _ in range(600):
            if ready.exists() or writer.poll() is not None:
                break
            time.sleep(0.1)
        assert ready.exists(), writer.communicate()
        archive = tmp_path / "live.tar"
        made = manage("backup", "--quiet", "--output", str(archive), env=source)
        assert made.returncode == 0, made.stderr
    finally:
        stop.touch()
        out, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err
    with tarfile.open(archive) as tar:
        manifest = json.loads(tar.extractfile(backup.MANIFEST).read())
    runs = manifest["counts"]["tools_app_run"]
    assert 20 <= runs < int(out.strip())  # the writer went on after the snapshot
    assert manifest["counts"]["tools_app_runupdate"] == runs
    assert manifest["runs_in_progress"] == runs

    target = _console(tmp_path, "target", migrated, None)
    restored = manage("restore", str(archive), env=target)
    assert restored.returncode == 0, restored.stderr
    count = "from tools_app.models import Run\nprint(Run.objects.filter(status='running').count())"
    assert _shell(target, count) == [str(runs)]


# ---------------------------------------------------------------------------------------
# In this process: the refusals, against the test database.


@pytest.fixture
def console(db, console_admin):
    """Data with a secret, a published tool and a run in progress."""
    from tools_app.catalog.versions import save_version

    create_integration("apify", "apify", actor=Actor.system(), secrets={"token": CANARY})
    save_version("alpha", tool_files("alpha", "python"), actor=Actor.system(), publish=True)
    tool = Tool.objects.get(name="alpha")
    Run.objects.create(
        tool=tool, version=tool.published_version, via="api", status="running",
        user=console_admin,
    )  # fmt: skip


def take_backup(tmp_path: Path) -> Path:
    path = tmp_path / "console.tar"
    call_command("backup", "--quiet", "--output", str(path))
    return path


def empty_database() -> None:
    """The target a restore wants: migrated, with only what migrate itself wrote."""
    for model in reversed(backup.models_in_order()):
        if model._meta.label_lower not in SEEDED:
            model._base_manager.all()._raw_delete(connection.alias)


def rewrite(path: Path, change) -> None:
    """The archive with change(name, bytes) -> bytes applied to every member."""
    with tarfile.open(path) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    with tarfile.open(path, "w") as tar:
        for member, data in members:
            data = change(member.name, data)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))


def rewrite_rows(path: Path, label: str, change) -> None:
    """The archive with change(row) -> row applied to each line of `label`'s member (a
    list of the manifest's fields), the manifest's hash of the member made to match."""
    with tarfile.open(path) as tar:
        manifest = json.loads(tar.extractfile(backup.MANIFEST).read())
    [table] = [t for t in manifest["tables"] if t["model"] == label]

    def change_member(name, data):
        if name == backup.MANIFEST:
            return json.dumps(manifest).encode()
        if name != table["member"]:
            return data
        lines = gzip.decompress(data).decode().splitlines()
        rows = [json.dumps(change(json.loads(line))) + "\n" for line in lines]
        data = gzip.compress("".join(rows).encode())
        manifest["members"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        return data

    rewrite(path, change_member)  # the manifest is the last member


def edit_manifest(path: Path, edit) -> None:
    def change(name, data):
        if name != backup.MANIFEST:
            return data
        manifest = json.loads(data)
        edit(manifest)
        return json.dumps(manifest).encode()

    rewrite(path, change)


def nothing_written() -> None:
    assert not Tool.objects.exists() and not Integration.objects.exists()
    assert not AuditEvent.objects.exists()


def test_it_restores_into_an_empty_database_and_dry_run_writes_nothing(console, tmp_path):
    before = backup.table_digests()
    path = take_backup(tmp_path)
    empty_database()

    out = io.StringIO()
    call_command("restore", str(path), "--dry-run", stdout=out)
    assert "nothing was written" in out.getvalue()
    nothing_written()

    call_command("restore", str(path), stdout=io.StringIO())
    assert backup.table_digests() == before


def test_it_restores_an_archive_of_the_first_format(console, tmp_path):
    """Format 1 (Django's serialization dicts, JSON as JSON) is still read."""
    before = backup.table_digests()
    path = take_backup(tmp_path)
    with tarfile.open(path) as tar:
        manifest = json.loads(tar.extractfile(backup.MANIFEST).read())
    tables = {t["member"]: t for t in manifest["tables"]}

    def to_first_format(name, data):
        if name == backup.MANIFEST:
            manifest["format"] = 1
            for table in manifest["tables"]:
                del table["fields"]
            return json.dumps(manifest).encode()
        if name not in tables:
            return data
        table = tables[name]
        model = apps.get_model(table["model"])
        texts = {f.name for f in backup.archive_fields(model) if backup.is_json(f)}
        lines = []
        for line in gzip.decompress(data).decode().splitlines():
            row = dict(zip(table["fields"], json.loads(line), strict=True))
            pk = row.pop(table["fields"][0])
            row = {k: json.loads(v) if k in texts and v is not None else v for k, v in row.items()}
            lines.append(json.dumps({"model": table["model"], "pk": pk, "fields": row}))
        data = gzip.compress("".join(f"{line}\n" for line in lines).encode())
        manifest["members"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        return data

    rewrite(path, to_first_format)  # the manifest is the last member: its hashes are new
    empty_database()
    restore(path)
    assert backup.table_digests() == before


def test_a_blank_sealed_value_is_told_from_the_lines_start():
    blank = RESTORE_BLANK.match
    assert blank('["0a1b-2c", "", "x"]') and blank('[12,"",null]') and blank('[-3, ""]')
    for line in (
        '["0a1b", "gAAAA", ""]',  # a token
        '["0a\\", "", ""]',  # an escape in the key: parsed, not guessed
        '[{"a": 1}, ""]',  # not a plain key
        '["x", "\\"", 1]',  # a string starting with an escaped quote
        '["x", "" ]',
    ):
        assert not blank(line), line


def schema() -> list[str]:
    """Every table's indexes and constraints, as the database describes them."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema()"
                " UNION ALL SELECT conrelid::regclass::text || ' ' || pg_get_constraintdef(oid)"
                " FROM pg_constraint WHERE connamespace = current_schema()::regnamespace"
            )
        else:
            cursor.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL")
        return sorted(row[0] for row in cursor.fetchall())


def test_it_leaves_every_index_and_foreign_key_as_it_was(console, tmp_path):
    # On PostgreSQL restore drops them to load faster and makes them again.
    before = schema()
    path = take_backup(tmp_path)
    empty_database()
    restore(path)
    assert schema() == before
    assert len(before) > 50


def test_it_refuses_rows_that_point_at_rows_the_archive_lacks(console, tmp_path):
    path = take_backup(tmp_path)
    fields = backup.archive_fields(Run)
    tool = [f.name for f in fields].index("tool")
    rewrite_rows(path, "tools_app.run", lambda row: [*row[:tool], 999999, *row[tool + 1 :]])
    empty_database()
    with pytest.raises(RestoreError, match="(?s)do not fit the database.*(999999|FOREIGN KEY)"):
        restore(path)
    nothing_written()


def test_it_records_a_run_in_progress(console, tmp_path):
    path = take_backup(tmp_path)
    with tarfile.open(path) as tar:
        manifest = json.loads(tar.extractfile(backup.MANIFEST).read())
    assert manifest["runs_in_progress"] == 1
    assert manifest["counts"]["tools_app_run"] == 1
    assert manifest["key_ids"] == [vault.primary_key_id()]
    secrets = next(s for s in manifest["sealed"] if s["model"] == "tools_app.IntegrationSecret")
    assert secrets["key_ids"] == {vault.primary_key_id(): 1}
    empty_database()
    restore(path)
    assert Run.objects.get().status == "running"


def test_it_refuses_a_truncated_archive(console, tmp_path):
    path = take_backup(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    empty_database()
    with pytest.raises(RestoreError, match="truncated"):
        restore(path)
    nothing_written()


def test_it_refuses_a_truncated_member(console, tmp_path):
    path = take_backup(tmp_path)
    rewrite(path, lambda name, data: data[:-10] if "tools_app.run." in name else data)
    empty_database()
    with pytest.raises(RestoreError, match=r"member data/\d+-tools_app.run.jsonl.gz does not"):
        restore(path)
    nothing_written()


def test_it_refuses_a_tampered_member(console, tmp_path):
    """A member changed into other valid rows: only its hash tells."""
    path = take_backup(tmp_path)

    def tamper(name, data):
        if "tools_app.integration." not in name:
            return data
        text = gzip.decompress(data)
        assert b"true" in text  # enabled
        return gzip.compress(text.replace(b"true", b"false", 1))

    rewrite(path, tamper)
    empty_database()
    with pytest.raises(RestoreError, match="does not match its sha256"):
        restore(path)
    nothing_written()


def test_it_refuses_a_newer_schema_naming_its_migrations(console, tmp_path):
    path = take_backup(tmp_path)
    edit_manifest(path, lambda m: m["migrations"]["tools_app"].append("0099_from_the_future"))
    empty_database()
    with pytest.raises(RestoreError, match="newer than this console's code.*0099_from_the_future"):
        restore(path)
    nothing_written()


def test_it_refuses_values_the_configured_keys_do_not_decrypt(console, tmp_path, settings):
    old = vault.primary_key_id()
    path = take_backup(tmp_path)
    empty_database()
    settings.CONSOLE_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    vault.clear_cache()
    try:
        with pytest.raises(RestoreError) as refused:
            restore(path, dry_run=True)
        message = str(refused.value)
        assert f"apify.token (under key {old})" in message
        assert "SigningKey.private_key_sealed (root key" in message
        assert CANARY not in message
        with pytest.raises(RestoreError):
            restore(path)
    finally:
        vault.clear_cache()
    nothing_written()


def test_it_refuses_a_target_that_is_not_empty(console, tmp_path):
    path = take_backup(tmp_path)
    before = backup.table_digests()
    with pytest.raises(RestoreError, match=r"not empty: .*tools_app_tool \(1 row\)"):
        restore(path)
    with pytest.raises(CommandError, match="not empty"):
        call_command("restore", str(path), "--dry-run")
    assert backup.table_digests() == before


def test_it_restores_all_or_nothing(console, tmp_path):
    """A failure after most tables loaded (here the last table's count) leaves nothing."""
    path = take_backup(tmp_path)
    edit_manifest(path, lambda m: m["tables"][-1].update(count=m["tables"][-1]["count"] + 1))
    empty_database()
    with pytest.raises(RestoreError, match="the manifest says"):
        restore(path)
    nothing_written()


def test_it_never_puts_a_plaintext_secret_in_the_archive(console, tmp_path):
    from tools_app.integrations import ledger

    ledger.head()  # the ledger's own secret, sealed too
    path = take_backup(tmp_path)
    raw = path.read_bytes()
    seen = [raw]
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            data = tar.extractfile(member).read()
            seen.append(gzip.decompress(data) if member.name.endswith(".gz") else data)
    assert b"tools_app.integrationsecret" in b"".join(seen)  # the secret's row is there
    ciphertext = Integration.objects.get().secrets.get().ciphertext.encode()
    assert any(ciphertext in data for data in seen)  # as ciphertext
    forms = [CANARY.encode(), CANARY.encode().hex().encode(), CANARY[::-1].encode()]
    assert [f for f in forms for data in seen if f in data] == []


def test_every_sealed_column_is_listed():
    """A new column holding vault tokens must join rotation.SEALED, or backups would not
    fingerprint it and restores not check it decrypts."""
    from django.apps import apps

    listed = {(c.model.lower(), c.field) for c in SEALED}
    found = {
        (m._meta.label_lower, f.name)
        for m in apps.get_models()
        for f in m._meta.concrete_fields
        if isinstance(f, models.TextField) and ("cipher" in f.name or "sealed" in f.name)
    }
    assert found == listed


def test_it_refuses_a_directory_as_output(db, tmp_path):
    with pytest.raises(CommandError, match="is a directory"):
        call_command("backup", "--output", str(tmp_path))
    assert not RunArtifact.objects.exists()


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_it_shows_progress_on_a_terminal_and_nothing_when_quiet(console, tmp_path):
    screen = Terminal()
    call_command("backup", "--output", str(tmp_path / "a.tar"), stderr=screen, stdout=io.StringIO())
    assert "] " in screen.getvalue() and "tools_app.run" in screen.getvalue()
    quiet, printed = Terminal(), io.StringIO()
    call_command("backup", "--quiet", "--output", str(tmp_path / "b.tar"), stderr=quiet,
                 stdout=printed)  # fmt: skip
    assert quiet.getvalue() == printed.getvalue() == ""
    assert backup.terminal_progress(io.StringIO()) is None  # not a terminal: no bar


def test_it_checks_a_queued_runs_sealed_inputs_behind_a_lookalike_key(console, tmp_path):
    """Most runs have no sealed inputs and are skipped unparsed: never one whose params
    hold a key of the same name."""
    tool = Tool.objects.get(name="alpha")
    run = Run.objects.create(
        tool=tool, version=tool.published_version, via="api", status="queued",
        params={"sealed_params": ""}, sealed_params="gAAAAAnot-a-vault-token",
    )  # fmt: skip
    path = take_backup(tmp_path)
    empty_database()
    with pytest.raises(RestoreError, match=rf"Run.sealed_params \(run {run.pk}\)"):
        restore(path, dry_run=True)
