"""The secret-usage ledger (docs/security.md "The secret-usage ledger"). No HTTP here.

A run's worker appends one row per integration that gave the run a secret value, right
after the values are read and before the tool starts (runs/execute.py); the run's ending
fills in the outcome. Each row is chained to the one before by an HMAC (`row_hash`), the
outcome by its own MAC, both under a chain key; the values themselves are kept only as
HMAC fingerprints under a fingerprint key. Both keys derive from one ledger secret sealed
by the vault in the LedgerHead singleton, so a database dump alone can neither forge a
row nor brute-force a value.

Appends lock the head row (SELECT ... FOR UPDATE on PostgreSQL; SQLite's writers are
serialized by BEGIN IMMEDIATE), so the chain stays linear across workers: three
statements per append (read the head, insert the rows, move the head)."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables

from tools_app.integrations import vault
from tools_app.integrations.environment import Delivered
from tools_app.models import LedgerHead, SecretUse

HEAD = 1  # the head's primary key
CHAIN_LABEL = b"tool-console secret ledger chain v1"
FINGERPRINT_LABEL = b"tool-console secret ledger fingerprint v1"
# The fields row_hash covers, in the canonical JSON's (sorted) form.
GRANT_FIELDS = (
    "seq",
    "created_at",
    "run_id",
    "tool",
    "version",
    "draft",
    "integration",
    "integration_id",
    "fields",
    "key_ids",
    "fingerprints",
    "user_id",
    "username",
    "token_id",
    "token_name",
    "token_prefix",
    "via",
)
PRUNE_BATCH = 1000


class LedgerWriteError(Exception):
    """The ledger could not be written; the run must not start."""


@dataclass(frozen=True)
class Keys:
    chain: bytes
    fingerprint: bytes


_lock = threading.Lock()
_keys: dict[str, Keys] = {}  # sealed secret -> derived keys: one Fernet decrypt per process


@sensitive_variables()
def _derive(sealed: str) -> Keys:
    keys = _keys.get(sealed)
    if keys is None:
        raw = vault.decrypt(sealed, what="the secret-usage ledger's key").encode("ascii")
        keys = Keys(
            chain=hmac.new(raw, CHAIN_LABEL, hashlib.sha256).digest(),
            fingerprint=hmac.new(raw, FINGERPRINT_LABEL, hashlib.sha256).digest(),
        )
        with _lock:
            _keys[sealed] = keys
    return keys


@sensitive_variables()
def _create_head() -> None:
    """The head and its secret, made once (by whichever process appends first)."""
    sealed, kid = vault.encrypt(secrets.token_urlsafe(32))
    try:
        with transaction.atomic():
            LedgerHead.objects.create(pk=HEAD, secret_sealed=sealed, sealed_key_id=kid)
    except IntegrityError:
        pass  # another process made it first: theirs is the one
    # A head without a secret (made by hand): give it one, unless someone just did.
    LedgerHead.objects.filter(pk=HEAD, secret_sealed="").update(
        secret_sealed=sealed, sealed_key_id=kid
    )


def head() -> LedgerHead:
    found = LedgerHead.objects.filter(pk=HEAD).first()
    if found is None or not found.secret_sealed:
        _create_head()
        found = LedgerHead.objects.get(pk=HEAD)
    return found


def keys() -> Keys:
    return _derive(head().secret_sealed)


@sensitive_variables()
def fingerprint(value: str, with_keys: Keys | None = None) -> str:
    """HMAC-SHA256 of a value under the fingerprint key: one global salt, so finding a
    value is one lookup, and without the key the fingerprints reveal nothing."""
    key = (with_keys or keys()).fingerprint
    return hmac.new(key, value.encode("utf-8"), hashlib.sha256).hexdigest()


def _plain(row: SecretUse, name: str):
    value = getattr(row, name)
    if name == "created_at":
        return value.astimezone(UTC).isoformat(timespec="microseconds")
    if name == "run_id":
        return str(value)
    if name in ("fields", "key_ids", "fingerprints"):
        return list(value)
    return value


def canonical(row: SecretUse) -> bytes:
    grant = {name: _plain(row, name) for name in GRANT_FIELDS}
    return json.dumps(grant, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def row_hash(chain_key: bytes, prev_hash: str, row: SecretUse) -> str:
    message = prev_hash.encode("ascii") + b"\n" + canonical(row)
    return hmac.new(chain_key, message, hashlib.sha256).hexdigest()


def outcome_mac(chain_key: bytes, row_hash_: str, outcome: str) -> str:
    message = b"outcome\n" + row_hash_.encode("ascii") + b"\n" + outcome.encode("utf-8")
    return hmac.new(chain_key, message, hashlib.sha256).hexdigest()


# ----------------------------------------------------------------------------------------
# Appending, and the run's ending


@dataclass(frozen=True)
class Grant:
    """What one append wrote, and the chain key the run's ending MACs its outcome with."""

    rows: list[SecretUse]
    chain: bytes = field(repr=False)


