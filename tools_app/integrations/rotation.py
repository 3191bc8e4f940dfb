"""Key rotation: re-encrypt every secret (and queued runs' sealed inputs) under the
first key."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.views.decorators.debug import sensitive_variables

from tools_app.audit import Actor, record
from tools_app.integrations import ledger, vault
from tools_app.integrations.errors import RotationError
from tools_app.models import Integration, IntegrationSecret

# How a sealed value is named in a message: (pk, the row's fields by name, a lookup of
# another row's name by (model label, pk)) -> "slug.FIELD", "preset tool.input", ...
Namer = Callable[[Any, dict[str, Any], Callable[[str, Any], str]], str]


@dataclass(frozen=True)
class SealedColumn:
    """One column holding vault tokens: what rotate_keys re-encrypts below, and what a
    backup fingerprints and a restore decrypts before committing (tools_app/ops/backup.py).
    A blank value seals nothing."""

    model: str  # "app_label.ModelName"
    field: str
    key_field: str  # the column with the sealing key's vault.key_id; "" when none is kept
    name: Namer
    # Rows whose column holds a token (sensitive presets only: plain ones keep `value`).
    sealed_if: Callable[[dict[str, Any]], bool] = lambda fields: True


def _slug(names: Callable[[str, Any], str], pk: Any) -> str:
    return names("tools_app.Integration", pk)


# Every sealed column, once: add a new one here and rotation, backup and restore know it.
# Sealed case inputs live in version files (tools_app/catalog/case_secrets.py), never
# re-encrypted: they may come from another console, so neither rotation nor restore
# requires them to open.
SEALED: tuple[SealedColumn, ...] = (
    SealedColumn(
        "tools_app.IntegrationSecret",
        "ciphertext",
        "key_id",
        lambda pk, f, names: f"{_slug(names, f['integration'])}.{f['field']}",
    ),
    SealedColumn(
        "tools_app.ToolPreset",
        "ciphertext",
        "key_id",
        lambda pk, f, names: f"preset {names('tools_app.Tool', f['tool'])}.{f['input']}",
        sealed_if=lambda f: bool(f.get("sensitive")),
    ),
    SealedColumn(
        "tools_app.OAuthConnection",
        "access_ciphertext",
        "key_id",
        lambda pk, f, names: f"{_slug(names, f['integration'])}.oauth_access_token",
    ),
    SealedColumn(
        "tools_app.OAuthConnection",
        "refresh_ciphertext",
        "key_id",
        lambda pk, f, names: f"{_slug(names, f['integration'])}.oauth_refresh_token",
    ),
    SealedColumn(
        "tools_app.SigningKey",
        "private_key_sealed",
        "sealed_key_id",
        lambda pk, f, names: f"SigningKey.private_key_sealed ({f['role']} key {f['key_id']})",
    ),
    SealedColumn(
        "tools_app.LedgerHead",
        "secret_sealed",
        "sealed_key_id",
        lambda pk, f, names: "LedgerHead.secret_sealed (the secret-usage ledger's key)",
    ),
    # A queued run's sensitive inputs: the token is all there is (no key id column).
    SealedColumn(
        "tools_app.Run",
        "sealed_params",
        "",
        lambda pk, f, names: f"Run.sealed_params (run {pk})",
    ),
)


@dataclass(frozen=True)
class RotationResult:
    rotated: int
    already_current: int
    runs: int = 0  # queued runs whose sealed sensitive inputs were re-encrypted too
    presets: int = 0  # sensitive tool presets (tools_app/catalog/presets.py) re-encrypted too
    oauth: int = 0  # OAuth connections (access and refresh token) re-encrypted too
    signing: int = 0  # signing keys' private keys (tools_app/signing/keyring.py) too
    ledger: int = 0  # the secret-usage ledger's secret (tools_app/integrations/ledger.py)

    @property
    def total(self) -> int:
        return self.rotated + self.already_current


@sensitive_variables()
def rotate_keys(*, batch_size: int = 500, actor: Actor | None = None) -> RotationResult:
    """Re-encrypt every secret under the first key, in batches, each in a transaction.

    Rows already under the first key (by key_id) are skipped, so an interrupted rotation
    resumes where it stopped and a second run changes nothing. A secret no configured key
    decrypts stops the rotation with RotationError naming it; the rows before it in its
    batch are saved, it and everything after are left as they are."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    actor = actor or Actor.system()
    primary = vault.primary_key_id()
    already = IntegrationSecret.objects.filter(key_id=primary).count()
    rotated = 0
    last_pk = 0
    failure: tuple[int, str] | None = None
    while failure is None:
        with transaction.atomic():
            rows = list(
                IntegrationSecret.objects.select_for_update()
                .filter(pk__gt=last_pk)
                .exclude(key_id=primary)
                .order_by("pk")
                .only("pk", "integration_id", "field", "ciphertext", "key_id")[:batch_size]
            )
            if not rows:
                break
            done = []
            for row in rows:
                try:
                    row.ciphertext, row.key_id = vault.rotate(row.ciphertext)
                except vault.VaultError:
                    failure = (row.integration_id, row.field)
                    break
                done.append(row)
            if done:
                _write_ciphertexts(done)
            rotated += len(done)
            last_pk = rows[-1].pk
    runs = _rotate_sealed_runs() if failure is None else 0
    presets = _rotate_presets() if failure is None else 0
    oauth = _rotate_oauth() if failure is None else 0
    signing = _rotate_signing_keys() if failure is None else 0
    ledger_key = ledger.reseal() if failure is None else 0
    result = RotationResult(
        rotated=rotated,
        already_current=already,
        runs=runs,
        presets=presets,
        oauth=oauth,
        signing=signing,
        ledger=ledger_key,
    )
    if failure is not None:
        integration_slug = (
            Integration.objects.filter(pk=failure[0]).values_list("slug", flat=True).first() or "?"
        )
        error = RotationError(
            integration_slug, failure[1], rotated, "no configured key can decrypt it"
        )
        record(
            actor,
            "integrations.rotate_keys",
            summary=f"re-encrypted {rotated} secrets, then stopped at "
            f"{integration_slug}.{failure[1]}: no configured key can decrypt it",
            data={"rotated": rotated, "failed": f"{integration_slug}.{failure[1]}"},
        )
        raise error
    record(
        actor,
        "integrations.rotate_keys",
        summary=f"re-encrypted {rotated} secrets under the first key ({already} already were)",
        data={
            "rotated": rotated,
            "already_current": already,
            "runs": runs,
            "presets": presets,
            "oauth": oauth,
            "signing": signing,
            "ledger": ledger_key,
        },
    )
    return result


