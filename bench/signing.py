"""Benchmark: the cost of signing a version at publish, and of verifying one.

    .venv/bin/python bench/signing.py [--tools 1000] [--rounds 5]

Publishes `--tools` python tools (each with the generated index.js that the signature
covers too) in a throwaway SQLite console (its own state dir and DATA_PATH), then times,
in `--rounds` interleaved rounds over every tool:

- sign: tools_app/signing/versions.sign() as publish calls it (the delivered files in hand):
  build the signed manifest, seal it with the newest key, take the tool's next serial and
  store the envelope;
- build+seal: the same without the database (statement.build and envelope.seal);
- verify: versions.verify(), what the worker runs before a published version (opens the
  envelope with keys.json, compares every delivered file and the model view).

Target: sign under 2 ms per version. The last line printed is a JSON object."""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchserver import REPO, console_env

TARGET_SIGN_MS = 2.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-signing-"))
    os.environ.update(console_env(workdir, web_workers=1))
    try:
        versions = prepare(args.tools)
        result = measure(versions, args.rounds)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"sign {result['sign_ms']} ms per version (target < {TARGET_SIGN_MS}), build+seal "
        f"{result['build_seal_ms']} ms, verify {result['verify_ms']} ms, {result['tools']} tools"
    )
    print(json.dumps(result))
    return 0 if result["sign_ms"] < TARGET_SIGN_MS else 1


def prepare(count: int) -> list:
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command

    from tools_app.audit import Actor
    from tools_app.catalog.versions import save_version
    from tools_app.models import ToolVersion

    call_command("migrate", verbosity=0)
    call_command("signing_keys", "create", "--if-missing", stdout=io.StringIO())
    started = time.monotonic()
    for i in range(count):
        name = f"tool_{i:04d}"
        save_version(name, tool_files(name, i), actor=Actor.system(), publish=True)
    print(f"published {count} tools in {time.monotonic() - started:.1f}s", flush=True)
    return list(ToolVersion.objects.select_related("tool").order_by("tool__name"))


def tool_files(name: str, i: int) -> dict[str, bytes]:
    toolmd = f"""---
name: {name}
description: Looks up item {i} and summarises it; never changes anything.
version: 1
language: python
inputs:
  query: {{type: string, description: What to look for.}}
  limit: {{type: integer, description: How many results., optional: true, default: 10}}
  mode: {{type: enum, description: How to answer., values: [short, long], optional: true}}
---
# {name}

Call it with a query.
"""
    source = f"def execute(params):\n    return {{'item': {i}, 'query': params['query']}}\n"
    return {"TOOL.md": toolmd.encode(), "index.py": source.encode(), "lib.py": b"X = 1\n" * 50}


def measure(versions: list, rounds: int) -> dict:
    from django.db import transaction
    from django.utils import timezone

    from tools_app.signing import keyring, statement
    from tools_app.signing import versions as signing
    from tools_app.signing.envelope import MANIFEST_TYPE, seal

    delivered = {v.pk: signing.delivered_files(v) for v in versions}
    key, private = keyring.signer()
    now = timezone.now()
    sign, build_seal, verify = [], [], []
    for _ in range(rounds):
        started = time.perf_counter()
        with transaction.atomic():
            for version in versions:
                signing.sign(
                    version, publisher="bench", published=now, files=delivered[version.pk],
                    tool=version.tool,
                )  # fmt: skip
        sign.append((time.perf_counter() - started) / len(versions))
        started = time.perf_counter()
        for version in versions:
            signed = statement.build(
                version.tool.name, version.number, version.manifest, delivered[version.pk],
                publisher="bench", published=now, serial=1,
            )  # fmt: skip
            seal(MANIFEST_TYPE, signed, key, private)
        build_seal.append((time.perf_counter() - started) / len(versions))
        started = time.perf_counter()
        for version in versions:
            assert signing.verify(version) == []
        verify.append((time.perf_counter() - started) / len(versions))
    return {
        "tools": len(versions),
        "rounds": rounds,
        "sign_ms": round(statistics.median(sign) * 1000, 3),
        "build_seal_ms": round(statistics.median(build_seal) * 1000, 3),
        "verify_ms": round(statistics.median(verify) * 1000, 3),
        "target_sign_ms": TARGET_SIGN_MS,
    }


if __name__ == "__main__":
    raise SystemExit(main())
