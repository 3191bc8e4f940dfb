"""ocr: text from an image with Debian's tesseract, after preprocessing with Pillow.

The preprocessing (`prepare`) and the recognition (`recognise`) are plain functions so that
bench/ocr.py measures exactly what a run does.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image, ImageChops, ImageFilter, ImageOps, ImageStat, UnidentifiedImageError

FORMATS = ("PNG", "JPEG", "TIFF", "WEBP")
MAX_FILE_BYTES = 20 << 20
# 25 megapixels (e.g. 5000 x 5000): what tesseract reads well within the run's 512 MiB.
MAX_PIXELS = 25_000_000
MAX_PAGES = 20  # frames of a multi-page TIFF
DEFAULT_MAX_CHARS = 20_000
MAX_MAX_CHARS = 500_000  # below the console's 1 MiB result limit
BORDER = 10  # white pixels around the image: tesseract misses text touching the edge
# Tesseract reads best at a capital height of about 30 px; smaller lines are scaled up to it.
TARGET_LINE_PX = 32
MIN_LINE_PX = 22
MAX_SCALE = 4.0
# Mean change a 3 x 3 median filter makes: clean text's antialiased edges stay near 5,
# speckled scans and photos of pages are well above.
NOISY = 9.0
POLL_SECONDS = 0.05

# Page segmentation modes by name (tesseract --help-psm), numbers being easy to mistype.
PSM = {
    "auto": 3,
    "single_column": 4,
    "single_block": 6,
    "single_line": 7,
    "single_word": 8,
    "sparse_text": 11,
}
LANGUAGE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


class ToolError(Exception):
    """A problem the caller can fix; its message becomes the error result."""


class Cancelled(Exception):
    pass


@dataclass
class Prepared:
    """An image ready for tesseract, and how to map its coordinates back to the original."""

    image: Image.Image
    scale: float
    border: int
    inverted: bool

    def to_original(self, value: float, edge: bool) -> int:
        return max(0, round((value - (self.border if edge else 0)) / self.scale))


# --- input -------------------------------------------------------------------------------


def _source(params: dict[str, Any]) -> Path:
    given = [params.get(k) for k in ("image", "image_path") if params.get(k)]
    if not given:
        raise ToolError("give an image: upload one as `image`, or name a file in `image_path`")
    if len(given) > 1:
        raise ToolError("give either `image` or `image_path`, not both")
    path = Path(str(given[0]))
    if not path.exists():
        raise ToolError(
            f"image file not found: {path} (is the path right, and under a folder the console "
            "shares with tools, CONSOLE_TOOL_INPUT_DIRS?)"
        )
    if not path.is_file():
        raise ToolError(f"{path} is not a regular file")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ToolError(
            f"{path.name} is too large: {size} bytes, at most {MAX_FILE_BYTES >> 20} MiB"
        )
    return path


# The pixel cap is checked here, on each header, before any pixel is decoded; Pillow's own
# check (warning past 89 megapixels) would only name the size in a warning.
Image.MAX_IMAGE_PIXELS = None


def _check_size(name: str, image: Image.Image) -> None:
    width, height = image.size
    if width * height > MAX_PIXELS:
        raise ToolError(
            f"{name} is too large: {width} x {height} pixels, at most "
            f"{MAX_PIXELS // 1_000_000} megapixels; scale it down or crop it"
        )


@contextlib.contextmanager
def open_image(path: Path) -> Iterator[Image.Image]:
    """The image at path, refused when it is not PNG/JPEG/TIFF/WebP or has too many pixels.
    Opening reads the header only, so a decompression bomb is refused undecoded."""
    try:
        image = Image.open(path, formats=FORMATS)
    except UnidentifiedImageError:
        raise ToolError(
            f"{path.name} is not an image tesseract can read here (PNG, JPEG, TIFF or WebP)"
        ) from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise ToolError(f"cannot read {path.name}: {exc}") from None
    with image:
        _check_size(path.name, image)
        yield image


def frames(image: Image.Image, name: str) -> Iterator[Image.Image]:
    """Each page (a multi-page TIFF has several), decoded, at most MAX_PAGES."""
    count = min(getattr(image, "n_frames", 1), MAX_PAGES)
    for index in range(count):
        try:
            image.seek(index)
            _check_size(f"{name} page {index + 1}" if count > 1 else name, image)
            image.load()
        except (OSError, SyntaxError, ValueError, EOFError) as exc:
            raise ToolError(f"{name} is damaged and cannot be decoded: {exc}") from None
        yield image.copy()


# --- preprocessing ---------------------------------------------------------------------


def grayscale(image: Image.Image) -> Image.Image:
    """One 8-bit channel; transparency becomes white (screenshots often have it)."""
    image = ImageOps.exif_transpose(image) or image
    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(white, rgba)
    if image.mode == "I" or image.mode.startswith("I;16"):
        image = image.point(lambda v: v / 256)  # 16-bit samples to 8: convert() would clip
    return image.convert("L")


def _otsu(histogram: list[int]) -> int:
    total = sum(histogram)
    weighted = sum(i * n for i, n in enumerate(histogram))
    best, threshold = -1.0, 128
    below = below_sum = 0
    for level, count in enumerate(histogram):
        below += count
        if below == 0:
            continue
        above = total - below
        if above == 0:
            break
        below_sum += level * count
        mean_below = below_sum / below
        mean_above = (weighted - below_sum) / above
        spread = below * above * (mean_below - mean_above) ** 2
        if spread > best:
            best, threshold = spread, level
    return threshold


def is_light_on_dark(gray: Image.Image) -> bool:
    """The background is the larger side of the Otsu split: dark background, light text."""
    histogram = gray.histogram()
    threshold = _otsu(histogram)
    dark = sum(histogram[: threshold + 1])
    return dark > sum(histogram) - dark


def line_height(gray: Image.Image) -> float | None:
    """The median height in pixels of the rows of text (dark on light), or None.

    Row profile of the binarised image: a run of rows holding ink is a text line. The image
    is denoised with a median filter first so speckles do not join the lines."""
    threshold = _otsu(gray.histogram())
    clean = gray.filter(ImageFilter.MedianFilter(3)) if gray.width * gray.height < 8e6 else gray
    ink = clean.point(lambda v: 255 if v <= threshold else 0)
    # The mean of each row, by Pillow's box filter: how much ink the row holds.
    profile = list(ink.resize((1, ink.height), Image.Resampling.BOX).getdata())
    rows = [v > 255 * 0.004 for v in profile]
    heights: list[int] = []
    run = 0
    for has_ink in [*rows, False]:
        if has_ink:
            run += 1
        elif run:
            if run >= 3:  # shorter runs are rules or noise
                heights.append(run)
            run = 0
    if not heights:
        return None
    heights.sort()
    return float(heights[len(heights) // 2])


def denoised(gray: Image.Image) -> Image.Image:
    """Speckle noise removed (median filter) and the contrast it ate restored, when the
    image is noisy; else the image as it is, since the filter rounds off clean glyphs."""
    smooth = gray.filter(ImageFilter.MedianFilter(3))
    if ImageStat.Stat(ImageChops.difference(gray, smooth)).mean[0] <= NOISY:
        return gray
    return ImageOps.autocontrast(smooth, cutoff=1)


def prepare(image: Image.Image) -> Prepared:
    """Grayscale, light-on-dark turned dark-on-light, small text scaled up, speckles
    removed, a white border. Denoising comes after scaling: on small text the median filter
    would take the thin strokes for noise."""
    gray = grayscale(image)
    inverted = is_light_on_dark(gray)
    if inverted:
        gray = ImageOps.invert(gray)
    scale = 1.0
    height = line_height(gray)
    if height is not None and height < MIN_LINE_PX:
        scale = min(MAX_SCALE, TARGET_LINE_PX / height)
        # Never past the pixel cap: tesseract's memory grows with the area.
        scale = min(scale, (MAX_PIXELS / (gray.width * gray.height)) ** 0.5)
        if scale > 1.05:
            size = (round(gray.width * scale), round(gray.height * scale))
            gray = gray.resize(size, Image.Resampling.LANCZOS)
        else:
            scale = 1.0
    gray = denoised(gray)
    gray = ImageOps.expand(gray, border=BORDER, fill=255)
    return Prepared(gray, scale, BORDER, inverted)


def unprepared(image: Image.Image) -> Prepared:
    """The image as it is (only made something tesseract reads), for preprocess: false."""
    if image.mode not in ("1", "L", "RGB"):
        image = image.convert("RGB")
    return Prepared(image, 1.0, 0, False)


# --- tesseract -------------------------------------------------------------------------


def tesseract() -> str:
    found = shutil.which("tesseract")
    if found is None:
        raise ToolError(
            "tesseract is not installed on the machine that runs the tools; install it "
            "(Debian/Ubuntu: apt-get install tesseract-ocr tesseract-ocr-eng) and try again"
        )
    return found


def _env() -> dict[str, str]:
    # One OpenMP thread: tesseract's threads gain little and make parallel runs crawl.
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env["OMP_THREAD_LIMIT"] = "1"
    return env


def installed_languages() -> list[str]:
    done = subprocess.run(
        [tesseract(), "--list-langs"], capture_output=True, text=True, env=_env(), check=False
    )
    lines = done.stdout.splitlines()[1:] if done.returncode == 0 else []
    # osd is orientation and script detection, not a language to read.
    return sorted(line.strip() for line in lines if line.strip() and line.strip() != "osd")


def languages(value: Any) -> str:
    """ "eng", "eng+deu" or "eng, deu" as tesseract's -l argument; unknown ones refused."""
    names = [n for n in re.split(r"[+,\s]+", str(value or "eng")) if n]
    installed = installed_languages()
    if not installed:
        raise ToolError(
            "no tesseract language data is installed (Debian/Ubuntu: apt-get install "
            "tesseract-ocr-eng)"
        )
    unknown = [n for n in names if not LANGUAGE.match(n) or n not in installed]
    if unknown:
        listed = ", ".join(installed)
        raise ToolError(
            f"unknown language {', '.join(repr(n) for n in unknown)}; installed: {listed}"
        )
    return "+".join(dict.fromkeys(names))


