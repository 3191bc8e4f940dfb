"""The charts' geometry, pure: bars and lines in a fixed viewBox that the template draws
as SVG. The SVG stretches to its box (preserveAspectRatio="none"), so it fills 1280 px and
390 px alike; the labels are HTML around it, at the page's own text size."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

WIDTH = 600
HEIGHT = 160


class Bar(NamedTuple):
    """A tuple, not a dataclass: a week by the hour is 168 of them per chart, and a frozen
    dataclass costs several times as much to make (bench/analytics.py)."""

    x: float
    width: float
    y: float  # top of the whole bar
    height: float
    error_y: float  # top of its error part (at the bottom of the bar)
    error_height: float


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    top: float  # the value at the top of the chart (a round number)
    bars: list[Bar]
    lines: list[str]  # SVG polyline points, one per run of steps with a value
    dots: list[tuple[float, float]]  # steps with a value and no neighbour with one
    gridlines: list[float]  # y of the quarter lines

    @property
    def middle(self) -> float:
        return self.top / 2


def nice_top(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten at or above `value` (1 for 0)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value:
            return step * power
    return 10 * power  # pragma: no cover - the loop always returns


def _grid() -> list[float]:
    return [HEIGHT * q / 4 for q in range(1, 4)]


def bar_chart(totals: Sequence[int], errors: Sequence[int]) -> Chart:
    """One bar per step, its errors' share drawn at its foot."""
    top = nice_top(max(totals, default=0))
    step = WIDTH / max(1, len(totals))
    gap = min(2.0, step * 0.2)
    width = round(step - gap, 2)
    scale = HEIGHT / top
    low = float(HEIGHT)
    empty = (0.0, low)
    bars = []
    for i, (total, error) in enumerate(zip(totals, errors, strict=True)):
        height, y = (round(scale * total, 2), round(HEIGHT - scale * total, 2)) if total else empty
        error_height, error_y = (
            (round(scale * error, 2), round(HEIGHT - scale * error, 2)) if error else empty
        )
        bars.append(Bar(round(i * step + gap / 2, 2), width, y, height, error_y, error_height))
    return Chart(WIDTH, HEIGHT, top, bars, [], [], _grid())


def line_chart(values: Sequence[float | None]) -> Chart:
    """A line through the steps that have a value, broken where one has none."""
    top = nice_top(max((v for v in values if v is not None), default=0))
    step = WIDTH / max(1, len(values))
    points: list[list[tuple[float, float]]] = [[]]
    for i, value in enumerate(values):
        if value is None:
            if points[-1]:
                points.append([])
            continue
        x = round(i * step + step / 2, 2)
        points[-1].append((x, round(HEIGHT - HEIGHT * value / top, 2)))
    lines = [" ".join(f"{x},{y}" for x, y in run) for run in points if len(run) > 1]
    dots = [run[0] for run in points if len(run) == 1]
    return Chart(WIDTH, HEIGHT, top, [], lines, dots, _grid())
