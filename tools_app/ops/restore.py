"""Restore an archive of tools_app/ops/backup.py into an empty database of either engine
(docs/operations.md "Backup and restore"). No HTTP here.

Every check runs before anything is written, in this order, and each refusal is a
RestoreError saying precisely what is wrong:

1. the archive: a manifest of this format, every member it lists present with its sha256,
   no member it does not list (a truncated or tampered archive stops here);
2. the schema: a migration in the archive this code does not have is a newer schema
   (refused, naming them); the target must be migrated to this code's state;
3. the target is empty: no rows but those `migrate` itself creates (content types,
   permissions, the role groups), which the archive's replace;
4. every sealed value in the archive (rotation.SEALED) decrypts with the configured
   keys: each that does not is named ("slug.FIELD under key 1a2b...").

`dry_run` stops there. Otherwise the rows are inserted in one transaction, as stored
(pre_save hooks such as auto_now do not run; on PostgreSQL by COPY, see _copy_table), the
counts compared with the manifest and PostgreSQL's sequences reset before it commits;
artifact files are written into the storage and removed again if the transaction fails.

An archive of an older schema (a subset of this code's migrations) is loaded into that
schema, not into the current models: the empty target is migrated back to the archive's
state, the rows loaded with the historical models of that state, then migrated forward, so
data migrations in between run on the restored rows as they did on every upgraded
console. Loading old rows into the current models would skip them."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import tarfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.apps import apps as global_apps
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management.color import no_style
from django.db import (
    DEFAULT_DB_ALIAS,
    DataError,
    IntegrityError,
    connections,
    models,
    transaction,
)
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder
from isal import igzip, isal_zlib

from tools_app.integrations import vault
from tools_app.integrations.rotation import SEALED
from tools_app.models.fields import OrderedJSONField
from tools_app.ops.backup import (
    BLOCK,
    FORMAT,
    MANIFEST,
    ROOT_PIN,
    Progress,
    is_json,
    leaf_targets,
    models_in_order,
)

# What `migrate` writes into a new database: the archive's rows replace these.
SEEDED = ("contenttypes.contenttype", "auth.permission", "auth.group", "auth.group_permissions")
# The archive formats this code reads (tools_app/ops/backup.py FORMAT).
READABLE = (1, FORMAT)
# A format-2 line whose second value (a sealed column, see Archive.blank) is "": after a
# primary key that is a number or a string without escapes, so nothing else can match.
BLANK_SECOND = re.compile(r'\[(?:-?\d+|"[^"\\]*"), ?""[,\]]')
# Rows inserted per statement batch, and the bytes of binary values gathered before one.
BATCH = 500
BATCH_BYTES = 16 * 1024 * 1024


class RestoreError(Exception):
    """The archive is not restored (nothing was written); the message says why."""


@dataclass
class RestoreResult:
    rows: int
    tables: int
    artifact_files: int
    migrated_from: list[str]  # migrations applied after loading an older archive
    dry_run: bool
    counts: dict[str, int] = field(repr=False, default_factory=dict)


class Archive:
    """An opened archive whose manifest and member hashes were checked."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        try:
            self.tar = tarfile.open(self.path, "r:")  # noqa: SIM115 (closed by close())
        except FileNotFoundError:
            raise RestoreError(f"{self.path} does not exist") from None
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise RestoreError(f"{self.path} is not a console backup archive ({exc})") from None
        try:
            self.members = {m.name: m for m in self.tar.getmembers()}
        except (tarfile.TarError, OSError, EOFError) as exc:
            self.close()
            raise RestoreError(f"{self.path} is damaged or truncated ({exc})") from None
        self.manifest = self._manifest()

    def close(self) -> None:
        self.tar.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _manifest(self) -> dict[str, Any]:
        if MANIFEST not in self.members:
            raise RestoreError(
                f"{self.path} has no {MANIFEST}: the archive is truncated (the manifest is "
                "written last) or not a console backup"
            )
        try:
            manifest = json.loads(self.read(MANIFEST))
        except ValueError:
            raise RestoreError(f"{self.path}: {MANIFEST} is not valid JSON") from None
        if not isinstance(manifest, dict) or manifest.get("format") not in READABLE:
            raise RestoreError(
                f"{self.path}: unknown archive format "
                f"{manifest.get('format') if isinstance(manifest, dict) else None!r} "
                f"(this console reads formats {', '.join(map(str, READABLE))})"
            )
        for key in ("migrations", "tables", "members", "counts", "sealed"):
            if key not in manifest:
                raise RestoreError(f"{self.path}: {MANIFEST} lacks {key!r}")
        if manifest["format"] >= 2:
            for table in manifest["tables"]:
                names = table.get("fields")
                if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                    raise RestoreError(
                        f"{self.path}: {MANIFEST} lists no fields for {table.get('member')}"
                    )
        return manifest

    @property
    def format(self) -> int:
        return self.manifest["format"]

    def read(self, name: str) -> bytes:
        try:
            data = self.tar.extractfile(self.members[name])
            if data is None:
                raise RestoreError(f"{self.path}: member {name} is not a file")
            return data.read()
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise RestoreError(f"{self.path}: member {name} is truncated ({exc})") from None

    def verify(self, progress: Progress) -> None:
        """Every listed member present, whole and with its sha256; nothing unlisted."""
        listed = self.manifest["members"]
        extra = sorted(set(self.members) - set(listed) - {MANIFEST})
        if extra:
            raise RestoreError(
                f"{self.path}: members the manifest does not list: {', '.join(extra[:5])}"
            )
        missing = sorted(set(listed) - set(self.members))
        if missing:
            raise RestoreError(
                f"{self.path} is truncated: members missing: {', '.join(missing[:5])}"
                + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            )
        for index, (name, expected) in enumerate(listed.items(), start=1):
            sha = hashlib.sha256()
            size = 0
            try:
                data = self.tar.extractfile(self.members[name])
                while chunk := data.read(1 << 20):
                    sha.update(chunk)
                    size += len(chunk)
            except (tarfile.TarError, OSError, EOFError, AttributeError) as exc:
                raise RestoreError(f"{self.path}: member {name} is truncated ({exc})") from None
            if size != expected.get("size") or sha.hexdigest() != expected.get("sha256"):
                raise RestoreError(
                    f"{self.path}: member {name} does not match its sha256 in the manifest "
                    "(the archive was changed or damaged)"
                )
            progress("checking hashes", index, len(listed))

    def rows(self, table: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The rows of one table's member (hash already checked), as {"pk", "fields"}
        whatever the format; in format 2 a JSON field's value is its JSON text."""
        for line in self.lines(table):
            pk, fields = self.parse(table, line)
            yield {"pk": pk, "fields": fields}

    def parse(self, table: dict[str, Any], line: str) -> tuple[Any, dict[str, Any]]:
        """One line of `table`'s member as (pk, the other fields by name)."""
        try:
            row = json.loads(line)
            if self.format == 1:
                return row["pk"], row["fields"]
            names = table["fields"]
            if not isinstance(row, list) or len(row) != len(names):
                raise ValueError(f"not an array of {len(names)} values")
            return row[0], dict(zip(names[1:], row[1:], strict=True))
        except (ValueError, KeyError, TypeError) as exc:
            name = table["member"]
            raise RestoreError(f"{self.path}: member {name} has a damaged row ({exc})") from None

    def blank(self, table: dict[str, Any], line: str, field: str) -> bool:
        """Whether the line's `field` certainly holds "" (most runs have no sealed inputs),
        without parsing it."""
        if self.format == 1:
            return _blank(line, json.dumps(field))
        # backup.archive_fields puts a sealed column right after the primary key.
        return table["fields"][1:2] == [field] and BLANK_SECOND.match(line) is not None

    def lines(self, table: dict[str, Any]) -> Iterator[str]:
        """The JSON lines of one table's member, without their newline. Read in blocks:
        a gzip file's readline costs more per line than the JSON parsing after it."""
        try:
            data = self.tar.extractfile(self.members[table["member"]])
            with igzip.GzipFile(fileobj=data) as stream:  # ISA-L: gzip, faster
                rest = b""
                while block := stream.read(BLOCK):
                    lines = (rest + block).split(b"\n")
                    rest = lines.pop()
                    for line in lines:
                        yield line.decode("utf-8")
                if rest:
                    yield rest.decode("utf-8")
        except (OSError, EOFError, zlib.error, isal_zlib.error, ValueError) as exc:
            raise RestoreError(
                f"{self.path}: member {table['member']} is damaged ({exc})"
            ) from None


# ---------------------------------------------------------------------------------------
# The checks.


def _code_migrations(using: str) -> tuple[MigrationLoader, set[tuple[str, str]]]:
    loader = MigrationLoader(connections[using], ignore_no_migrations=True)
    return loader, set(loader.graph.nodes)


def check_schema(manifest: dict[str, Any], using: str) -> set[tuple[str, str]]:
    """The archive's migrations; refuses a newer schema and an unmigrated target."""
    archived = {(app, name) for app, names in manifest["migrations"].items() for name in names}
    _loader, code = _code_migrations(using)
    newer = sorted(archived - code)
    if newer:
        raise RestoreError(
            "the archive's schema is newer than this console's code: it has migrations "
            "this code does not: "
            + ", ".join(f"{app}.{name}" for app, name in newer)
            + " (upgrade the console to the version that made the backup, or later)"
        )
    applied = set(MigrationRecorder(connections[using]).applied_migrations())
    unapplied = sorted(code - applied)
    if unapplied:
        raise RestoreError(
            "the target database is not migrated to this code: run `python manage.py "
            "migrate` first (unapplied: "
            + ", ".join(f"{app}.{name}" for app, name in unapplied[:5])
            + (", ..." if len(unapplied) > 5 else "")
            + ")"
        )
    return archived


def check_empty(using: str) -> None:
    """Refuse a target with rows of its own, naming each table that has some."""
    rows = []
    for model in models_in_order():
        if model._meta.label_lower in SEEDED:
            continue
        count = model._base_manager.using(using).count()
        if count:
            rows.append(f"{model._meta.db_table} ({count} row{'s' if count != 1 else ''})")
    if rows:
        raise RestoreError(
            "the target database is not empty: "
            + ", ".join(rows)
            + ". Restore needs a database that was just migrated, before the console ran "
            "(not even `signing_keys create`): the archive brings every row."
        )


def check_root_pin(archive: Archive) -> bytes | None:
    """The archive's signing root pin, to write into DATA_PATH; refuses a different one."""
    if ROOT_PIN not in archive.manifest["members"]:
        return None
    content = archive.read(ROOT_PIN)
    current = Path(settings.DATA_PATH) / "signing" / "root.json"
    if current.is_file() and json.loads(current.read_bytes()) != json.loads(content):
        raise RestoreError(
            f"{current} pins another signing root key than the archive's: move it away "
            "(it belongs to another console) and restore again"
        )
    return content


def check_sealed(archive: Archive, progress: Progress) -> None:
    """Decrypt every sealed value in the archive with the configured keys; refuse naming
    each one that fails and the key (fingerprint) that sealed it."""
    tables = {t["model"]: t for t in archive.manifest["tables"]}
    cache: dict[str, dict[Any, str]] = {}

    def names(label: str, pk: Any) -> str:
        label = label.lower()
        if label not in cache:
            attribute = {"tools_app.integration": "slug", "tools_app.tool": "name"}[label]
            rows = archive.rows(tables[label]) if label in tables else ()
            cache[label] = {str(r["pk"]): r["fields"].get(attribute) for r in rows}
        return cache[label].get(str(pk), f"#{pk}")

    ring = vault.keyring()
    failures = []
    checked = 0
    for column in SEALED:
        table = tables.get(column.model.lower())
        if table is None:
            continue  # an older schema without it
        for line in archive.lines(table):
            if archive.blank(table, line, column.field):
                continue
            pk, fields = archive.parse(table, line)
            token = fields.get(column.field) or ""
            if not token or not column.sealed_if(fields):
                continue
            checked += 1
            if not vault.can_decrypt(token):
                kid = fields.get(column.key_field, "") if column.key_field else ""
                if not kid:
                    under = "under a key not recorded"
                elif kid in ring.key_ids:
                    under = f"under key {kid}, which is configured: the value is damaged"
                else:
                    under = f"under key {kid}"
                failures.append(f"{column.name(pk, fields, names)} ({under})")
            if checked % 1000 == 0:
                progress("decrypting sealed values", checked, 0)
    if failures:
        raise RestoreError(
            f"{len(failures)} sealed value{'s' if len(failures) != 1 else ''} in the archive "
            "cannot be decrypted with the configured keys "
            f"({', '.join(ring.key_ids)}): "
            + "; ".join(failures)
            + ". Set CONSOLE_ENCRYPTION_KEYS to include the key that sealed them."
        )


def _blank(line: str, key: str) -> bool:
    """Whether the line's `key` certainly holds "" (most runs have no sealed inputs):
    without parsing it. A key in a JSON string is escaped (\\"), so each raw `"key":` is
    a key of some object; only when there is one, the row's own, is the answer sure."""
    if line.count(f"{key}:") != 1:  # every row has its own: any other one, parse
        return False
    return f'{key}:""' in line or f'{key}: ""' in line


# ---------------------------------------------------------------------------------------
# Loading.


def _values(
    model: type[models.Model], row: dict[str, Any], json_text: bool, using: str
) -> list[Any]:
    """The row's values in the model's concrete field order, as Python values.
    `json_text`: a JSON field's value is its JSON text (format 2), else the JSON itself."""
    fields = row["fields"]
    values = []
    for f in model._meta.concrete_fields:
        try:
            raw = row["pk"] if f.primary_key else fields[f.name]
        except KeyError:
            raise RestoreError(f"a row of {model._meta.label} lacks {f.name}") from None
        if raw is None:
            values.append(None)
        elif is_json(f):
            # As the field reads its column (a deep value included); to_python would
            # take a JSON string for the text of one.
            values.append(f.from_db_value(raw, None, connections[using]) if json_text else raw)
        else:
            values.append(f.to_python(raw))
    return values


def _insert(model: type[models.Model], objs: list[models.Model], using: str) -> None:
    fields = list(model._meta.concrete_fields)
    size = max(1, connections[using].ops.bulk_batch_size(fields, objs) or len(objs))
    for start in range(0, len(objs), size):
        # raw: values as stored (auto_now, auto_now_add and defaults do not apply).
        model._base_manager.using(using)._insert(
            objs[start : start + size], fields=fields, using=using, raw=True
        )


def _load_table(
    model: type[models.Model], archive: Archive, table: dict[str, Any], using: str
) -> int:
    if connections[using].vendor == "postgresql":
        return _copy_table(model, archive, table, using)
    batch: list[models.Model] = []
    weight = 0
    count = 0
    binary = [f for f in model._meta.concrete_fields if isinstance(f, models.BinaryField)]
    json_text = archive.format >= 2
    for row in archive.rows(table):
        obj = model(*_values(model, row, json_text, using))
        batch.append(obj)
        count += 1
        if binary:
            weight += sum(len(getattr(obj, f.attname) or b"") for f in binary)
        if len(batch) >= BATCH or weight >= BATCH_BYTES:
            _insert(model, batch, using)
            batch, weight = [], 0
    if batch:
        _insert(model, batch, using)
    return count


def _copy_table(
    model: type[models.Model], archive: Archive, table: dict[str, Any], using: str
) -> int:
    """PostgreSQL: the rows go in by COPY, each line parsed once (json.loads, in C) into
    the values PostgreSQL itself reads as text by each column's type; no model instance,
    no INSERT per batch (bench/backup.py's whole restore: 24 s, against 106 s with batched
    INSERTs and 34 s letting PostgreSQL parse the JSON). In format 2 a JSON column's value
    is already its text, so nothing is encoded again. A value that does not fit its column
    fails the restore as an INSERT would."""
    if archive.format == 1:
        return _copy_table_v1(model, archive, table, using)
    by_name = {f.name: f for f in model._meta.concrete_fields}
    names = table["fields"]
    if sorted(names) != sorted(by_name):
        raise RestoreError(
            f"{table['member']} has the fields {', '.join(names)}; its model in the "
            f"archive's schema has {', '.join(by_name)}"
        )
    fields = [by_name[n] for n in names]
    binary = [i for i, f in enumerate(fields) if isinstance(f, models.BinaryField)]
    texts = [i for i, f in enumerate(fields) if is_json(f)]
    width = len(fields)

    def rows() -> Iterator[list[Any]]:
        for line in archive.lines(table):
            try:
                row = json.loads(line)
                if type(row) is not list or len(row) != width:
                    raise ValueError(f"not an array of {width} values")
                for i in texts:
                    if row[i] is not None and type(row[i]) is not str:
                        raise ValueError(f"{names[i]} is not JSON text")
                for i in binary:
                    if row[i] is not None:
                        row[i] = base64.b64decode(row[i])
            except (ValueError, TypeError) as exc:
                name = table["member"]
                raise RestoreError(f"member {name} has a damaged row ({exc})") from None
            yield row

    return _copy(model, fields, using, rows())


def _copy_table_v1(
    model: type[models.Model], archive: Archive, table: dict[str, Any], using: str
) -> int:
    """Format 1's lines (Django's serialization dicts), JSON values encoded again."""
    from psycopg.types.json import Jsonb

    pk = model._meta.pk
    fields = list(model._meta.concrete_fields)
    convert = []
    for f in fields:
        if isinstance(f, models.BinaryField):
            convert.append((f.name, lambda v: None if v is None else base64.b64decode(v)))
        elif isinstance(f, OrderedJSONField):
            convert.append((f.name, f.get_prep_value))  # its own text; None stays None
        elif isinstance(f, models.JSONField):
            convert.append((f.name, lambda v: None if v is None else Jsonb(v)))
        else:
            convert.append((f.name, None))

    def rows() -> Iterator[list[Any]]:
        for line in archive.lines(table):
            try:
                row = json.loads(line)
                given = row["fields"]
                values = [row["pk"] if name == pk.name else given[name] for name, _ in convert]
            except (ValueError, KeyError, TypeError) as exc:
                name = table["member"]
                raise RestoreError(f"member {name} has a damaged row ({exc})") from None
            for index, (_name, change) in enumerate(convert):
                if change is not None:
                    values[index] = change(values[index])
            yield values

    return _copy(model, fields, using, rows())


def _copy(
    model: type[models.Model], fields: list[models.Field], using: str, rows: Iterable[list]
) -> int:
    """COPY the rows (the fields' values, in that order) into the model's table."""
    connection = connections[using]
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in fields)
    count = 0
    with connection.cursor() as cursor:
        # Identifiers come from the model and are quoted.
        sql = f"COPY {quote(model._meta.db_table)} ({columns}) FROM STDIN"
        with cursor.cursor.copy(sql) as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
    return count