def _run(argv: list[str], signal: Any) -> str:
    """Run tesseract, stopping it when the run is cancelled; its stdout."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=_env())
        while proc.poll() is None:
            if getattr(signal, "aborted", False):
                proc.kill()
                proc.wait()
                raise Cancelled
            time.sleep(POLL_SECONDS)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            message = err.read().decode(errors="replace").strip().splitlines()[-3:]
            raise ToolError(f"tesseract failed (exit {proc.returncode}): {' '.join(message)}")
        return out.read().decode(errors="replace")


def recognise(prepared: Prepared, lang: str, psm: int, words: bool, signal: Any = None) -> str:
    """Tesseract's plain text, or its TSV when words is true."""
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "page.png"
        prepared.image.save(page, format="PNG")
        argv = [tesseract(), str(page), "stdout", "-l", lang, "--psm", str(psm)]
        return _run([*argv, "tsv"] if words else argv, signal)


def parse_tsv(tsv: str, prepared: Prepared, page: int) -> list[dict[str, Any]]:
    """Tesseract's TSV as words with boxes in the original image's pixels."""
    found = []
    for row in csv.DictReader(io.StringIO(tsv), delimiter="\t", quoting=csv.QUOTE_NONE):
        text = (row.get("text") or "").strip()
        if row.get("level") != "5" or not text:
            continue
        left, top = float(row["left"]), float(row["top"])
        right, bottom = left + float(row["width"]), top + float(row["height"])
        x0, y0 = prepared.to_original(left, True), prepared.to_original(top, True)
        x1, y1 = prepared.to_original(right, True), prepared.to_original(bottom, True)
        found.append(
            {
                "text": text,
                "confidence": round(float(row["conf"]), 1),
                "left": x0,
                "top": y0,
                "width": max(1, x1 - x0),
                "height": max(1, y1 - y0),
                "page": page,
                "block": int(row["block_num"]),
                "line": int(row["line_num"]),
            }
        )
    return found


