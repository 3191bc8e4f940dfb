"""Whether each published tool's stored version still matches its signature (issue 26).

A database edit (a queryset update, a restored dump, hand-written SQL) changes what the
console would serve without touching the revision the agent API keys its caches by
(api/conditional.published_revision). So what is served is fingerprinted instead: the
database hashes each published version's stored manifest, files and signature (one query,
one hex digest per tool), and a version is verified again (signing.versions.verify) only
when that hash, its tool's name or number, or keys.json changes. MCP's tools/list, the
registry and the System page read the result; the worker verifies every run itself
(runs/execute.py), so nothing here stands between an edit and a run.

The result is remembered for CONSOLE_REGISTRY_REVISION_TTL seconds (the revision's own
bound): an edit made by another process is seen within that time."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.db.models import QuerySet, Subquery, TextField
from django.db.models.functions import SHA256, Cast, Concat
from django.utils import timezone

from tools_app.config_warnings import ConsoleWarning, Level, warning_source
from tools_app.models import KeysDocument, Tool, ToolVersion
from tools_app.signing import keyring, trust
from tools_app.signing import versions as signed_versions
from tools_app.signing.envelope import SignatureRefused

# How long a process answers from its last look (settings.CONSOLE_REGISTRY_REVISION_TTL
# overrides it, as for the revision).
TTL = 1.0
# Versions verified per query: a tool may hold MAX_TOOL_BYTES of files.
CHUNK = 100
# Warnings naming tools one by one; past this many, one line counts the rest.
MAX_NAMED = 10


class StoredSha256(SHA256):
    """SHA-256 of a text column in hex. PostgreSQL's own sha256() (11+), not Django's
    DIGEST(), which needs the pgcrypto extension."""

    def as_postgresql(self, compiler, connection, **extra_context):
        return super(SHA256, self).as_sql(
            compiler,
            connection,
            template="ENCODE(SHA256(CONVERT_TO(%(expressions)s, 'UTF8')), 'hex')",
            **extra_context,
        )


def row_hash(prefix: str = "") -> StoredSha256:
    """The hash of a version row's signed content: manifest, files and signature, as the
    database stores them (JSON text; each part is a balanced JSON value, so the
    concatenation is unambiguous)."""
    parts = [Cast(f"{prefix}{name}", TextField()) for name in ("manifest", "files", "signature")]
    return StoredSha256(Concat(*parts, output_field=TextField()))


@dataclass(frozen=True)
class Seal:
    """One published tool as stored now, and whether it verifies."""

    name: str
    version_id: int
    number: int
    row_hash: str
    # The digest its signature claims ("" unsigned or unreadable); it names the content
    # only when `problems` is empty.
    digest: str
    signed: bool
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class Seals:
    """Every published tool's seal. `key` changes whenever any seal may have: caches of
    what is built from the tools (MCP's list) are keyed by it."""

    key: tuple
    by_name: dict[str, Seal] = field(default_factory=dict)

    @property
    def refused(self) -> list[Seal]:
        return [seal for seal in self.by_name.values() if not seal.ok]


_lock = threading.Lock()
# (version id, row hash, name, number, keys state) -> its seal; only current rows are kept.
_verified: dict[tuple, Seal] = {}
# (monotonic expiry, seals)
_memo: tuple[float, Seals] | None = None


def published_rows(*more: str) -> QuerySet:
    """The published tools as SEAL_COLUMNS (then `more` columns of the tool), by name, in
    one query: what a caller serves from these rows is what seals_of() verifies."""
    latest = KeysDocument.objects.order_by("-serial")
    return (
        Tool.objects.published()
        .annotate(
            stored=row_hash("published_version__"),
            keys_serial=Subquery(latest.values("serial")[:1]),
            keys_expire=Subquery(latest.values("expires_at")[:1]),
        )
        .order_by("name")
        .values_list(*SEAL_COLUMNS, *more)
    )


def verified_versions(*more: str) -> tuple[Seals, list[tuple[str, Seal, tuple]]]:
    """The published tools whose stored version verifies, as (name, seal, values of the
    version's `more` columns), and the seals read: what the registry and MCP serve."""
    rows = list(published_rows(*more))
    sealed = seals_of(rows)
    verified = []
    for row in rows:
        seal = sealed.by_name[row[0]]
        if seal.ok:  # refused ones: the System page says why (signature_warnings)
            verified.append((row[0], seal, tuple(row[len(SEAL_COLUMNS) :])))
    return sealed, verified


# name, version id, number, row hash, newest keys.json serial and expiry.
SEAL_COLUMNS = (
    "name",
    "published_version_id",
    "published_version__number",
    "stored",
    "keys_serial",
    "keys_expire",
)


def seals() -> Seals:
    """The seals of the published tools, verified as stored now (within TTL seconds)."""
    global _memo
    now = time.monotonic()
    memo = _memo
    if memo is not None and memo[0] > now:
        return memo[1]
    result = seals_of(list(published_rows()), memo[1] if memo is not None else None)
    ttl = float(getattr(settings, "CONSOLE_REGISTRY_REVISION_TTL", TTL))
    _memo = (now + ttl, result) if ttl > 0 else None
    return result


def forget() -> None:
    """After a tool, a version or keys.json is saved (tools_app/signals.py): the next look
    asks the database again. What was verified stays, keyed by the rows' hashes."""
    global _memo
    _memo = None


def reset() -> None:
    """Forget everything (tests share one process)."""
    global _memo
    with _lock:
        _memo = None
        _verified.clear()


def seals_of(rows: list[tuple], previous: Seals | None = None) -> Seals:
    """The seals of `rows` (published_rows(), all of them), verifying the versions not
    verified before as they are stored now: the database is asked for those only."""
    now = timezone.now()
    entries = [
        (vid, stored, name, number, (serial, expire is not None and expire <= now))
        for name, vid, number, stored, serial, expire, *_more in rows
    ]
    key = tuple(entries)
    if previous is not None and previous.key == key:
        return previous
    with _lock:
        missing = {entry[0] for entry in entries if entry not in _verified}
        for seal, entry in _verify(missing):
            _verified[entry] = seal
        by_name = {}
        for entry in entries:
            vid, stored, name, number, _keys = entry
            seal = _verified.get(entry)
            if seal is None:  # edited between the two queries: refused until the next look
                seal = Seal(name, vid, number, stored, "", False, ("changed while checked",))
            by_name[name] = seal
        wanted = set(entries)
        for entry in [entry for entry in _verified if entry not in wanted]:
            del _verified[entry]
    return Seals(key=key, by_name=by_name)


def _verify(version_ids: set[int]) -> Iterator[tuple[Seal, tuple]]:
    """(seal, its entry) of each version, in one query (files read CHUNK rows at a time)."""
    if not version_ids:
        return
    keys = keyset()
    latest = KeysDocument.objects.order_by("-serial")
    versions = (
        ToolVersion.objects.filter(pk__in=sorted(version_ids))
        .select_related("tool")
        .annotate(
            stored=row_hash(),
            keys_serial=Subquery(latest.values("serial")[:1]),
            keys_expire=Subquery(latest.values("expires_at")[:1]),
        )
    )
    now = timezone.now()
    for version in versions.iterator(chunk_size=CHUNK):
        expired = version.keys_expire is not None and version.keys_expire <= now
        entry = (
            version.pk,
            version.stored,
            version.tool.name,
            version.number,
            (version.keys_serial, expired),
        )
        yield seal_of(version, version.stored, keys=keys), entry


def keyset() -> trust.KeySet | str:
    """keyring.keyset() read once for many versions, or why none opens (each version
    is then refused with that reason)."""
    try:
        return keyring.keyset()
    except (SignatureRefused, keyring.SigningKeyMissing) as exc:
        return str(exc)


def seal_of(
    version: ToolVersion, stored_hash: str = "", *, keys: trust.KeySet | str | None = None
) -> Seal:
    """Verify one version (its tool loaded); `keys` from keyset() when verifying many."""
    if isinstance(keys, str):
        problems: tuple[str, ...] = (keys,)
    else:
        problems = tuple(signed_versions.verify(version, keys=keys))
    return Seal(
        name=version.tool.name,
        version_id=version.pk,
        number=version.number,
        row_hash=stored_hash,
        digest=signed_versions.digest(version) or "",
        signed=version.signature is not None,
        problems=problems,
    )


def claimed_digest(envelope: Any) -> str:
    """The digest (the pin value) a stored envelope claims, NOT verified; "" when it has
    none. It names the content only for a version that verify() passes."""
    return signed_versions.digest(ToolVersion(signature=envelope)) or ""


@warning_source
def signature_warnings() -> list[ConsoleWarning]:
    """Published tools whose stored version no longer matches its signature, by name;
    unsigned ones in one line (an upgrade that has not signed them yet)."""
    try:
        refused = sorted(seals().refused, key=lambda seal: seal.name)
    except DatabaseError:
        return []  # no database (or not migrated yet): the health report says so
    unsigned = [seal.name for seal in refused if not seal.signed]
    tampered = [seal for seal in refused if seal.signed]
    warnings = [
        ConsoleWarning(
            f"The stored version {seal.number} of the published tool {seal.name} does not "
            f"match its signature: {'; '.join(seal.problems)}. MCP does not list it, its "
            "calls are refused and its runs fail. Someone changed the database (or it was "
            "restored from elsewhere): publish a reviewed version again, or restore it.",
            f"Tool {seal.name} does not match its signature",
            Level.ERROR,
        )
        for seal in tampered[:MAX_NAMED]
    ]
    if len(tampered) > MAX_NAMED:
        rest = ", ".join(seal.name for seal in tampered[MAX_NAMED:])
        warnings.append(
            ConsoleWarning(
                f"{len(tampered) - MAX_NAMED} more published tools do not match their "
                f"signatures: {rest}.",
                "More tools do not match their signatures",
                Level.ERROR,
            )
        )
    if unsigned:
        warnings.append(
            ConsoleWarning(
                f"{len(unsigned)} published tools are not signed ({', '.join(unsigned[:20])}"
                f"{', ...' if len(unsigned) > 20 else ''}): MCP does not list them and their "
                "runs fail. Run `python manage.py signing_keys sign`.",
                "Published tools are not signed",
                Level.ERROR,
            )
        )
    return warnings
