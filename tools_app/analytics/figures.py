"""The figures of runs over a window: counts by outcome, error rate, duration and queue
wait percentiles, per version, per hour or day, per tool (docs/runs.md, "Analytics").

Each function costs a fixed number of queries whatever the number of runs, versions or
tools. A tool's tab reads the hourly rollups (rollup.py) and merges their sorted values;
the console's page groups the runs in the database: on PostgreSQL one query per grouping
(counts and percentiles in the same GROUP BY), on SQLite one more per measure
(percentiles.py)."""

from __future__ import annotations

import zoneinfo
from array import array
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import chain

from django.db.models import Count, Q
from django.db.models.functions import Trunc
from django.db.models.query import QuerySet
from django.utils import timezone

from tools_app.analytics import rollup
from tools_app.analytics.percentiles import (
    DURATION,
    QUEUE_WAIT,
    aggregate,
    grouped_percentiles,
    in_database,
    interpolate,
    interpolate_union,
    key,
    spread,
)
from tools_app.models import Run, Tool
from tools_app.models.runs import RunStatus

DURATION_FRACTIONS = (0.5, 0.95, 0.99)
WAIT_FRACTIONS = (0.5, 0.95)
# What counts as an error: the tool failed or ran out of time. Cancelled and lost runs
# are counted apart (a person stopped it; a worker died), but are finished all the same.
ERRORS = (RunStatus.FAILED, RunStatus.TIMED_OUT)
IN_PROGRESS = (RunStatus.QUEUED, RunStatus.RUNNING)


@dataclass(frozen=True)
class Window:
    key: str  # "24h", as in the URL
    label: str  # "24 hours"
    span: timedelta
    bucket: str  # the chart's step: "hour" or "day"


WINDOWS = {
    w.key: w
    for w in (
        Window("24h", "24 hours", timedelta(hours=24), "hour"),
        Window("7d", "7 days", timedelta(days=7), "hour"),
        Window("30d", "30 days", timedelta(days=30), "day"),
    )
}
DEFAULT_WINDOW = "7d"


@dataclass(frozen=True)
class Figures:
    """One group's runs. Percentiles are seconds, None when no run of the group has the
    value (no run finished with a duration, none started)."""

    runs: int = 0
    succeeded: int = 0
    errors: int = 0
    cancelled: int = 0
    lost: int = 0
    in_progress: int = 0
    duration: dict[float, float | None] = field(default_factory=dict)
    wait: dict[float, float | None] = field(default_factory=dict)

    @property
    def finished(self) -> int:
        return self.succeeded + self.errors + self.cancelled + self.lost

    @property
    def error_rate(self) -> float | None:
        """Errors per finished run (0..1); None before any run finished."""
        return self.errors / self.finished if self.finished else None

    @property
    def error_percent(self) -> float | None:
        rate = self.error_rate
        return None if rate is None else rate * 100

    # The template's names for the percentiles.
    @property
    def p50(self) -> float | None:
        return self.duration.get(0.5)

    @property
    def p95(self) -> float | None:
        return self.duration.get(0.95)

    @property
    def p99(self) -> float | None:
        return self.duration.get(0.99)

    @property
    def wait_p50(self) -> float | None:
        return self.wait.get(0.5)

    @property
    def wait_p95(self) -> float | None:
        return self.wait.get(0.95)


EMPTY = Figures()


def _counts() -> dict:
    # Of created_at (never null), not of the pk: the index run_figures covers it, so
    # PostgreSQL answers from the index alone (migration 0021).
    return {
        "runs": Count("created_at"),
        "succeeded": Count("created_at", filter=Q(status=RunStatus.SUCCEEDED)),
        "errors": Count("created_at", filter=Q(status__in=ERRORS)),
        "cancelled": Count("created_at", filter=Q(status=RunStatus.CANCELLED)),
        "lost": Count("created_at", filter=Q(status=RunStatus.LOST)),
        "in_progress": Count("created_at", filter=Q(status__in=IN_PROGRESS)),
    }


def figures_by(
    runs: QuerySet,
    keys: Sequence[str] = (),
    *,
    durations: Sequence[float] = DURATION_FRACTIONS,
    waits: Sequence[float] = WAIT_FRACTIONS,
) -> dict[tuple, Figures]:
    """The figures of `runs` grouped by the values of `keys` ({(): ...} for no keys; a
    group without runs is missing). PostgreSQL: one query. SQLite: one, plus one for the
    durations and one for the waits when asked."""
    measures = [(DURATION, durations), (QUEUE_WAIT, waits)]
    measures = [(m, fractions) for m, fractions in measures if fractions]
    wanted = _counts()
    database = in_database(runs)
    if database:
        for measure, fractions in measures:
            wanted |= aggregate(measure, fractions)
    if keys:
        rows = {
            tuple(row[k] for k in keys): row
            for row in runs.order_by().values(*keys).annotate(**wanted)
        }
    else:
        row = runs.order_by().aggregate(**wanted)
        rows = {(): row} if row["runs"] else {}
    if database:
        for row in rows.values():
            for measure, fractions in measures:
                row |= spread(row, measure, fractions)
    else:
        for measure, fractions in measures:
            for group, values in grouped_percentiles(runs, keys, measure, fractions).items():
                if group in rows:
                    rows[group] |= values
    return {group: _figures(row, durations, waits) for group, row in rows.items()}