# The name the design notes use.
rotate = rotate_keys


def _write_ciphertexts(rows: list[IntegrationSecret]) -> None:
    """One parameterised UPDATE per row through executemany: much faster than
    bulk_update's CASE expressions, and the same on SQLite and PostgreSQL."""
    meta = IntegrationSecret._meta
    quote = connection.ops.quote_name
    table, pk = quote(meta.db_table), quote(meta.pk.column)
    ciphertext, key_id = (quote(meta.get_field(f).column) for f in ("ciphertext", "key_id"))
    # Identifiers come from the model and are quoted; values are parameters.
    sql = f"UPDATE {table} SET {ciphertext} = %s, {key_id} = %s WHERE {pk} = %s"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.executemany(sql, [(r.ciphertext, r.key_id, r.pk) for r in rows])


def _rotate_sealed_runs() -> int:
    """Queued runs keep their sensitive inputs encrypted until they start: re-encrypt
    those too, so removing the old key does not break them. A run whose inputs no key
    decrypts is left alone; it fails with a clear error when it starts."""
    from tools_app.models import Run

    count = 0
    pending = Run.objects.exclude(sealed_params="").values_list("pk", "sealed_params")
    for pk, sealed in pending.iterator():
        try:
            new, _kid = vault.rotate(sealed, what="a queued run's sensitive inputs")
        except vault.VaultError:
            continue
        # Only if unchanged meanwhile (the run may have started and cleared it).
        count += Run.objects.filter(pk=pk, sealed_params=sealed).update(sealed_params=new)
    return count


def _rotate_presets() -> int:
    """Sensitive tool presets are encrypted like secrets: re-encrypt those not under the
    first key. One no key decrypts is left alone; runs then fail saying so."""
    from tools_app.models import ToolPreset

    primary = vault.primary_key_id()
    count = 0
    pending = ToolPreset.objects.filter(sensitive=True).exclude(key_id=primary)
    for pk, token in pending.values_list("pk", "ciphertext").iterator():
        try:
            new, kid = vault.rotate(token, what="a tool preset")
        except vault.VaultError:
            continue
        count += ToolPreset.objects.filter(pk=pk, ciphertext=token).update(
            ciphertext=new, key_id=kid
        )
    return count


@sensitive_variables()
def _rotate_oauth() -> int:
    """OAuth connections seal two tokens under one key: re-encrypt both together, only if
    neither changed meanwhile (a refresh writes new ones, under the first key already).
    One no key decrypts is left alone; its runs fail saying to reconnect."""
    from tools_app.models import OAuthConnection

    primary = vault.primary_key_id()
    count = 0
    pending = OAuthConnection.objects.exclude(key_id=primary)
    for pk, access, refresh in pending.values_list(
        "pk", "access_ciphertext", "refresh_ciphertext"
    ).iterator():
        try:
            new_access, kid = vault.rotate(access, what="an OAuth access token")
            new_refresh = vault.rotate(refresh, what="an OAuth refresh token")[0] if refresh else ""
        except vault.VaultError:
            continue
        count += OAuthConnection.objects.filter(
            pk=pk, access_ciphertext=access, refresh_ciphertext=refresh
        ).update(access_ciphertext=new_access, refresh_ciphertext=new_refresh, key_id=kid)
    return count


def _rotate_signing_keys() -> int:
    """The signing key ring's private keys, each only if unchanged meanwhile. One no key
    decrypts is left alone: publishing then says it cannot be unsealed."""
    from tools_app.models import SigningKey

    primary = vault.primary_key_id()
    count = 0
    pending = SigningKey.objects.exclude(private_key_sealed="").exclude(sealed_key_id=primary)
    for pk, sealed in pending.values_list("pk", "private_key_sealed").iterator():
        try:
            token, kid = vault.rotate(sealed, what="a signing key")
        except vault.VaultError:
            continue
        count += SigningKey.objects.filter(pk=pk, private_key_sealed=sealed).update(
            private_key_sealed=token, sealed_key_id=kid
        )
    return count
