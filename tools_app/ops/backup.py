"""One archive of a console: every table, the artifact files and the signing root pin, with a
manifest (docs/operations.md "Backup and restore"). No HTTP here; the restore side is
tools_app/ops/restore.py.

The archive is a plain tar, written beside the output under a temporary name and renamed
when complete, so a cron job never leaves half an archive under the real name:

- `data/NNNN-app.model.jsonl.gz`: one model's rows, in dependency order, gzipped: one
  JSON array a line, of the values of the fields the manifest lists for the table
  (archive_fields: the primary key first; foreign keys by pk; many-to-many tables as
  models of their own; a JSON column's value as its JSON text). Format 1, which restore
  still reads, wrote Django's serialization dicts ({"model", "pk", "fields"});
- `artifacts/storage/NAME`, `artifacts/file/PATH`: artifact bytes kept outside the
  database (the storage CONSOLE_ARTIFACT_STORAGE names, or pre-0006 files);
- `files/signing/root.json`: DATA_PATH's signing root pin, when there is one;
- `manifest.json`, last: format version, created_at, the migration state, per table
  its fields and count, the sha256 of every other member, and per sealed column the
  fingerprints
  (vault.key_id, never a key) of the keys that sealed its values.

Sealed values stay ciphertext: nothing here decrypts anything.

The rows are read in one snapshot: on PostgreSQL one REPEATABLE READ READ ONLY
transaction, on SQLite one read transaction (WAL mode, the console's default, makes that
a consistent snapshot while writers go on). Rows stream through .iterator(), so a table
of any size is never loaded at once."""

from __future__ import annotations

import base64
import datetime
import decimal
import hashlib
import io
import json
import os
import tarfile
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from django.apps import apps as global_apps
from django.conf import settings
from django.core.files.storage import storages
from django.db import DEFAULT_DB_ALIAS, connections, models, transaction
from django.utils import timezone
from django.utils.duration import duration_iso_string
from isal import igzip

from tools_app.integrations.rotation import SEALED
from tools_app.models.fields import OrderedJSONField

# 2: lines are arrays of the fields the manifest lists (1: Django's serialization dicts).
FORMAT = 2
MANIFEST = "manifest.json"
ROOT_PIN = "files/signing/root.json"
# Rows fetched per round trip; tables with binary columns (artifacts, up to 10 MiB each)
# fetch a few at a time so memory stays bounded.
CHUNK = 2000
BINARY_CHUNK = 8
BLOCK = 1 << 20  # bytes of JSON lines written to the archive at a time


class BackupError(Exception):
    """The backup cannot be written; the message says why."""


Progress = Callable[[str, int, int], None]  # (what, done, total)


@dataclass
class BackupResult:
    path: Path
    size: int
    rows: int
    tables: int
    artifact_files: int
    manifest: dict[str, Any] = field(repr=False)


# ---------------------------------------------------------------------------------------
# What is in a database, in an order that loads.


def models_in_order(app_registry=global_apps) -> list[type[models.Model]]:
    """Every concrete, managed model with a table (many-to-many tables as models of their
    own), each after the models its foreign keys point at. Tool and ToolVersion point at
    each other: a cycle is broken at a nullable key (Tool.published_version), which both
    engines check at commit anyway (their foreign keys are deferred)."""
    candidates = [
        m
        for m in app_registry.get_models(include_auto_created=True)
        if m._meta.managed and not m._meta.proxy and not m._meta.swapped
    ]
    edges: dict[type[models.Model], list[tuple[type[models.Model], bool]]] = {
        m: [
            (f.related_model, f.null)
            for f in m._meta.concrete_fields
            if f.is_relation and f.related_model is not m and f.related_model in candidates
        ]
        for m in candidates
    }
    ordered: list[type[models.Model]] = []
    placed: set[type[models.Model]] = set()
    while len(ordered) < len(candidates):
        for strict in (True, False):
            ready = [
                m
                for m in candidates
                if m not in placed
                and all(t in placed or (nullable and not strict) for t, nullable in edges[m])
            ]
            if ready:
                break
        if not ready:
            raise BackupError("the models' foreign keys form a cycle with no nullable key")
        # One at a time on a broken cycle, so it is broken at as few keys as possible.
        for m in ready if strict else ready[:1]:
            ordered.append(m)
            placed.add(m)
    return ordered


