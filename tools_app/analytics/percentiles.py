"""Percentiles with linear interpolation, as PostgreSQL's `percentile_cont` computes them.

On PostgreSQL the database does it (`PercentileCont`, an ordered-set aggregate), so a
page never loads the values. SQLite has no such aggregate: `grouped_percentiles` then
fetches each group's values sorted, in one query for all groups, and interpolates them
here with the same arithmetic (`interpolate`), so both databases give the same figures.
That costs one row per value to the web process (fine for SQLite's one-machine installs,
the reason PostgreSQL does it in place)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.postgres.fields import ArrayField
from django.db import connections
from django.db.models import Aggregate, DurationField, ExpressionWrapper, F, FloatField, Func, Q
from django.db.models.expressions import Combinable
from django.db.models.query import QuerySet


class PercentileCont(Aggregate):
    """`percentile_cont(ARRAY[f1, f2, ...]) WITHIN GROUP (ORDER BY expression)`
    (PostgreSQL only): the list of those percentiles, in one sort of the group's values
    (one aggregate per fraction sorted them once each: twice as slow over a week of a busy
    tool). NULLs are left out, as by every aggregate; None for a group without a value."""

    function = "percentile_cont"
    name = "PercentileCont"
    template = (
        "%(function)s(ARRAY[%(fractions)s]::double precision[])"
        " WITHIN GROUP (ORDER BY %(expressions)s)"
    )

    def __init__(self, expression, fractions: Sequence[float], **extra) -> None:
        checked = [float(f) for f in fractions]
        # They go into the SQL as literals: only numbers in [0, 1] may.
        if not checked or not all(0.0 <= f <= 1.0 for f in checked):
            raise ValueError(f"a percentile's fraction is between 0 and 1, not {fractions!r}")
        super().__init__(
            expression,
            fractions=", ".join(repr(f) for f in checked),
            output_field=ArrayField(FloatField()),
            **extra,
        )


class Seconds(Func):
    """An interval as seconds (double precision) on PostgreSQL."""

    template = "EXTRACT(EPOCH FROM %(expressions)s)::double precision"
    output_field = FloatField()


@dataclass(frozen=True)
class Measure:
    """A value of a run whose percentiles are wanted: its expression, and the condition
    under which a run has one (runs without it are left out)."""

    name: str
    expression: Combinable
    present: Q

    def in_seconds(self) -> Combinable:
        if isinstance(self.expression, ExpressionWrapper):
            return Seconds(self.expression)
        return self.expression


# Seconds the tool ran (Run.duration, measured by the runner).
DURATION = Measure("duration", F("duration"), Q(duration__isnull=False))
# Seconds from queued (created_at) to claimed by a worker (started_at).
QUEUE_WAIT = Measure(
    "wait",
    ExpressionWrapper(F("started_at") - F("created_at"), output_field=DurationField()),
    Q(started_at__isnull=False),
)


def in_database(queryset: QuerySet) -> bool:
    """Does this queryset's database compute percentiles itself?"""
    return connections[queryset.db].vendor == "postgresql"


def interpolate(ordered: Sequence[float], fraction: float) -> float | None:
    """The `fraction` percentile of `ordered` (ascending) exactly as PostgreSQL's
    percentile_cont computes it (float8_lerp in its utils/adt/orderedsetaggs.c), so the
    same values give the same float on both databases. None for no values."""
    if not ordered:
        return None
    position = fraction * (len(ordered) - 1)
    first, second = math.floor(position), math.ceil(position)
    low, high = ordered[first], ordered[second]
    if first == second:
        return float(low)
    return low + (high - low) * (position - first)


def interpolate_union(
    big: Sequence[float], small: Sequence[float], fraction: float
) -> float | None:
    """`interpolate` of two ascending sequences taken together, without merging them: the
    two values it needs are found by binary search (a window's kept values and the few
    runs read since)."""
    if not small:
        return interpolate(big, fraction)
    if not big:
        return interpolate(small, fraction)
    position = fraction * (len(big) + len(small) - 1)
    first, second = math.floor(position), math.ceil(position)
    low = kth(big, small, first)
    if first == second:
        return float(low)
    high = kth(big, small, second)
    return low + (high - low) * (position - first)


def kth(a: Sequence[float], b: Sequence[float], k: int) -> float:
    """The `k`th (from 0) of the ascending sequences `a` and `b` together."""
    # i of a's values and k + 1 - i of b's are the k + 1 smallest: the least i with
    # a[i] >= b[k - i], as a[i] grows with i and b[k - i] shrinks.
    low, high = max(0, k + 1 - len(b)), min(len(a), k + 1)
    while low < high:
        i = (low + high) // 2
        if a[i] < b[k - i]:
            low = i + 1
        else:
            high = i
    i = low
    if i == 0:
        return b[k]
    if i == k + 1:
        return a[k]
    return max(a[i - 1], b[k - i])


def aggregate(measure: Measure, fractions: Sequence[float]) -> dict[str, PercentileCont]:
    """PostgreSQL's aggregate for `measure`, named by it; `spread` reads its value."""
    return {f"{measure.name}_percentiles": PercentileCont(measure.in_seconds(), fractions)}


def spread(row: dict, measure: Measure, fractions: Sequence[float]) -> dict[str, float | None]:
    """What `aggregate` put in `row`, under `grouped_percentiles`' keys."""
    values = row.pop(f"{measure.name}_percentiles", None) or [None] * len(fractions)
    return {key(measure, f): v for f, v in zip(fractions, values, strict=True)}


def key(measure: Measure, fraction: float) -> str:
    """ "duration_p95", "wait_p50", "duration_p99_9"."""
    label = f"{fraction * 100:g}".replace(".", "_")
    return f"{measure.name}_p{label}"


def grouped_percentiles(
    runs: QuerySet, keys: Sequence[str], measure: Measure, fractions: Sequence[float]
) -> dict[tuple, dict[str, float | None]]:
    """The SQLite way, one query: each group's (the values of `keys`) percentiles of
    `measure`, as {group: {key(measure, fraction): value}}; groups without a value are
    missing."""
    rows = (
        runs.filter(measure.present)
        .annotate(_value=measure.expression)
        .order_by(*keys, "_value")
        .values_list(*keys, "_value")
    )
    found: dict[tuple, dict[str, float | None]] = {}
    group: tuple | None = None
    values: list[float] = []
    width = len(keys)

    def close() -> None:
        if group is not None:
            found[group] = {key(measure, f): interpolate(values, f) for f in fractions}

    for row in rows.iterator(chunk_size=5000):
        this = tuple(row[:width])
        if this != group:
            close()
            group, values = this, []
        value = row[width]
        values.append(value.total_seconds() if isinstance(value, timedelta) else float(value))
    close()
    return found