def clean_text(text: str) -> str:
    """Tesseract's text without its trailing form feed and runs of blank lines."""
    text = text.replace("\x0c", "").strip("\n")
    return re.sub(r"\n{3,}", "\n\n", text)


# --- the tool ----------------------------------------------------------------------------


def _result(text: str, is_error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def _progress(on_update: Callable[[dict[str, Any]], Any] | None, text: str, **counts: int) -> None:
    if on_update is None:
        return
    with contextlib.suppress(Exception):  # a broken progress channel must not fail the run
        on_update({"content": [{"type": "text", "text": text}], **counts})


def _max_chars(value: Any) -> int:
    if value is None or value == "":
        return DEFAULT_MAX_CHARS
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole:
        raise ToolError(f"max_chars must be an integer, got {value!r}")
    if not 100 <= value <= MAX_MAX_CHARS:
        raise ToolError(f"max_chars must be between 100 and {MAX_MAX_CHARS}, got {int(value)}")
    return int(value)


def _choice(params: dict[str, Any], name: str, choices: tuple[str, ...], default: str) -> str:
    value = str(params.get(name) or default).strip().lower()
    if value not in choices:
        raise ToolError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def _output_file(params: dict[str, Any], words: bool) -> Path | None:
    """Where the full output goes: output_path (inside TOOL_OUTPUT_DIR, the runner made it
    so), else ocr.txt / ocr.json in TOOL_OUTPUT_DIR; None outside a run."""
    if params.get("output_path"):
        return Path(str(params["output_path"]))
    folder = os.environ.get("TOOL_OUTPUT_DIR")
    return Path(folder) / ("ocr.json" if words else "ocr.txt") if folder else None


def _write(path: Path | None, text: str) -> str | None:
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def _render_text(text: str, limit: int, params: dict[str, Any]) -> str:
    wanted = params.get("output_path")
    if len(text) <= limit:
        if wanted:
            return f"{text}\n\n(The text is also in {_write(_output_file(params, False), text)}.)"
        return text
    where = _write(_output_file(params, False), text)
    note = f"; the full text is in {where}" if where else ""
    return f"{text[:limit]}\n[truncated: showing {limit} of {len(text)} characters{note}]"


def _render_words(found: list[dict[str, Any]], pages: int, limit: int, params: dict) -> str:
    document: dict[str, Any] = {"pages": pages, "word_count": len(found), "words": found}
    full = json.dumps(document, ensure_ascii=False)
    if len(full) <= limit and not params.get("output_path"):
        document["truncated"] = False
        return json.dumps(document, ensure_ascii=False)
    where = _write(_output_file(params, True), full)
    document["output_path"] = where
    if len(full) <= limit:
        document["truncated"] = False
        return json.dumps(document, ensure_ascii=False)
    # As many words as fit, each about the size of its JSON.
    kept, size = [], 200
    for word in found:
        size += len(json.dumps(word, ensure_ascii=False)) + 2
        if size > limit:
            break
        kept.append(word)
    document.update(words=kept, truncated=True, words_shown=len(kept))
    return json.dumps(document, ensure_ascii=False)


def execute(
    tool_call_id: str,
    params: dict[str, Any],
    signal: Any,
    on_update: Callable[[dict[str, Any]], Any] | None,
) -> dict[str, Any]:
    params = params or {}
    try:
        path = _source(params)
        lang = languages(params.get("languages"))
        psm = PSM[_choice(params, "psm", tuple(PSM), "auto")]
        words = _choice(params, "output", ("text", "words"), "text") == "words"
        limit = _max_chars(params.get("max_chars"))
        preprocess = params.get("preprocess", True) is not False
        texts: list[str] = []
        found: list[dict[str, Any]] = []
        with open_image(path) as image:
            total = min(getattr(image, "n_frames", 1), MAX_PAGES)
            what = f"{image.format} {image.width} x {image.height}"
            _progress(on_update, f"reading {path.name} ({what}, {total} page(s)) in {lang}")
            for number, frame in enumerate(frames(image, path.name), start=1):
                if getattr(signal, "aborted", False):
                    raise Cancelled
                prepared = prepare(frame) if preprocess else unprepared(frame)
                output = recognise(prepared, lang, psm, words, signal)
                if words:
                    found.extend(parse_tsv(output, prepared, number))
                else:
                    texts.append(clean_text(output))
                _progress(on_update, f"page {number} of {total} read", progress=number, total=total)
        if len(texts) > 1:
            texts = [f"[page {n}]\n{t}" for n, t in enumerate(texts, start=1) if t]
        text = "\n\n".join(t for t in texts if t)
        if not (found if words else text.strip()):
            raise ToolError(
                f"no text found in {path.name}: try another psm (sparse_text for scattered "
                f"text, single_line for one line) or check the language ({lang})"
            )
        if words:
            return _result(_render_words(found, total, limit, params))
        return _result(_render_text(text, limit, params))
    except Cancelled:
        return _result("cancelled", is_error=True)
    except ToolError as exc:
        return _result(f"Error: {exc}", is_error=True)
