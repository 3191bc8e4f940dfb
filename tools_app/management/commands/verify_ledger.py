"""`verify_ledger`: check the secret-usage ledger's hash chain (docs/security.md "The
secret-usage ledger"). Exit 0 `N rows, chain intact`; exit 1 naming each problem: a row
edited, rows missing between two seqs, an outcome edited, the head not matching."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from tools_app.integrations import ledger, vault
from tools_app.models import LedgerHead


class Command(BaseCommand):
    help = "Verify the secret-usage ledger's hash chain."

    def handle(self, *args, **options) -> None:
        try:
            count, problems = ledger.verify()
        except vault.VaultError as exc:
            raise CommandError(f"the ledger cannot be verified: {exc}") from None
        head = LedgerHead.objects.filter(pk=ledger.HEAD).first()
        pruned = ""
        if head is not None and head.pruned_rows:
            pruned = (
                f" ({head.pruned_rows} older rows pruned, up to seq {head.pruned_seq}, "
                "by the retention)"
            )
        for problem in problems:
            self.stderr.write(problem)
        if problems:
            raise CommandError(f"{count} rows, {len(problems)} problem(s): the chain is broken")
        tip = f"; head seq {head.last_seq} {head.last_hash[:16]}" if head and head.last_seq else ""
        self.stdout.write(f"{count} rows, chain intact{pruned}{tip}")
