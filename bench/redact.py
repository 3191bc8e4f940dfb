"""What redaction of encoded secrets costs: a run's text (64 KiB of progress, 1 MiB of
result) and a 10 MiB text artifact, with 1 and 10 secrets injected. Prints figures only.

    python bench/redact.py
"""

from __future__ import annotations

import base64
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools_app.runner.redact import Redactor  # noqa: E402


def secrets(count: int) -> dict[str, str]:
    return {f"{{{{s{i}.TOKEN}}}}": f"sk-live-{os.urandom(12).hex()}" for i in range(count)}


def text(size: int, secret: str) -> str:
    filler = base64.b64encode(os.urandom(size * 3 // 4)).decode()
    middle = len(filler) // 2
    leak = base64.b64encode(b"Bearer " + secret.encode()).decode()
    return filler[:middle] + " " + leak + " " + secret.encode().hex() + " " + filler[middle:]


def timed(what: str, fn, repeat: int = 5) -> None:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    print(f"{what:58s} {best * 1000:9.1f} ms")


def main() -> None:
    for count in (1, 10):
        values = secrets(count)
        redactor = Redactor(values)
        first = next(iter(values.values()))
        timed(f"{count:2d} secret(s): build the redactor", lambda v=values: Redactor(v))
        for size, name in ((64 * 1024, "64 KiB"), (1 << 20, "1 MiB")):
            sample = text(size, first)
            timed(
                f"{count:2d} secret(s): redact {name} of text (1 leak)",
                lambda s=sample, r=redactor: r.redact(s),
            )
        clean = text(10 << 20, "not-a-secret").encode()
        leaky = text(10 << 20, first).encode()
        timed(
            f"{count:2d} secret(s): 10 MiB artifact, no secret",
            lambda d=clean, r=redactor: r.redact_bytes(d),
        )
        timed(
            f"{count:2d} secret(s): 10 MiB artifact, leaked twice",
            lambda d=leaky, r=redactor: r.redact_bytes(d),
        )


if __name__ == "__main__":
    main()
