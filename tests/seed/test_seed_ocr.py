"""The ocr seed tool, run for real through the runner and its sandbox with Debian's tesseract.

Every image is drawn here with Pillow (tests/support/ocr.py, as bench/ocr.py draws them) and
checked by its character error rate against the text drawn.
"""

from __future__ import annotations

import json
import shutil
import struct
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import require
from tests.support.ocr import cer, encode, sample
from tools_app.http_tools.checks import ValidationContext
from tools_app.manifest.folder import validate_tool_dir
from tools_app.runner import (
    FAILED,
    SUCCEEDED,
    Limits,
    RunOutcome,
    RunRequest,
    isolation_level,
    run,
)

TOOL = Path(__file__).resolve().parents[2] / "seed" / "tools" / "ocr"
# Per class, the CER a run must stay within: the targets for clean text and
# screenshots, and what the preprocessing reaches on the harder classes (bench/ocr.py).
MAX_CER = {
    "clean": 0.02,
    "screenshot_light": 0.05,
    "screenshot_dark": 0.05,
    "small": 0.03,
    "noise_blur": 0.05,
    "rotated_2deg": 0.02,
    "jpeg_q30": 0.02,
}


@dataclass
class Ocr:
    outcome: RunOutcome

    @property
    def text(self) -> str:
        return "\n".join(item["text"] for item in self.outcome.result["content"])

    @property
    def is_error(self) -> bool:
        return self.outcome.result["isError"]


@pytest.fixture
def ocr(tmp_path: Path):
    require(shutil.which("tesseract") is None, "tesseract is not installed (python3 dev.py up)")
    require(isolation_level()[0] != "bwrap", "the tool runs in bubblewrap here")
    manifest = validate_tool_dir(TOOL, context=ValidationContext()).manifest
    assert manifest is not None
    tool_dir = tmp_path / "tool"
    shutil.copytree(TOOL, tool_dir)

    def call(
        params: dict[str, Any],
        files: dict[str, bytes] | None = None,
        ro_binds: tuple[Path, ...] = (),
    ) -> Ocr:
        """Runs the tool; `files` maps a file name to the bytes sent as the `image` input."""
        params = dict(params)
        input_files = {}
        for name, data in (files or {}).items():
            input_files[f"inputs/image/{name}"] = data
            params["image"] = f"inputs/image/{name}"
        outcome = run(
            RunRequest(
                tool_dir=tool_dir,
                language=manifest.language,
                entry=manifest.entry_candidates[0],
                params=params,
                tool_call_id="call-1",
                env={},
                secrets={},
                network=manifest.network,
                limits=Limits(timeout=manifest.timeout),
                work_root=tmp_path / "runs",
                ro_binds=ro_binds,
                input_files=input_files,
                file_params=("image",) if files else (),
            ),
            on_update=lambda update: None,
            cancel=threading.Event(),
        )
        return Ocr(outcome)

    return call


@pytest.mark.parametrize("kind", list(MAX_CER))
def test_it_reads_each_class_of_image_within_its_error_rate(ocr, kind: str) -> None:
    image, reference = sample(kind, seed=0)
    name, data = encode(image, kind)
    done = ocr({}, files={name: data})
    assert done.outcome.status == SUCCEEDED, (done.text, done.outcome.stderr_tail)
    assert done.outcome.isolation == "bwrap"
    assert cer(reference, done.text) <= MAX_CER[kind], (reference, done.text)