def _write_artifacts(archive: Archive, written: list[tuple[str, str]]) -> int:
    """Artifact files back where their rows say; `written` collects what to undo."""
    count = 0
    root = Path(settings.ARTIFACTS_PATH).resolve()
    for name in archive.manifest.get("artifacts", []):
        content = archive.read(name)
        store, _, path = name.removeprefix("artifacts/").partition("/")
        if store == "storage":
            if settings.ARTIFACT_STORAGE == "database":
                raise RestoreError(
                    f"the archive holds artifacts of a storage backend ({name}): set "
                    "CONSOLE_ARTIFACT_STORAGE (docs/operations.md) before restoring"
                )
            storage = storages["artifacts"]
            if storage.exists(path):
                raise RestoreError(f"artifact storage already holds {path}")
            saved = storage.save(path, ContentFile(content))
            written.append(("storage", saved))
            if saved != path:
                raise RestoreError(f"artifact storage saved {path} as {saved}")
        else:
            target = (root / path).resolve()
            if not target.is_relative_to(root):
                raise RestoreError(f"artifact path {path} lies outside ARTIFACTS_PATH")
            if target.exists():
                raise RestoreError(f"{target} already exists")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            written.append(("file", str(target)))
        count += 1
    return count


def _undo_artifacts(written: list[tuple[str, str]]) -> None:
    for store, name in written:
        if store == "storage":
            storages["artifacts"].delete(name)
        else:
            Path(name).unlink(missing_ok=True)