def append(run, delivered: Iterable[Delivered]) -> Grant | None:
    """One row per integration in `delivered` for `run` (a Run with its tool, version,
    user and token loaded). Raises LedgerWriteError on any failure: nothing is written."""
    delivered = list(delivered)
    if not delivered:
        return None
    try:
        return _append(run, delivered)
    except Exception as exc:
        raise LedgerWriteError(type(exc).__name__) from exc


@sensitive_variables()
def _append(run, delivered: list[Delivered]) -> Grant:
    user, token = run.user, run.token
    with transaction.atomic():
        found = _locked_head()
        if found is None or not found[0]:  # the very first append
            _create_head()
            found = _locked_head()
        sealed, seq, prev = found
        keys_ = _derive(sealed)
        now = timezone.now()
        rows = []
        for item in delivered:
            seq += 1
            row = SecretUse(
                seq=seq,
                created_at=now,
                run_id=run.pk,
                tool=run.tool.name[:200],
                version=run.version.number,
                draft=run.version.published_at is None,
                integration=item.slug,
                integration_id=item.integration_id,
                fields=list(item.fields),
                key_ids=list(item.key_ids),
                fingerprints=[fingerprint(v, keys_) for v in item.values],
                user_id=user.pk if user is not None else None,
                username=user.get_username()[:150] if user is not None else "",
                token_id=token.pk if token is not None else None,
                token_name=token.name[:100] if token is not None else "",
                token_prefix=token.prefix[:16] if token is not None else "",
                via=run.via,
                outcome="",
                prev_hash=prev,
            )
            row.row_hash = prev = row_hash(keys_.chain, prev, row)
            row.outcome_mac = outcome_mac(keys_.chain, row.row_hash, "")
            rows.append(row)
        _insert(rows)
        _execute(_MOVE_HEAD, seq, prev, HEAD)
    return Grant(rows, keys_.chain)


def record_outcome(grant: Grant | None, outcome: str) -> None:
    """The run of this grant ended with `outcome` (a final RunStatus): one UPDATE per row
    (a run has one per integration). A run reaped as lost that was alive after all gets
    its real outcome the same way."""
    if grant is None or not grant.rows:
        return
    # No transaction: each row's outcome has its own MAC, so a row left unwritten only
    # shows as still running to verify_ledger.
    for row in grant.rows:
        mac = outcome_mac(grant.chain, row.row_hash, outcome)
        _execute(_SET_OUTCOME, outcome, mac, row.seq)


# Every run given a secret appends and records its outcome, on the worker's path before
# and after the tool: plain SQL there, because compiling the ORM's statements was two
# thirds of their cost (bench/invoke.py, "ledger append + outcome"). The values still go
# through each field's own get_db_prep_save, as the ORM's would. (S608: the only names
# put in the SQL are the models' own table and column names, quoted.)
_quote = connection.ops.quote_name
_HEAD = _quote(LedgerHead._meta.db_table)
_ROWS = _quote(SecretUse._meta.db_table)
_INSERTED = [f for f in SecretUse._meta.concrete_fields if not f.primary_key]
_INSERT = f"INSERT INTO {_ROWS} ({', '.join(_quote(f.column) for f in _INSERTED)}) VALUES "  # noqa: S608
_ROW_PARAMS = "(" + ", ".join(["%s"] * len(_INSERTED)) + ")"
_READ_HEAD = f"SELECT secret_sealed, last_seq, last_hash FROM {_HEAD} WHERE id = %s"  # noqa: S608
_MOVE_HEAD = f"UPDATE {_HEAD} SET last_seq = %s, last_hash = %s WHERE id = %s"  # noqa: S608
_SET_OUTCOME = f"UPDATE {_ROWS} SET outcome = %s, outcome_mac = %s WHERE seq = %s"  # noqa: S608


def _execute(sql: str, *params) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def _locked_head() -> tuple[str, int, str] | None:
    """(sealed secret, last seq, last hash) of the head, locked until the transaction
    ends (on SQLite the transaction's BEGIN IMMEDIATE already holds the write lock)."""
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    found = _execute(_READ_HEAD + lock, HEAD)
    return found[0] if found else None


def _insert(rows: list[SecretUse]) -> None:
    values = ", ".join([_ROW_PARAMS] * len(rows))
    params = [
        field.get_db_prep_save(getattr(row, field.attname), connection)
        for row in rows
        for field in _INSERTED
    ]
    _execute(_INSERT + values, *params)


def record_outcome_of_runs(run_ids: list, outcome: str) -> int:
    """Fill in the outcome of every row of these runs (the reaper's `lost`)."""
    rows = list(SecretUse.objects.filter(run_id__in=run_ids).only("seq", "row_hash"))
    if rows:
        record_outcome(Grant(rows, keys().chain), outcome)
    return len(rows)


# ----------------------------------------------------------------------------------------
# Reading


