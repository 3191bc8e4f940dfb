"""Images of known text for the ocr seed tool, drawn offline with Pillow and DejaVu fonts, and
the character error rate. Shared by tests/test_seed_ocr.py and bench/ocr.py."""

from __future__ import annotations

import io
import random
import re
from collections.abc import Callable
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter, ImageFont

FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
SANS = FONT_DIR / "DejaVuSans.ttf"

VOCABULARY = (
    "the quick brown fox jumps over lazy dog invoice total amount due date customer order "
    "number shipping address payment received thank you for your business please contact "
    "support team account settings password changed successfully meeting notes agenda "
    "project status report quarterly revenue increased while costs remained stable server "
    "error retry later download complete files uploaded review approve reject cancel save "
    "welcome back dashboard messages notifications profile search results page next "
    "previous monday tuesday march april london paris street road building floor"
)
WORDS = VOCABULARY.split()


def sentence(rng: random.Random, words: int) -> str:
    chosen = [rng.choice(WORDS) for _ in range(words)]
    chosen[0] = chosen[0].capitalize()
    if rng.random() < 0.5:
        chosen.insert(rng.randrange(1, len(chosen)), str(rng.randint(2, 9999)))
    return " ".join(chosen) + rng.choice(".!?:")


def lines(seed: int, count: int = 5, words: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [sentence(rng, words) for _ in range(count)]


def draw(
    text_lines: list[str],
    size: int,
    ink: tuple[int, int, int] = (0, 0, 0),
    paper: tuple[int, int, int] = (255, 255, 255),
    margin: int = 20,
    spacing: float = 1.5,
) -> Image.Image:
    font = ImageFont.truetype(str(SANS), size)
    width = max(round(font.getlength(line)) for line in text_lines) + 2 * margin
    step = round(size * spacing)
    height = step * len(text_lines) + 2 * margin
    image = Image.new("RGB", (width, height), paper)
    pen = ImageDraw.Draw(image)
    for index, line in enumerate(text_lines):
        pen.text((margin, margin + index * step), line, font=font, fill=ink)
    return image


def screenshot(text_lines: list[str], dark: bool) -> Image.Image:
    """A window of UI text at screen size (13 px), with a title bar of another shade."""
    ink, paper, bar = (
        ((220, 220, 220), (30, 30, 30), (50, 50, 60))
        if dark
        else ((34, 34, 34), (246, 246, 246), (225, 228, 235))
    )
    body = draw(text_lines, 13, ink=ink, paper=paper, margin=16, spacing=1.6)
    image = Image.new("RGB", (body.width, body.height + 28), paper)
    ImageDraw.Draw(image).rectangle((0, 0, body.width, 27), fill=bar)
    image.paste(body, (0, 28))
    return image


def noisy(text_lines: list[str], seed: int) -> Image.Image:
    """A poor scan: blurred, low contrast, gaussian speckles (seeded, so reproducible)."""
    image = draw(text_lines, 22).convert("L").filter(ImageFilter.GaussianBlur(1.5))
    rng = random.Random(seed)
    values = bytes(
        min(255, max(0, round(rng.gauss(128, 60)))) for _ in range(image.width * image.height)
    )
    noise = Image.frombytes("L", image.size, values)
    return Image.blend(image, noise, 0.36)


def rotated(text_lines: list[str], seed: int) -> Image.Image:
    angle = 2.0 if seed % 2 else -2.0
    image = draw(text_lines, 26)
    return image.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor="white")


def jpeg(text_lines: list[str]) -> Image.Image:
    buffer = io.BytesIO()
    draw(text_lines, 20).save(buffer, format="JPEG", quality=30)
    buffer.seek(0)
    return Image.open(buffer)


# Class name -> (image of these lines with this seed).
CLASSES: dict[str, Callable[[list[str], int], Image.Image]] = {
    "clean": lambda t, s: draw(t, 28),
    "screenshot_light": lambda t, s: screenshot(t, dark=False),
    "screenshot_dark": lambda t, s: screenshot(t, dark=True),
    "small": lambda t, s: draw(t, 9, margin=8),
    "noise_blur": noisy,
    "rotated_2deg": rotated,
    "jpeg_q30": lambda t, s: jpeg(t),
}


def sample(kind: str, seed: int) -> tuple[Image.Image, str]:
    """An image of the class and the text it shows."""
    text_lines = lines(seed)
    return CLASSES[kind](text_lines, seed), "\n".join(text_lines)


def encode(image: Image.Image, kind: str) -> tuple[str, bytes]:
    """File name and bytes as a user would send them: JPEG for the JPEG class, else PNG."""
    buffer = io.BytesIO()
    if kind == "jpeg_q30":
        image.save(buffer, format="JPEG", quality=30)
        return f"{kind}.jpg", buffer.getvalue()
    image.save(buffer, format="PNG")
    return f"{kind}.png", buffer.getvalue()


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def edit_distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def cer(reference: str, recognised: str) -> float:
    """Character error rate: edit distance over the reference's length, whitespace runs
    counted as one space (layout is not what is measured)."""
    ref = _normal(reference)
    return edit_distance(ref, _normal(recognised)) / max(1, len(ref))
