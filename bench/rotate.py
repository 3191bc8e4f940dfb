"""Benchmark: rotate_encryption_keys over 10,000 stored secrets.

    .venv/bin/python bench/rotate.py [--secrets 10000] [--batch-size 500] [--database URL]

Sets up a throwaway console (SQLite database, state dir and DATA_PATH in a temporary
folder; or --database, e.g. a PostgreSQL database it may drop and recreate), stores the
secrets under an old key, puts a new key first and times `rotate_encryption_keys` (the
command itself, in this process, batches and transactions included). Then it checks every
secret decrypts under the new key alone. The last line printed is a JSON object with
secrets per second."""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--secrets", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--database", help="DATABASE_URL (default: SQLite in a temp folder)")
    args = parser.parse_args()

    from cryptography.fernet import Fernet

    old_key = Fernet.generate_key().decode()
    new_key = Fernet.generate_key().decode()
    with tempfile.TemporaryDirectory(prefix="bench-rotate-") as tmp:
        os.environ.update(
            {
                "DJANGO_SETTINGS_MODULE": "console.settings",
                "CONSOLE_STATE_DIR": str(Path(tmp) / "state"),
                "DATA_PATH": str(Path(tmp) / "data"),
                "DATABASE_URL": args.database or f"sqlite:///{Path(tmp) / 'bench.sqlite3'}",
                "CONSOLE_ENCRYPTION_KEYS": old_key,
                "CONSOLE_LOG_LEVEL": "WARNING",
            }
        )
        sys.path.insert(0, str(REPO))
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command
        from django.utils import timezone

        from tools_app.integrations import vault
        from tools_app.models import Integration, IntegrationSecret

        if args.database:
            call_command("flush", "--noinput", verbosity=0)
        call_command("migrate", verbosity=0)

        started = time.perf_counter()
        integrations = Integration.objects.bulk_create(
            Integration(slug=f"bench-{i}", type_slug="custom", custom_fields=[])
            for i in range((args.secrets + 99) // 100)
        )
        now = timezone.now()
        rows = []
        for n in range(args.secrets):
            token, key_id = vault.encrypt(f"sk-bench-{n:06d}-" + "x" * 40)
            rows.append(
                IntegrationSecret(
                    integration=integrations[n // 100],
                    field=f"f{n % 100}",
                    ciphertext=token,
                    key_id=key_id,
                    set_at=now,
                )
            )
        IntegrationSecret.objects.bulk_create(rows, batch_size=1000)
        setup_seconds = time.perf_counter() - started
        print(f"stored {args.secrets} secrets under the old key in {setup_seconds:.2f} s")

        settings.CONSOLE_ENCRYPTION_KEYS = [new_key, old_key]
        vault.clear_cache()
        out = io.StringIO()
        started = time.perf_counter()
        call_command("rotate_encryption_keys", "--batch-size", str(args.batch_size), stdout=out)
        seconds = time.perf_counter() - started
        print(out.getvalue().strip())

        settings.CONSOLE_ENCRYPTION_KEYS = [new_key]
        vault.clear_cache()
        readable = 0
        for ciphertext in IntegrationSecret.objects.values_list("ciphertext", flat=True):
            assert vault.decrypt(ciphertext).startswith("sk-bench-")
            readable += 1
        assert readable == args.secrets, (readable, args.secrets)
        print(f"all {readable} secrets decrypt under the new key alone")

        rate = args.secrets / seconds
        result = {
            "benchmark": "rotate_encryption_keys",
            "database": settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1],
            "secrets": args.secrets,
            "batch_size": args.batch_size,
            "seconds": round(seconds, 3),
            "secrets_per_second": round(rate, 1),
            "verified_under_new_key_alone": readable,
        }
        print(f"rotated {args.secrets} secrets in {seconds:.2f} s: {rate:,.0f} secrets/s")
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