def _figures(row: dict, durations: Sequence[float], waits: Sequence[float]) -> Figures:
    return Figures(
        runs=row["runs"],
        succeeded=row["succeeded"],
        errors=row["errors"],
        cancelled=row["cancelled"],
        lost=row["lost"],
        in_progress=row["in_progress"],
        duration={f: row.get(key(DURATION, f)) for f in durations},
        wait={f: row.get(key(QUEUE_WAIT, f)) for f in waits},
    )


def in_window(runs: QuerySet, window: Window, now: datetime) -> QuerySet:
    """Runs queued within `window` before `now` (by created_at: a run belongs to the hour
    it was asked for, even if it is still waiting)."""
    return runs.filter(created_at__gt=now - window.span, created_at__lte=now)


# --------------------------------------------------------------------------------------
# A tool's page


@dataclass(frozen=True)
class Bucket:
    """One step of the chart: runs queued in [start, start + step)."""

    start: datetime
    runs: int
    errors: int
    p95: float | None


@dataclass(frozen=True)
class Comparison:
    """Version `a` against version `b` over the same window."""

    a: int
    b: int
    figures_a: Figures
    figures_b: Figures


@dataclass(frozen=True)
class ToolAnalytics:
    window: Window
    since: datetime
    until: datetime
    version: int | None  # None: all versions
    summary: Figures
    versions: list[tuple[int, Figures]]  # newest first, only versions with runs
    timeline: list[Bucket]
    comparison: Comparison | None


def tool_analytics(
    tool: Tool,
    *,
    window: Window,
    now: datetime,
    numbers: Sequence[int],
    version: int | None = None,
    compare: int | None = None,
    ids: dict[int, int] | None = None,
) -> ToolAnalytics:
    """`tool`'s runs over `window`: per version, over time (of `version` only, or all) and
    `version` (else the newest of `numbers`, the tool's version numbers newest first)
    against `compare` (else the one before it); `ids`, the numbers by version id, saves a
    query. From the hourly rollups (rollup.py), whose hours are added up once and kept
    while they are unchanged, and the runs since: 3 queries whatever the window, 2 when
    the sums are kept, 3 more when it rolls hours up; in a time zone whose hours are not
    whole hours of UTC, from the runs (PostgreSQL 3 queries, SQLite 8)."""
    zone = timezone.get_current_timezone()
    since = now - window.span
    starts = steps(since, now, window.bucket, zone)
    bounds = _utc(starts)
    if not all(s.minute == 0 and s.second == 0 and s.microsecond == 0 for s in bounds):
        return _from_runs(tool, window=window, now=now, numbers=numbers, version=version,
                          compare=compare)  # fmt: skip
    if ids is None:
        ids = dict(tool.versions.values_list("pk", "number"))
    step_of = _step_finder(bounds)
    closed, fresh = rollup.window(
        tool,
        since,
        now,
        ids,
        lambda cells: _closed(cells, starts, step_of, version),
        # The steps follow from the first, their number, their unit and the zone.
        (version, window.bucket, str(zone), bounds[0], len(bounds)),
    )
    by_version: dict[int, list[rollup.Cell]] = {}
    for cell in fresh:
        by_version.setdefault(cell.number, []).append(cell)
    per_version = {
        n: _joined(closed.per_version.get(n, NOTHING), by_version.get(n, ()))
        for n in closed.per_version.keys() | by_version.keys()
    }
    if version is None:
        scoped = fresh
        summary = _joined(closed.scoped, fresh) if closed.scoped.runs or fresh else EMPTY
    else:
        scoped = by_version.get(version, [])
        summary = per_version.get(version, EMPTY)
    return ToolAnalytics(
        window=window,
        since=since,
        until=now,
        version=version,
        summary=summary,
        versions=sorted(per_version.items(), key=lambda item: -item[0]),
        timeline=_timeline_of(closed, scoped, step_of),
        comparison=_comparison(per_version, numbers, version, compare),
    )


def _utc(moments: Sequence[datetime]) -> list[datetime]:
    return [m.astimezone(UTC) for m in moments]