def row_fields(model: type[models.Model]) -> list[models.Field]:
    """The columns a row is written with: every concrete field but many-to-many ones
    (their tables are models of their own here)."""
    return list(model._meta.concrete_fields)


def encode(value: Any) -> Any:
    """json.dumps' default: what Django's serializer writes for these types, except that
    datetimes keep their microseconds (DjangoJSONEncoder cuts them to milliseconds, which
    would make a restored run differ from the original)."""
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return duration_iso_string(value)
    if isinstance(value, uuid.UUID | decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | memoryview | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not serializable")


def iter_rows(model: type[models.Model], using: str) -> Iterator[dict[str, Any]]:
    """The model's rows as Django serialization dicts, in pk order."""
    fields = row_fields(model)
    pk = model._meta.pk
    names = [f.name for f in fields]
    rows = _values(model, fields, using)
    label = model._meta.label_lower
    pk_index = names.index(pk.name)
    for values in rows:
        row = dict(zip(names, values, strict=True))
        yield {"model": label, "pk": row.pop(names[pk_index]), "fields": row}


def _values(model: type[models.Model], fields: list[models.Field], using: str) -> Iterator[tuple]:
    """The fields' values of every row, in pk order, streamed."""
    binary = any(isinstance(f, models.BinaryField) for f in fields)
    return (
        model._base_manager.using(using)
        .order_by("pk")
        .values_list(*[f.attname for f in fields])
        .iterator(chunk_size=BINARY_CHUNK if binary else CHUNK)
    )


def archive_fields(model: type[models.Model]) -> list[models.Field]:
    """The columns of a member's lines, in order: the primary key, the model's sealed
    columns (rotation.SEALED) and the rest, so restore can tell a blank sealed value from
    a line's start without parsing it (restore.check_sealed)."""
    fields = row_fields(model)
    pk = model._meta.pk
    sealed = [c.field for c in SEALED if c.model.lower() == model._meta.label_lower]
    first = [pk, *(f for name in sealed for f in fields if f.name == name)]
    return first + [f for f in fields if f not in first]


def is_json(f: models.Field) -> bool:
    return isinstance(f, models.JSONField | OrderedJSONField)


def iter_lines(model: type[models.Model], using: str) -> Iterator[bytes]:
    """The model's rows as the archive's lines: a JSON array each, of archive_fields'
    values, in pk order; a JSON column's value is its JSON text (a string), so restore
    hands it to the database as it is."""
    fields = archive_fields(model)
    texts = [(i, f) for i, f in enumerate(fields) if is_json(f)]
    for values in _values(model, fields, using):
        values = list(values)
        for i, f in texts:
            if values[i] is not None:
                values[i] = _json_text(f, values[i])
        yield dumps(values)


def _json_text(f: models.Field, value: Any) -> str:
    if isinstance(f, OrderedJSONField):
        return f.get_prep_value(value)  # its own text, key order kept
    return json.dumps(value, ensure_ascii=False, cls=f.encoder)


def iter_blocks(model: type[models.Model], using: str) -> Iterator[tuple[bytes, int]]:
    """The model's lines (iter_lines'), in blocks of about BLOCK bytes: (the lines, how
    many). On PostgreSQL the database writes each line itself (json_build_array, in the
    format iter_lines gives) and sends them by COPY: the rows never become Python objects,
    which made backups 3x slower, and COPY streams them in half the time a cursor fetches
    them (bench/backup.py)."""
    connection = connections[using]
    if connection.vendor != "postgresql" or len(archive_fields(model)) > MAX_ARGUMENTS:
        yield from _blocks(iter_lines(model, using))
        return
    with connection.cursor() as cursor, cursor.cursor.copy(_lines_sql(model, using)) as copy:
        yield from _blocks(bytes(data) for data in copy)


# PostgreSQL functions take at most 100 arguments (json_build_array is one).
MAX_ARGUMENTS = 100


def _blocks(lines: Iterable[bytes]) -> Iterator[tuple[bytes, int]]:
    batch: list[bytes] = []
    size = 0
    for line in lines:
        batch.append(line)
        size += len(line)
        if size >= BLOCK:
            yield b"".join(batch), len(batch)
            batch, size = [], 0
    if batch:
        yield b"".join(batch), len(batch)


def _lines_sql(model: type[models.Model], using: str) -> str:
    """COPY (SELECT one JSON array per row, in pk order) TO STDOUT."""
    quote = connections[using].ops.quote_name
    values = []
    for f in archive_fields(model):
        value = f"t.{quote(f.column)}"
        if isinstance(f, models.BinaryField):
            value = f"translate(encode({value}, 'base64'), E'\\n', '')"
        elif isinstance(f, models.JSONField):
            value = f"{value}::text"  # its JSON text, as a string (an OrderedJSONField is text)
        values.append(value)
    pk = quote(model._meta.pk.column)
    # Identifiers come from the model and are quoted; there are no values.
    # CSV, as its one column is never quoted: a JSON text holds no raw newline, carriage
    # return or control character (\x01, \x02), where the text format would double every
    # backslash (and there are many: JSON columns are JSON strings here).
    return (
        f"COPY (SELECT json_build_array({', '.join(values)})::text"  # noqa: S608
        f" FROM {quote(model._meta.db_table)} t ORDER BY t.{pk}) TO STDOUT"
        " WITH (FORMAT csv, DELIMITER E'\\x01', QUOTE E'\\x02')"
    )


def dumps(row: Any) -> bytes:
    return json.dumps(row, ensure_ascii=False, default=encode).encode("utf-8") + b"\n"


def table_digests(using: str = DEFAULT_DB_ALIAS) -> dict[str, dict[str, Any]]:
    """{table: {"count", "sha256"}} of every console table: the same on SQLite and
    PostgreSQL for the same content (JSON keys sorted, as jsonb reorders them; lines sorted,
    as the engines collate text pks differently). For tests and checks after a move."""
    digests = {}
    for model in models_in_order():
        lines = sorted(
            json.dumps(row, sort_keys=True, default=encode) for row in iter_rows(model, using)
        )
        digest = hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()
        digests[model._meta.db_table] = {"count": len(lines), "sha256": digest}
    return digests


# ---------------------------------------------------------------------------------------
# The snapshot.


class _Snapshot:
    """A consistent read of the whole database, for the `with` block."""

    def __init__(self, using: str) -> None:
        self.using = using
        self.atomic = transaction.atomic(using=using)

    def __enter__(self) -> None:
        connection = connections[self.using]
        outermost = not connection.in_atomic_block
        self.atomic.__enter__()
        # Inside a caller's transaction (a test's) its snapshot is the one there is.
        if connection.vendor == "postgresql" and outermost:
            # First statement of the transaction, so every later read sees one snapshot.
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        # SQLite: the transaction's first read starts the snapshot (WAL keeps it while
        # writers commit; in rollback-journal mode the read lock makes writers wait).

    def __exit__(self, *exc) -> None:
        # Nothing was written: roll back whatever happened (a read-only transaction).
        transaction.set_rollback(True, using=self.using)
        self.atomic.__exit__(*exc)


def migration_state(using: str) -> dict[str, list[str]]:
    """{app: [migration names]} of django_migrations, the schema the rows fit."""
    from django.db.migrations.recorder import MigrationRecorder

    state: dict[str, list[str]] = {}
    recorder = MigrationRecorder(connections[using])
    for app, name in sorted(recorder.migration_qs.values_list("app", "name")):
        state.setdefault(app, []).append(name)
    return state


def leaf_targets(loader, migrations: set[tuple[str, str]]) -> list[tuple[str, str | None]]:
    """migrate targets for the schema state of `migrations`: per app of the code, its last
    migration among them, or None (zero) when they have none of that app."""
    targets: list[tuple[str, str | None]] = []
    for app in sorted({app for app, _name in loader.graph.nodes}):
        mine = {node for node in migrations if node[0] == app}
        leaves = [
            node
            for node in mine
            if not any(child in mine for child in loader.graph.node_map[node].children)
        ]
        targets += sorted(leaves) or [(app, None)]
    return targets


def schema_apps(using: str, migrations: dict[str, list[str]]):
    """The models the rows fit: this code's, or, in a database not yet migrated to it
    (a backup before `migrate` on an upgrade), the historical models of its state."""
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(connections[using], ignore_no_migrations=True)
    applied = {(app, name) for app, names in migrations.items() for name in names}
    code = set(loader.graph.nodes)
    unknown = sorted(applied - code)
    if unknown:
        raise BackupError(
            "the database has migrations this code does not have: "
            + ", ".join(f"{app}.{name}" for app, name in unknown)
            + " (back it up with the console version that migrated it)"
        )
    if applied >= code:
        return global_apps
    nodes = [t for t in leaf_targets(loader, applied) if t[1] is not None]
    return loader.project_state(nodes, at_end=True).apps


def sealed_fingerprints(using: str, app_registry=global_apps) -> list[dict[str, Any]]:
    """Per sealed column: how many values it holds and under which key ids. A column
    without a key id column (queued runs' inputs) counts its values under ""."""
    found = []
    for column in SEALED:
        try:
            model = app_registry.get_model(column.model)
        except LookupError:
            continue  # an older schema without it
        rows = model._base_manager.using(using).exclude(**{column.field: ""})
        counts: dict[str, int] = {}
        if column.key_field:
            for kid, n in (
                rows.values_list(column.key_field)
                .annotate(n=models.Count("pk"))
                .order_by(column.key_field)
            ):
                counts[kid] = counts.get(kid, 0) + n
        else:
            n = rows.count()
            if n:
                counts[""] = n
        found.append(
            {
                "model": column.model,
                "field": column.field,
                "count": sum(counts.values()),
                "key_ids": counts,
            }
        )
    return found


def _sealed_key_ids(sealed: list[dict[str, Any]]) -> list[str]:
    return sorted({kid for entry in sealed for kid in entry["key_ids"] if kid})


def runs_in_progress(using: str, app_registry=global_apps) -> int:
    """Queued and running runs: recorded as they are (a restored console's reaper then
    marks those whose worker is gone lost, as after any restart)."""
    from tools_app.models.runs import RunStatus

    run = app_registry.get_model("tools_app.Run")
    active = (RunStatus.QUEUED, RunStatus.RUNNING)
    return run._base_manager.using(using).filter(status__in=active).count()


# ---------------------------------------------------------------------------------------
# Writing the archive.


class _HashingWriter(io.RawIOBase):
    """A file that hashes and counts what is written to it."""

    def __init__(self, target: IO[bytes]) -> None:
        self.target = target
        self.sha = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.target.write(data)
        self.sha.update(data)
        self.size += len(data)
        return len(data)


def _add_file(tar: tarfile.TarFile, name: str, path: Path) -> None:
    info = tarfile.TarInfo(name)
    info.size = path.stat().st_size
    info.mtime = int(timezone.now().timestamp())
    info.mode = 0o600
    with open(path, "rb") as data:
        tar.addfile(info, data)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(timezone.now().timestamp())
    info.mode = 0o600
    tar.addfile(info, io.BytesIO(data))


def _artifact_files(
    using: str, app_registry
) -> Iterator[tuple[str, Callable[[], IO[bytes] | None]]]:
    """(member name, opener) of every artifact kept outside the database, from the
    snapshot's rows: the bytes of the storage, or the file under ARTIFACTS_PATH."""
    from tools_app.models.runs import ArtifactStore

    rows = (
        app_registry.get_model("tools_app.RunArtifact")
        ._base_manager.using(using)
        .exclude(store=ArtifactStore.DATABASE)
        .exclude(path="")
        .order_by("pk")
        .values_list("store", "path")
    )
    root = Path(settings.ARTIFACTS_PATH).resolve()
    for store, path in rows.iterator(chunk_size=CHUNK):
        if store == ArtifactStore.STORAGE:
            if settings.ARTIFACT_STORAGE == "database":
                yield f"artifacts/storage/{path}", lambda: None
                continue

            def open_stored(path=path):
                try:
                    return storages["artifacts"].open(path, "rb")
                except (OSError, ValueError):
                    return None

            yield f"artifacts/storage/{path}", open_stored
        else:
            full = (root / path).resolve()

            def open_file(full=full):
                if not full.is_relative_to(root) or not full.is_file():
                    return None
                return open(full, "rb")  # noqa: SIM115 (the caller closes)

            yield f"artifacts/file/{path}", open_file


def backup(
    output: Path | str, *, using: str = DEFAULT_DB_ALIAS, progress: Progress | None = None
) -> BackupResult:
    """Write the archive to `output` (replaced only once the new one is complete)."""
    output = Path(output).expanduser().resolve()
    if output.is_dir():
        raise BackupError(f"{output} is a directory: give a file name")
    if not output.parent.is_dir():
        raise BackupError(f"{output.parent} does not exist")
    report = progress or (lambda what, done, total: None)
    scratch = Path(tempfile.mkdtemp(prefix=".backup-", dir=output.parent))
    partial = scratch / "archive.tar"
    try:
        manifest = _write(partial, scratch, using, report)
        os.chmod(partial, 0o600)
        with open(partial, "rb") as f:
            os.fsync(f.fileno())
        os.replace(partial, output)
        size = output.stat().st_size
    finally:
        for leftover in scratch.iterdir():
            leftover.unlink()
        scratch.rmdir()
    return BackupResult(
        path=output,
        size=size,
        rows=sum(t["count"] for t in manifest["tables"]),
        tables=len(manifest["tables"]),
        artifact_files=len(manifest["artifacts"]),
        manifest=manifest,
    )


def _write(partial: Path, scratch: Path, using: str, report: Progress) -> dict[str, Any]:
    members: dict[str, dict[str, Any]] = {}
    tables: list[dict[str, Any]] = []
    artifacts: list[str] = []
    missing: list[str] = []
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar, _Snapshot(using):
        created_at = timezone.now()
        migrations = migration_state(using)
        state = schema_apps(using, migrations)
        ordered = models_in_order(state)
        counts = {m: m._base_manager.using(using).count() for m in ordered}
        total = sum(counts.values())
        done = 0
        for index, model in enumerate(ordered, start=1):
            label = model._meta.label_lower
            name = f"data/{index:04d}-{label}.jsonl.gz"
            spool = scratch / "member"
            written = 0
            with open(spool, "wb") as raw:
                hashing = _HashingWriter(raw)
                # ISA-L's gzip: the same format, in a sixth of zlib's time (bench/backup.py).
                with igzip.GzipFile(fileobj=hashing, mode="wb", compresslevel=1, mtime=0) as gz:
                    for block, count in iter_blocks(model, using):
                        gz.write(block)
                        written += count
                        report(label, done + written, total)
            done += written
            report(label, done, total)
            _add_file(tar, name, spool)
            spool.unlink()
            members[name] = {"sha256": hashing.sha.hexdigest(), "size": hashing.size}
            tables.append(
                {
                    "model": label,
                    "table": model._meta.db_table,
                    "member": name,
                    "count": written,
                    "fields": [f.name for f in archive_fields(model)],
                }
            )
        for name, opener in _artifact_files(using, state):
            data = opener()
            if data is None:
                missing.append(name)
                continue
            with data:
                content = data.read()
            _add_bytes(tar, name, content)
            members[name] = {"sha256": hashlib.sha256(content).hexdigest(), "size": len(content)}
            artifacts.append(name)
            report("artifact files", len(artifacts), len(artifacts) + len(missing))
        pin = Path(settings.DATA_PATH) / "signing" / "root.json"
        if pin.is_file():
            content = pin.read_bytes()
            _add_bytes(tar, ROOT_PIN, content)
            members[ROOT_PIN] = {
                "sha256": hashlib.sha256(content).hexdigest(),
                "size": len(content),
            }
        sealed = sealed_fingerprints(using, state)
        manifest = {
            "format": FORMAT,
            "created_at": created_at.isoformat(),
            "engine": connections[using].vendor,
            "migrations": migrations,
            "tables": tables,
            "counts": {t["table"]: t["count"] for t in tables},
            "members": members,
            "artifacts": artifacts,
            "missing_artifacts": missing,
            "sealed": sealed,
            "key_ids": _sealed_key_ids(sealed),
            "runs_in_progress": runs_in_progress(using, state),
        }
        _add_bytes(tar, MANIFEST, json.dumps(manifest, indent=1).encode("utf-8"))
    return manifest


def terminal_progress(stream: IO[str]) -> Progress | None:
    """A one-line progress bar on `stream` when it is a terminal, else None (cron, pipes
    and logs get the commands' one summary line only)."""
    if not getattr(stream, "isatty", lambda: False)():
        return None
    width = 30

    def show(what: str, done: int, total: int) -> None:
        if total:
            filled = min(width, width * done // total)
            bar = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
        else:
            bar = f"{done}"
        stream.write(f"\r\x1b[K{bar} {what}")
        stream.flush()

    return show