def test_it_gives_words_with_boxes_in_the_original_images_pixels(ocr) -> None:
    # Small text is scaled up before recognition: the boxes must be scaled back.
    image, reference = sample("small", seed=1)
    name, data = encode(image, "small")
    done = ocr({"output": "words"}, files={name: data})
    assert done.outcome.status == SUCCEEDED, done.text
    document = json.loads(done.text)
    words = document["words"]
    assert document["truncated"] is False and document["word_count"] == len(words)
    assert cer(reference, " ".join(w["text"] for w in words)) <= MAX_CER["small"]
    first = words[0]
    assert first["text"] == reference.split()[0]
    assert (first["page"], first["block"], first["line"]) == (1, 1, 1)
    assert 0 < first["confidence"] <= 100
    # The drawing's margin is 8 px and its 9 px font's capitals about 7 px high.
    assert 4 <= first["left"] <= 12 and 4 <= first["top"] <= 14, first
    assert 4 <= first["height"] <= 14, first
    for word in words:
        assert word["left"] + word["width"] <= image.width + 2
        assert word["top"] + word["height"] <= image.height + 2


def test_it_reads_a_multi_page_tiff_in_a_folder_shared_with_tools(ocr, tmp_path: Path) -> None:
    shared = tmp_path / "scans"
    shared.mkdir()
    first, first_text = sample("clean", seed=2)
    second, second_text = sample("jpeg_q30", seed=5)
    first.save(shared / "letter.tiff", format="TIFF", save_all=True, append_images=[second])
    done = ocr({"image_path": str(shared / "letter.tiff")}, ro_binds=(shared,))
    assert done.outcome.status == SUCCEEDED, done.text
    assert done.text.startswith("[page 1]\n")
    page_one, page_two = done.text.removeprefix("[page 1]\n").split("\n\n[page 2]\n")
    assert cer(first_text, page_one) <= MAX_CER["clean"]
    assert cer(second_text, page_two) <= MAX_CER["jpeg_q30"]


def test_it_cuts_long_output_and_keeps_it_whole_as_an_artifact(ocr) -> None:
    image, reference = sample("clean", seed=3)
    done = ocr({"max_chars": 100}, files=dict([encode(image, "clean")]))
    assert done.outcome.status == SUCCEEDED, done.text
    head, note = done.text.rsplit("\n", 1)
    assert len(head) == 100
    total = len(done.outcome.artifacts[0].path.read_text())
    assert note == (
        f"[truncated: showing 100 of {total} characters; "
        "the full text is in /home/tool/output/ocr.txt]"
    )
    [artifact] = done.outcome.artifacts
    assert artifact.name == "ocr.txt"
    assert cer(reference, artifact.path.read_text()) <= MAX_CER["clean"]


def test_it_refuses_a_file_that_is_not_an_image(ocr) -> None:
    done = ocr({}, files={"notes.png": b"these are notes, not a picture\n"})
    assert done.outcome.status == FAILED
    assert done.text == (
        "Error: notes.png is not an image tesseract can read here (PNG, JPEG, TIFF or WebP)"
    )


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG claiming width x height pixels, a few hundred bytes: a decompression bomb."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"\0" * 1024)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def test_it_refuses_a_decompression_bomb_before_decoding_it(ocr) -> None:
    done = ocr({}, files={"bomb.png": _png_header_only(30000, 30000)})
    assert done.outcome.status == FAILED
    assert done.text == (
        "Error: bomb.png is too large: 30000 x 30000 pixels, at most 25 megapixels; "
        "scale it down or crop it"
    )


def test_it_refuses_an_unknown_language_with_the_installed_list(ocr) -> None:
    image, _ = sample("clean", seed=0)
    done = ocr({"languages": "eng+klingon"}, files=dict([encode(image, "clean")]))
    assert done.outcome.status == FAILED
    assert done.text.startswith("Error: unknown language 'klingon'; installed: ")
    assert "eng" in done.text.rsplit(": ", 1)[1].split(", ")


def test_it_says_when_there_is_no_text(ocr) -> None:
    from PIL import Image

    blank = Image.new("RGB", (400, 200), (250, 250, 250))
    done = ocr({}, files=dict([encode(blank, "blank")]))
    assert done.outcome.status == FAILED
    assert done.text.startswith("Error: no text found in blank.png: try another psm")