@dataclass(frozen=True)
class Part:
    """Some cells added up: their counts, and all their durations and waits sorted."""

    runs: int = 0
    succeeded: int = 0
    errors: int = 0
    cancelled: int = 0
    lost: int = 0
    in_progress: int = 0
    durations: Sequence[float] = ()
    waits: Sequence[float] = ()

    @property
    def weight(self) -> int:
        return len(self.durations) + len(self.waits)


NOTHING = Part()


def _part(cells: Sequence[rollup.Cell | Part], *, waits: bool = True) -> Part:
    """Cells, or parts, added up."""
    return Part(
        runs=sum(c.runs for c in cells),
        succeeded=sum(c.succeeded for c in cells),
        errors=sum(c.errors for c in cells),
        cancelled=sum(c.cancelled for c in cells),
        lost=sum(c.lost for c in cells),
        in_progress=sum(c.in_progress for c in cells),
        durations=_merged([c.durations for c in cells]),
        waits=_merged([c.waits for c in cells]) if waits else (),
    )


@dataclass(frozen=True)
class Closed:
    """The rolled-up cells of a window, added up per version, in all (or of the version
    shown) and per step of the chart: the steps with cells (no waits) and every step's
    bucket."""

    per_version: dict[int, Part]
    scoped: Part
    steps: dict[int, Part]
    timeline: list[Bucket]


def _closed(
    cells: list[rollup.Cell],
    starts: list[datetime],
    step_of: Callable[[datetime], int],
    version: int | None,
) -> rollup.Digest[Closed]:
    by_version: dict[int, list[rollup.Cell]] = {}
    for cell in cells:
        by_version.setdefault(cell.number, []).append(cell)
    per_version = {n: _part(group) for n, group in by_version.items()}
    if version is not None:
        scoped = per_version.get(version, NOTHING)
        cells = by_version.get(version, [])
    elif len(per_version) == 1:
        scoped = next(iter(per_version.values()))
    else:
        # Each version's values merged already: merging those is fewer, longer runs.
        scoped = _part(list(per_version.values()))
    grouped: dict[int, list[rollup.Cell]] = {}
    for cell in cells:
        grouped.setdefault(step_of(cell.hour), []).append(cell)
    steps = {i: _part(group, waits=False) for i, group in grouped.items()}
    timeline = [
        Bucket(start, part.runs, part.errors, interpolate(part.durations, 0.95))
        if (part := steps.get(i))
        else Bucket(start, 0, 0, None)
        for i, start in enumerate(starts)
    ]
    weight = sum(p.weight for p in per_version.values()) + scoped.weight
    weight += sum(p.weight for p in steps.values())
    return rollup.Digest(Closed(per_version, scoped, steps, timeline), weight)


def _joined(part: Part, cells: Sequence[rollup.Cell]) -> Figures:
    """The figures of `part` and a few more `cells` (read from the runs) together."""
    durations = _merged([c.durations for c in cells]) if cells else ()
    waits = _merged([c.waits for c in cells]) if cells else ()
    return Figures(
        runs=part.runs + sum(c.runs for c in cells),
        succeeded=part.succeeded + sum(c.succeeded for c in cells),
        errors=part.errors + sum(c.errors for c in cells),
        cancelled=part.cancelled + sum(c.cancelled for c in cells),
        lost=part.lost + sum(c.lost for c in cells),
        in_progress=part.in_progress + sum(c.in_progress for c in cells),
        duration={f: interpolate_union(part.durations, durations, f) for f in DURATION_FRACTIONS},
        wait={f: interpolate_union(part.waits, waits, f) for f in WAIT_FRACTIONS},
    )


def _merged(lists: list[Sequence[float]]) -> Sequence[float]:
    """Sorted lists as one sorted list (timsort merges the sorted runs it finds), kept as
    doubles (a third of a list's memory)."""
    if len(lists) == 1:
        return lists[0]
    return array("d", sorted(chain.from_iterable(lists)))


def _step_finder(bounds: list[datetime]) -> Callable[[datetime], int]:
    """The index of the chart's step holding an hour (UTC), `bounds` the steps' starts in
    UTC."""
    return lambda hour: bisect_right(bounds, hour) - 1


def _timeline_of(
    closed: Closed, fresh: Sequence[rollup.Cell], step_of: Callable[[datetime], int]
) -> list[Bucket]:
    """The chart's steps: the rolled-up ones, those with cells read since redone."""
    grouped: dict[int, list[rollup.Cell]] = {}
    for cell in fresh:
        grouped.setdefault(step_of(cell.hour), []).append(cell)
    buckets = list(closed.timeline)
    for i, cells in grouped.items():
        part = closed.steps.get(i, NOTHING)
        durations = _merged([c.durations for c in cells])
        buckets[i] = Bucket(
            buckets[i].start,
            part.runs + sum(c.runs for c in cells),
            part.errors + sum(c.errors for c in cells),
            interpolate_union(part.durations, durations, 0.95),
        )
    return buckets


