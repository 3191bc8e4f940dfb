"""The secret-usage ledger (tools_app/integrations/ledger.py, docs/security.md "The
secret-usage ledger"): one append-only row per run x integration the run received, hash
chained. Plain values only (no foreign keys): deleting a run, a user or a token must not
edit the ledger."""

from __future__ import annotations

from django.db import connections, models
from django.db.models import TextField
from django.db.models.functions import Cast


class SecretUseQuerySet(models.QuerySet):
    def with_fingerprint(self, fingerprint: str) -> SecretUseQuerySet:
        """Rows one of whose values has this fingerprint: one query (on PostgreSQL the
        jsonb containment the GIN index of migration 0022 serves)."""
        if connections[self.db].vendor == "postgresql":
            return self.filter(fingerprints__contains=[fingerprint])
        # SQLite has no JSON containment: the list's text holds the quoted hex string.
        text = Cast("fingerprints", TextField())
        return self.annotate(fingerprints_text=text).filter(
            fingerprints_text__contains=f'"{fingerprint}"'
        )


class SecretUse(models.Model):
    """What one run received of one integration. The grant fields (everything but
    `outcome` and `outcome_mac`) are covered by `row_hash`, which chains to the row
    before; the outcome, written when the run ends, by its own MAC."""

    seq = models.PositiveBigIntegerField(unique=True)
    created_at = models.DateTimeField(db_index=True)
    run_id = models.UUIDField(db_index=True)
    tool = models.CharField(max_length=200, db_index=True)
    version = models.PositiveIntegerField()
    # The version was not published when the run started (a developer's test run).
    draft = models.BooleanField(default=False)
    integration = models.CharField(max_length=64, db_index=True)
    integration_id = models.BigIntegerField(null=True, blank=True)
    # The secret fields delivered, their vault key ids and value fingerprints, in one order.
    fields = models.JSONField(default=list)
    key_ids = models.JSONField(default=list)
    fingerprints = models.JSONField(default=list)
    user_id = models.BigIntegerField(null=True, blank=True)
    username = models.CharField(max_length=150, blank=True, default="")
    token_id = models.BigIntegerField(null=True, blank=True)
    token_name = models.CharField(max_length=100, blank=True, default="")
    token_prefix = models.CharField(max_length=16, blank=True, default="")
    via = models.CharField(max_length=16, db_index=True)
    # The run's final status, "" while it runs.
    outcome = models.CharField(max_length=16, blank=True, default="")
    prev_hash = models.CharField(max_length=64)
    row_hash = models.CharField(max_length=64)
    outcome_mac = models.CharField(max_length=64)

    objects = SecretUseQuerySet.as_manager()

    class Meta:
        ordering = ["-seq"]
        verbose_name = "secret use"

    def __str__(self) -> str:
        return f"#{self.seq} {self.integration} -> {self.tool} v{self.version}"

    @property
    def who(self) -> str:
        if self.token_name:
            return f"token:{self.token_name}"
        return self.username or "-"


class LedgerHead(models.Model):
    """The ledger's singleton (pk 1): locked by every append so the chain stays linear,
    the tip (last seq and row hash), what pruning removed, and the ledger secret sealed
    by the vault (the chain and fingerprint keys derive from it)."""

    secret_sealed = models.TextField(blank=True, default="")
    # The vault key that sealed it (vault.key_id), for rotate_encryption_keys.
    sealed_key_id = models.CharField(max_length=16, blank=True, default="")
    last_seq = models.PositiveBigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, blank=True, default="")
    # Retention: rows up to pruned_seq were deleted; pruned_hash is the last one's row hash.
    pruned_seq = models.PositiveBigIntegerField(default=0)
    pruned_hash = models.CharField(max_length=64, blank=True, default="")
    pruned_rows = models.PositiveBigIntegerField(default=0)
    pruned_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "ledger head"

    def __str__(self) -> str:
        return f"ledger head #{self.last_seq}"
