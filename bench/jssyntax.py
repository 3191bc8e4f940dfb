"""What the TypeScript/JavaScript syntax check costs per validation (the editor asks for one
at most every 500 ms while someone types): wall time and CPU of the Node processes, for
the seed tools' sources, a valid file, a syntax error in TypeScript and an invalid ES
module (the one case that starts a second process). Prints figures only.

    python bench/jssyntax.py
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools_app.manifest import jssyntax  # noqa: E402

VALID = b"export async function execute(id: string, params: { n: number }) {\n  return { n: params.n };\n}\n"  # noqa: E501
CASES = {
    "one valid index.ts": {"index.ts": VALID},
    "a TypeScript syntax error": {"index.ts": VALID.replace(b"n: number", b"n: = number")},
    "an invalid ES module (2 processes)": {"index.ts": VALID + b"const execute = 1;\n"},
    "a 200 KiB index.ts": {"index.ts": VALID + b"export const x: number = 1;\n" * 7000},
}


def seed_files() -> dict[str, dict[str, bytes]]:
    tools = {}
    for folder in sorted((ROOT / "seed" / "tools").iterdir()):
        files = {
            str(p.relative_to(folder)): p.read_bytes()
            for p in folder.rglob("*")
            if p.is_file() and p.suffix in (".ts", ".js", ".mjs")
        }
        if files:
            tools[f"seed {folder.name}"] = files
    return tools


def timed(what: str, files: dict[str, bytes], repeat: int = 10) -> None:
    walls = []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(repeat):
        start = time.perf_counter()
        jssyntax.problems(files, "bench/TOOL.md")
        walls.append(time.perf_counter() - start)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / repeat
    walls.sort()
    print(
        f"{what:40s} median {walls[len(walls) // 2] * 1000:6.1f} ms  "
        f"max {walls[-1] * 1000:6.1f} ms  cpu {cpu * 1000:6.1f} ms"
    )


def main() -> None:
    jssyntax.problems({"index.ts": VALID}, "bench/TOOL.md")  # the page cache warms up
    for what, files in {**CASES, **seed_files()}.items():
        timed(what, files)


if __name__ == "__main__":
    main()