def restore(
    path: Path | str,
    *,
    using: str = DEFAULT_DB_ALIAS,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> RestoreResult:
    report = progress or (lambda what, done, total: None)
    with Archive(path) as archive:
        archive.verify(report)
        manifest = archive.manifest
        archived = check_schema(manifest, using)
        check_empty(using)
        pin = check_root_pin(archive)
        check_sealed(archive, report)
        tables = manifest["tables"]
        total = sum(t["count"] for t in tables)
        loader, code = _code_migrations(using)
        older = sorted(code - archived)
        if dry_run:
            return RestoreResult(
                rows=total,
                tables=len(tables),
                artifact_files=len(manifest.get("artifacts", [])),
                migrated_from=[f"{a}.{n}" for a, n in older],
                dry_run=True,
                counts=manifest["counts"],
            )
        executor = MigrationExecutor(connections[using])
        if older:
            # The target is empty: going back loses nothing, and the forward migrations
            # then run on the restored rows.
            targets = leaf_targets(loader, archived)
            executor.migrate(targets)
            state_apps = executor.loader.project_state(
                [t for t in targets if t[1] is not None], at_end=True
            ).apps
        else:
            state_apps = global_apps
        written: list[tuple[str, str]] = []
        try:
            counts = _load(archive, tables, state_apps, using, report, written)
        except BaseException:
            _undo_artifacts(written)
            if older:
                MigrationExecutor(connections[using]).migrate(
                    MigrationLoader(connections[using]).graph.leaf_nodes()
                )
            raise
        if older:
            from django.core.management import call_command

            call_command("migrate", database=using, verbosity=0, interactive=False)
    if pin is not None:
        target = Path(settings.DATA_PATH) / "signing" / "root.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(pin)
    return RestoreResult(
        rows=sum(counts.values()),
        tables=len(tables),
        artifact_files=len(written),
        migrated_from=[f"{a}.{n}" for a, n in older],
        dry_run=False,
        counts=counts,
    )


def _drop_secondary(tables: list[str], using: str) -> list[str]:
    """PostgreSQL: drop the tables' foreign keys and their indexes other than primary
    keys and unique ones, returning the statements that make them again once the rows
    are in. Maintaining eleven indexes and checking four foreign keys row by row was most
    of a restore's time; built once after loading, as pg_restore does, they cost a fifth
    (bench/backup.py). All in the load's transaction: a failure leaves them as they were.
    A foreign key is checked whole when it is added again."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cursor:
        # Checks still pending in this transaction (a caller's deletes) forbid ALTER
        # TABLE: run them now, then defer again as Django's keys are.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")
        cursor.execute(
            "SELECT c.conrelid::regclass::text, quote_ident(c.conname),"
            " pg_get_constraintdef(c.oid) FROM pg_constraint c"
            " WHERE c.contype = 'f' AND c.conrelid = ANY(%s::regclass[]) ORDER BY 1, 2",
            [tables],
        )
        keys = cursor.fetchall()
        cursor.execute(
            "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i"
            " WHERE i.indrelid = ANY(%s::regclass[]) AND NOT i.indisprimary"
            " AND NOT i.indisunique AND NOT EXISTS"
            " (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid) ORDER BY 1",
            [tables],
        )
        indexes = cursor.fetchall()
        # The names come from the catalog, quoted by PostgreSQL itself.
        for table, name, _definition in keys:
            cursor.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
        for name, _definition in indexes:
            cursor.execute(f"DROP INDEX {name}")
    return [definition for _name, definition in indexes] + [
        f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}"
        for table, name, definition in keys
    ]


def _load(
    archive: Archive,
    tables: list[dict[str, Any]],
    state_apps,
    using: str,
    report: Progress,
    written: list[tuple[str, str]],
) -> dict[str, int]:
    counts: dict[str, int] = {}
    total = sum(t["count"] for t in tables)
    done = 0
    targets = []
    for table in tables:
        try:
            targets.append((table, state_apps.get_model(table["model"])))
        except LookupError:
            raise RestoreError(
                f"the archive's table {table['model']} has no model in its schema state"
            ) from None
    names = [model._meta.db_table for _table, model in targets]
    connection = connections[using]
    try:
        with transaction.atomic(using=using):
            # First, so the deletes below leave no pending foreign key checks (which
            # would forbid the ALTER TABLE).
            later = _drop_secondary(names, using)
            for label in reversed(SEEDED):
                model = state_apps.get_model(label)
                model._base_manager.using(using).all()._raw_delete(using)
            for table, model in targets:
                count = _load_table(model, archive, table, using)
                if count != table["count"]:
                    raise RestoreError(
                        f"{table['member']} holds {count} rows, the manifest says {table['count']}"
                    )
                counts[table["table"]] = count
                done += count
                report(table["model"], done, total)
            if later:
                report("indexes and foreign keys", 0, len(later))
                with connection.cursor() as cursor:
                    for index, sql in enumerate(later, start=1):
                        cursor.execute(sql)
                        report("indexes and foreign keys", index, len(later))
            # Now rather than at commit (SQLite checks its keys there), so a row pointing
            # at one the archive lacks is named in a refusal.
            connection.check_constraints(table_names=names)
            statements = connection.ops.sequence_reset_sql(
                no_style(), [model for _table, model in targets]
            )
            if statements:
                with connection.cursor() as cursor:
                    for sql in statements:
                        cursor.execute(sql)
            _write_artifacts(archive, written)
    except (IntegrityError, DataError) as exc:
        raise RestoreError(f"the archive's rows do not fit the database: {exc}") from None
    return counts