def _from_runs(
    tool: Tool,
    *,
    window: Window,
    now: datetime,
    numbers: Sequence[int],
    version: int | None = None,
    compare: int | None = None,
) -> ToolAnalytics:
    """tool_analytics over the runs themselves (GROUP BY in the database)."""
    runs = in_window(Run.objects.filter(tool=tool), window, now)
    per_version = {
        group[0]: figures for group, figures in figures_by(runs, ("version__number",)).items()
    }
    if version is None:
        summary = figures_by(runs).get((), EMPTY)
        scoped = runs
    else:
        summary = per_version.get(version, EMPTY)
        scoped = runs.filter(version__number=version)
    return ToolAnalytics(
        window=window,
        since=now - window.span,
        until=now,
        version=version,
        summary=summary,
        versions=sorted(per_version.items(), key=lambda item: -item[0]),
        timeline=timeline(scoped, window, now),
        comparison=_comparison(per_version, numbers, version, compare),
    )


def _comparison(
    per_version: dict[int, Figures], numbers: Sequence[int], a: int | None, b: int | None
) -> Comparison | None:
    ordered = sorted(numbers, reverse=True)
    if a is None:
        a = ordered[0] if ordered else None
    if b is None:
        b = next((n for n in ordered if a is not None and n < a), None)
    if a is None or b is None or a == b:
        return None
    return Comparison(a, b, per_version.get(a, EMPTY), per_version.get(b, EMPTY))


def timeline(runs: QuerySet, window: Window, now: datetime) -> list[Bucket]:
    """Runs, errors and the p95 duration per hour or day of the window (in the console's
    time zone), every step present, oldest first. One query (two on SQLite)."""
    zone = timezone.get_current_timezone()
    bucketed = runs.annotate(bucket=Trunc("created_at", window.bucket, tzinfo=zone))
    found = {
        group[0]: figures
        for group, figures in figures_by(bucketed, ("bucket",), durations=(0.95,), waits=()).items()
    }
    return [
        Bucket(start, f.runs, f.errors, f.p95)
        for start in steps(now - window.span, now, window.bucket, zone)
        for f in [found.get(start, EMPTY)]
    ]


def steps(since: datetime, until: datetime, unit: str, zone: zoneinfo.ZoneInfo) -> list[datetime]:
    """The starts of the hours or days (in `zone`) that overlap (since, until]."""
    local = since.astimezone(zone)
    if unit == "day":
        day = local.date()
        found = []
        while True:
            start = datetime(day.year, day.month, day.day, tzinfo=zone)
            if start > until:
                return found
            found.append(start)
            day += timedelta(days=1)
    # Whole hours in UTC are whole hours in every zone the console shows times in but a
    # few (30- and 45-minute offsets), where the step starts at that zone's hour.
    start = local.replace(minute=0, second=0, microsecond=0).astimezone(UTC)
    found = []
    while start <= until:
        found.append(start.astimezone(zone))
        start += timedelta(hours=1)  # in UTC: a day with a clock change has 23 or 25
    return found


# --------------------------------------------------------------------------------------
# The console's page


@dataclass(frozen=True)
class ToolRow:
    name: str
    figures: Figures


@dataclass(frozen=True)
class ConsoleAnalytics:
    window: Window
    since: datetime
    until: datetime
    total: Figures
    slowest: list[ToolRow]  # by p95 duration, slowest first
    failing: list[ToolRow]  # by error rate, then errors; only tools with errors


def console_analytics(*, window: Window, now: datetime, limit: int = 10) -> ConsoleAnalytics:
    """Every tool's runs over `window`: the `limit` slowest and most failing tools. One
    query on PostgreSQL, two on SQLite (the waits are not shown here)."""
    runs = in_window(Run.objects.all(), window, now)
    rows = [
        ToolRow(group[0], figures)
        for group, figures in figures_by(runs, ("tool__name",), waits=()).items()
    ]
    total = Figures(
        runs=sum(r.figures.runs for r in rows),
        succeeded=sum(r.figures.succeeded for r in rows),
        errors=sum(r.figures.errors for r in rows),
        cancelled=sum(r.figures.cancelled for r in rows),
        lost=sum(r.figures.lost for r in rows),
        in_progress=sum(r.figures.in_progress for r in rows),
    )
    timed = [r for r in rows if r.figures.p95 is not None]
    slowest = sorted(timed, key=lambda r: (-r.figures.p95, r.name))[:limit]
    failing = [r for r in rows if r.figures.errors]
    failing.sort(key=lambda r: (-(r.figures.error_rate or 0), -r.figures.errors, r.name))
    return ConsoleAnalytics(window, now - window.span, now, total, slowest, failing[:limit])