def find_by_value(value: str) -> list[SecretUse]:
    """Every row one of whose values was `value` (nothing is stored or logged)."""
    return list(SecretUse.objects.with_fingerprint(fingerprint(value)).order_by("-seq"))


def verify(chunk: int = 2000) -> tuple[int, list[str]]:
    """(rows checked, problems): each row's hash and outcome MAC, the seq and the links
    between rows, from the pruning checkpoint to the head."""
    current = LedgerHead.objects.filter(pk=HEAD).exclude(secret_sealed="").first()
    if current is None:
        rows = SecretUse.objects.count()
        return rows, [f"head mismatch: the ledger head is missing ({rows} rows)"] if rows else []
    chain = _derive(current.secret_sealed).chain
    problems: list[str] = []
    expected_seq, prev = current.pruned_seq, current.pruned_hash
    count = 0
    for row in _rows(chunk):
        count += 1
        if row.seq <= expected_seq:
            problems.append(f"row seq {row.seq} is out of order (after seq {expected_seq})")
        elif row.seq > expected_seq + 1:
            problems.append(f"rows missing between seq {expected_seq} and {row.seq}")
            prev = row.prev_hash  # go on from here: report the gap once
        if row.prev_hash != prev:
            problems.append(f"row seq {row.seq} does not link to the row before it")
        if row_hash(chain, row.prev_hash, row) != row.row_hash:
            problems.append(f"row seq {row.seq} edited")
        elif not hmac.compare_digest(
            outcome_mac(chain, row.row_hash, row.outcome), row.outcome_mac
        ):
            problems.append(f"row seq {row.seq} outcome edited")
        expected_seq, prev = max(expected_seq, row.seq), row.row_hash
    if expected_seq != current.last_seq or prev != current.last_hash:
        if expected_seq < current.last_seq:
            problems.append(
                f"rows missing between seq {expected_seq} and {current.last_seq + 1} "
                f"(the head is at seq {current.last_seq})"
            )
        else:
            problems.append(
                f"head mismatch: the head says seq {current.last_seq}, the last row is "
                f"seq {expected_seq}"
            )
    return count, problems


def _rows(chunk: int) -> Iterator[SecretUse]:
    last = -1
    while True:
        batch = list(SecretUse.objects.filter(seq__gt=last).order_by("seq")[:chunk])
        yield from batch
        if len(batch) < chunk:
            return
        last = batch[-1].seq


# ----------------------------------------------------------------------------------------
# Retention


def retention_cutoff() -> datetime:
    return timezone.now() - timedelta(days=settings.LEDGER_RETENTION_DAYS)


def prune(cutoff: datetime | None = None) -> int:
    """Delete the rows older than the retention (CONSOLE_LEDGER_RETENTION_DAYS) from the
    start of the chain, and record on the head the last one deleted (its seq and hash), so
    verify still proves the rest. Returns how many rows were deleted."""
    cutoff = cutoff or retention_cutoff()
    deleted = 0
    while True:
        with transaction.atomic():
            current = LedgerHead.objects.select_for_update().filter(pk=HEAD).first()
            if current is None:
                return deleted
            batch = list(
                SecretUse.objects.filter(seq__gt=current.pruned_seq, created_at__lt=cutoff)
                .order_by("seq")
                .values_list("seq", "row_hash")[:PRUNE_BATCH]
            )
            if not batch:
                return deleted
            # Only a prefix of the chain: a younger row before an older one stops it.
            first_kept = (
                SecretUse.objects.filter(seq__gt=current.pruned_seq, created_at__gte=cutoff)
                .order_by("seq")
                .values_list("seq", flat=True)
                .first()
            )
            if first_kept is not None:
                batch = [(seq, h) for seq, h in batch if seq < first_kept]
                if not batch:
                    return deleted
            last_seq, last_hash = batch[-1]
            SecretUse.objects.filter(seq__gt=current.pruned_seq, seq__lte=last_seq).delete()
            LedgerHead.objects.filter(pk=HEAD).update(
                pruned_seq=last_seq,
                pruned_hash=last_hash,
                pruned_rows=current.pruned_rows + len(batch),
                pruned_at=timezone.now(),
            )
            deleted += len(batch)


# ----------------------------------------------------------------------------------------
# Key rotation (rotate_encryption_keys)


def reseal() -> int:
    """Re-seal the ledger secret under the vault's first key; 1 if it was re-sealed.
    Left alone if no key decrypts it (verify_ledger then says so)."""
    primary = vault.primary_key_id()
    current = LedgerHead.objects.filter(pk=HEAD).exclude(secret_sealed="").first()
    if current is None or current.sealed_key_id == primary:
        return 0
    try:
        token, kid = vault.rotate(current.secret_sealed, what="the secret-usage ledger's key")
    except vault.VaultError:
        return 0
    return LedgerHead.objects.filter(pk=HEAD, secret_sealed=current.secret_sealed).update(
        secret_sealed=token, sealed_key_id=kid
    )
