"""Benchmark: what signed versions cost, against the issue's targets.

    .venv/bin/python bench/sync_verify.py [--tools 1000] [--rounds 5]

1. Signing (Python, the publish path): statement.build + envelope.seal of each seed tool
   (seed/tools, its delivered files: the generated index.js included), repeated; target
   under 2 ms per version.
2. Verifying (Node.js, clients/sync-tools.mjs in one process): 1,000 signed tool folders
   (the seed tools' files, round robin, each signed under its own name) with their
   .tool-signature.json, keys.json and the root beside them, as the sync client and the
   console write them, each checked with verifyFolder(folder) as a loader or a generated
   index.js calls it (keys.json read for every folder; its root signature checked once per
   process for the same bytes): the first pass in a fresh process (cold: the JIT warming
   up, keys.json opened) and the best of --rounds warm passes; target under 1 ms per tool.

Signing is the best of --rounds. Keys are generated for the run (no database). The last
line printed is a JSON object with every number."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLIENT = REPO / "clients" / "sync-tools.mjs"
TARGETS_MS = {"sign": 2.0, "verify": 1.0}

# One node process: import the verifier, verify every folder `rounds` times, print ms.
NODE_SCRIPT = """
const { verifyFolder } = await import(process.argv[1]);
const [dir, names, rounds] = [process.argv[2], JSON.parse(process.argv[3]), +process.argv[4]];
const time = (each, rounds) => {
  let best = Infinity;
  for (let r = 0; r < rounds; r++) {
    const start = process.hrtime.bigint();
    for (const name of names) each(`${dir}/${name}`);
    best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e6);
  }
  return best;
};
const cold = time((folder) => verifyFolder(folder), 1); // every folder must verify
const warm = time((folder) => verifyFolder(folder), rounds);
console.log(JSON.stringify({ cold, warm }));
"""


def setup_django(tmp: Path) -> None:
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "console.settings",
            "CONSOLE_STATE_DIR": str(tmp / "state"),
            "DATA_PATH": str(tmp / "data"),
            "DATABASE_URL": f"sqlite:///{tmp / 'bench.sqlite3'}",
            "CONSOLE_LOG_LEVEL": "WARNING",
        }
    )
    sys.path.insert(0, str(REPO))
    import django

    django.setup()


def seed_tools() -> list[tuple[str, dict, dict[str, bytes]]]:
    """(name, manifest dict, delivered files) of every valid seed tool."""
    from tools_app.catalog import bundle, shim
    from tools_app.manifest.toolmd import parse_toolmd

    tools = []
    for folder in sorted((REPO / "seed" / "tools").iterdir()):
        if not (folder / "TOOL.md").is_file():
            continue
        files = bundle.read_tool_dir(folder)
        parsed = parse_toolmd(files["TOOL.md"], folder_name=folder.name)
        if parsed.manifest is None:
            continue
        manifest = parsed.manifest.to_dict()
        tools.append((folder.name, manifest, shim.mirror_files(files, manifest)))
    return tools


def time_signing(tools, private, key: str, rounds: int, repeat: int = 50) -> float:
    """Best ms per version of statement.build + envelope.seal over the seed tools."""
    from tools_app.signing import envelope, statement

    now = datetime.now(UTC)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for serial in range(repeat):
            for name, manifest, files in tools:
                signed = statement.build(
                    name, 1, manifest, files, publisher="bench", published=now, serial=serial + 1
                )
                envelope.seal(envelope.MANIFEST_TYPE, signed, key, private)
        best = min(best, (time.perf_counter() - start) * 1000 / (repeat * len(tools)))
    return best


def write_folders(root: Path, tools, count: int, private, key: str, root_private) -> list[str]:
    """`count` signed folders under root, keys.json and the root beside them."""
    from tools_app.catalog import bundle
    from tools_app.signing import envelope, statement, trust

    now = datetime.now(UTC).replace(microsecond=0)
    names = []
    for i in range(count):
        tool_name, manifest, files = tools[i % len(tools)]
        name = f"{tool_name}_{i:04}"
        manifest = {**manifest, "name": name}
        signed = statement.build(
            name, 1, manifest, files, publisher="bench", published=now, serial=1
        )
        sealed = envelope.seal(envelope.MANIFEST_TYPE, signed, key, private)
        bundle.write_tool_dir_atomic(
            root / name, {**files, statement.SIGNATURE_FILE: json.dumps(sealed).encode()}
        )
        names.append(name)
    root_public = root_private.public_key()
    payload = trust.keys_payload(
        serial=1,
        issued=now,
        expires=now + timedelta(days=365),
        root=root_public,
        keys=[(private.public_key(), now)],
    )
    keys = envelope.seal(envelope.KEYS_TYPE, payload, envelope.key_id(root_public), root_private)
    (root / ".tool-keys.json").write_text(json.dumps(keys))
    (root / ".tool-root.json").write_text(json.dumps(payload["root"]))
    return names


def time_verifying(root: Path, names: list[str], rounds: int) -> dict[str, float]:
    from tools_app.runner.sandbox import node_executable

    done = subprocess.run(
        [node_executable(), "--input-type=module", "-e", NODE_SCRIPT]
        + [CLIENT.as_uri(), str(root), json.dumps(names), str(rounds)],
        env={"PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-sync-verify-"))
    try:
        setup_django(tmp)
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        from tools_app.signing import envelope

        root_private, private = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
        key = envelope.key_id(private.public_key())
        tools = seed_tools()
        sign_ms = time_signing(tools, private, key, args.rounds)
        folder = tmp / "tools"
        names = write_folders(folder, tools, args.tools, private, key, root_private)
        verified = time_verifying(folder, names, args.rounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    verify_ms = verified["warm"] / args.tools
    cold_ms = verified["cold"] / args.tools
    result = {
        "seed_tools": len(tools),
        "sign_ms_per_version": round(sign_ms, 3),
        "sign_target_ms": TARGETS_MS["sign"],
        "folders": args.tools,
        "verify_ms_per_tool": round(verify_ms, 3),
        "verify_cold_ms_per_tool": round(cold_ms, 3),
        "verify_target_ms": TARGETS_MS["verify"],
        "verify_total_ms": round(verified["warm"], 1),
    }
    print(
        f"sign (Python, statement.build + envelope.seal, {len(tools)} seed tools): "
        f"{sign_ms:.3f} ms per version; target < {TARGETS_MS['sign']} ms: "
        f"{'met' if sign_ms < TARGETS_MS['sign'] else 'MISSED'}"
    )
    print(
        f"verify (Node, verifyFolder over {args.tools} folders in one process): "
        f"{verify_ms:.3f} ms per tool warm, {cold_ms:.3f} ms in the first pass; target < "
        f"{TARGETS_MS['verify']} ms: "
        f"{'met' if max(verify_ms, cold_ms) < TARGETS_MS['verify'] else 'MISSED'}"
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
