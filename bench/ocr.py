"""The ocr seed tool's accuracy and speed on images drawn offline: per class of image, the
character error rate (edit distance over reference length) and the time per image, with and
without the tool's preprocessing. It calls the tool's own functions (seed/tools/ocr/index.py),
so what it measures is what a run does; tesseract runs with OMP_THREAD_LIMIT=1 as there.

    python bench/ocr.py [images per class, default 6]

Targets: CER <= 2 % on clean text, <= 5 % on screenshots, and preprocessing never worse
than none on any class.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.ocr import CLASSES, cer, sample  # noqa: E402

TARGETS = {"clean": 0.02, "screenshot_light": 0.05, "screenshot_dark": 0.05}


def load_tool():
    spec = importlib.util.spec_from_file_location("ocr_tool", ROOT / "seed/tools/ocr/index.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as the harness does: dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def measure(tool, kind: str, count: int, preprocess: bool) -> tuple[float, float]:
    """Mean CER and seconds per image over `count` images of the class."""
    rates, seconds = [], 0.0
    for seed in range(count):
        image, reference = sample(kind, seed)
        start = time.perf_counter()
        prepared = tool.prepare(image) if preprocess else tool.unprepared(image)
        text = tool.clean_text(tool.recognise(prepared, "eng", tool.PSM["auto"], words=False))
        seconds += time.perf_counter() - start
        rates.append(cer(reference, text))
    return sum(rates) / len(rates), seconds / count


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    tool = load_tool()
    print(f"{count} images per class; CER and time per image (tesseract, eng, psm auto)")
    print(f"{'class':18s} {'CER none':>9s} {'CER prep':>9s} {'s none':>8s} {'s prep':>8s}  verdict")
    failed = False
    for kind in CLASSES:
        raw, raw_s = measure(tool, kind, count, preprocess=False)
        prep, prep_s = measure(tool, kind, count, preprocess=True)
        problems = []
        if prep > raw + 1e-9:
            problems.append("preprocessing worse than none")
        if kind in TARGETS and prep > TARGETS[kind]:
            problems.append(f"above the {TARGETS[kind]:.0%} target")
        failed = failed or bool(problems)
        verdict = "; ".join(problems) or "ok"
        print(f"{kind:18s} {raw:9.2%} {prep:9.2%} {raw_s:8.2f} {prep_s:8.2f}  {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
