"""Hourly rollups of runs (RunHour, RunHourMark), so a tool's Analytics tab reads one row
per version and hour instead of every run of its window (docs/runs.md, "Analytics").

A tool's mark says which hours are rolled up: every hour in [since, through) has a
RunHour per version that ran in it (no row: no run). An hour is rolled up once it ended
MARGIN ago (a run is queued at its created_at, and committed well within that); a row
holding a run still queued or running is `stale`, and so is one whose lost run finished
after all (`invalidate`, called by tools_app/runs/execute.py): a stale hour is read from
the runs, for every version, and rolled up again. What is not rolled up yet (the window's
first, partial hour, the open hours at its end, stale hours, hours never rolled up) is
read from the runs in one query, and the page writes the closed hours back (`window`), so
a console without the beat (`roll_up`, tools_app/tasks.py) still shows exact figures.

A run never joins a closed hour: created_at is set when it is queued (auto_now_add)."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from tools_app.models import Run, RunHour, RunHourMark, Tool
from tools_app.models.runs import RunStatus

HOUR = timedelta(hours=1)
# How long after its end an hour is closed, so no run queued in it is still uncommitted.
MARGIN = timedelta(minutes=10)
# The beat keeps this much (the longest window, 30 days, and its first partial day).
KEPT = timedelta(days=32)

ERRORS = (RunStatus.FAILED, RunStatus.TIMED_OUT)
IN_PROGRESS = (RunStatus.QUEUED, RunStatus.RUNNING)


@dataclass
class Cell:
    """One version's runs in one hour (or part of one): counts, and sorted durations and
    queue waits in seconds."""

    number: int  # the version's number
    version_id: int
    hour: datetime  # UTC
    runs: int = 0
    succeeded: int = 0
    errors: int = 0
    cancelled: int = 0
    lost: int = 0
    in_progress: int = 0
    durations: Sequence[float] = field(default_factory=list)
    waits: Sequence[float] = field(default_factory=list)


def floor_hour(moment: datetime) -> datetime:
    moment = moment.astimezone(UTC)
    return moment.replace(minute=0, second=0, microsecond=0)


def closed_before(now: datetime) -> datetime:
    """The end of the hours that may be rolled up at `now`."""
    return floor_hour(now - MARGIN)


def window(tool: Tool, since: datetime, until: datetime, numbers: dict[int, int]) -> list[Cell]:
    """`tool`'s runs queued in (since, until] as cells, from the rollups where they hold
    the hour and from the runs elsewhere; the closed hours read from the runs are rolled
    up on the way. `numbers`: the tool's version numbers by version id. 3 queries, 3 more
    (in a transaction) when it rolls hours up."""
    first = floor_hour(since) + HOUR  # the hour holding `since` is only partly in
    # The mark before the rows: hours another request rolls up meanwhile are past it, so
    # they are read from the runs rather than missed.
    mark = RunHourMark.objects.filter(tool=tool).values_list("since", "through").first()
    rows = list(
        RunHour.objects.filter(tool=tool, hour__gte=first).order_by().values_list(*ROW_FIELDS)
    )
    plan = _plan(first, until, mark, {r[1] for r in rows if r[10]})
    where = Q(created_at__gt=since, created_at__lt=first) | plan.raw
    raw = _cells(_runs(tool, where, until), numbers)
    _write(tool, plan, raw, first)
    cells = [
        Cell(numbers.get(r[0], 0), *r[:8], unpack(r[8]), unpack(r[9]))
        for r in rows
        if plan.rolled_from <= r[1] < plan.rolled_until and r[1] not in plan.stale
    ]
    return cells + raw


@dataclass
class _Plan:
    """What to read from the runs and what to roll up from them."""

    since: datetime  # the mark to be
    through: datetime
    rolled_from: datetime  # rows from this until the next are good (unless stale)
    rolled_until: datetime
    stale: set[datetime]
    raw: Q  # beyond the window's first partial hour
    redo: Q  # the hours not rolled up yet (their rows, if any, are leftovers)
    moved: bool  # the mark moves


def _plan(first: datetime, until: datetime, mark: tuple | None, stale: set[datetime]) -> _Plan:
    target = closed_before(until)
    if mark is None or mark[1] < first or mark[0] >= target:
        # Nothing usable (none yet, or a gap since): roll up the window's hours afresh.
        since, through, rolled_from, rolled_until = first, target, first, first
        raw = Q(created_at__gte=first, created_at__lte=until)
        redo = Q(pk__isnull=False)  # every row of the tool
    else:
        since, through = min(mark[0], first), max(mark[1], target)
        rolled_from, rolled_until = mark
        raw = Q(created_at__gte=rolled_until, created_at__lte=until)
        redo = Q(hour__gte=rolled_until)
        if since < mark[0]:
            raw |= Q(created_at__gte=since, created_at__lt=mark[0])
            redo |= Q(hour__lt=mark[0])
    for hour in stale:
        raw |= Q(created_at__gte=hour, created_at__lt=hour + HOUR)
    moved = mark is None or (since, through) != tuple(mark)
    return _Plan(since, through, rolled_from, rolled_until, stale, raw, redo, moved)


# Cell's fields from version_id on, in order, then the row's own (`window` reads them).
ROW_FIELDS = (
    *("version_id", "hour", "runs", "succeeded", "errors", "cancelled"),
    *("lost", "in_progress", "durations", "waits", "stale"),
)
RAW_FIELDS = ("version_id", "created_at", "status", "duration", "started_at")


def _runs(tool: Tool, where: Q, until: datetime) -> Iterable[tuple]:
    return (
        Run.objects.filter(tool=tool, created_at__lte=until)
        .filter(where)
        .order_by()
        .values_list(*RAW_FIELDS)
    )


def _cells(runs: Iterable[tuple], numbers: dict[int, int]) -> list[Cell]:
    """Runs (as _runs gives them) as one cell per version and hour, lists sorted."""
    found: dict[tuple, Cell] = {}
    for version_id, created, status, duration, started in runs:
        hour = floor_hour(created)
        cell = found.get((version_id, hour))
        if cell is None:
            cell = found[(version_id, hour)] = Cell(numbers.get(version_id, 0), version_id, hour)
        cell.runs += 1
        if status == RunStatus.SUCCEEDED:
            cell.succeeded += 1
        elif status in ERRORS:
            cell.errors += 1
        elif status == RunStatus.CANCELLED:
            cell.cancelled += 1
        elif status == RunStatus.LOST:
            cell.lost += 1
        elif status in IN_PROGRESS:
            cell.in_progress += 1
        if duration is not None:
            cell.durations.append(float(duration))
        if started is not None:
            cell.waits.append((started - created).total_seconds())
    for cell in found.values():
        cell.durations.sort()
        cell.waits.sort()
    return list(found.values())


def _write(tool: Tool, plan: _Plan, raw: list[Cell], whole_from: datetime) -> None:
    """Roll up the closed hours of `raw` from `whole_from` (before it, a cell may hold only
    part of its hour), and move the mark."""
    first, target = plan.since, plan.through
    # A stale hour is rolled up again once none of its runs is still going.
    going = {c.hour for c in raw if c.hour in plan.stale and c.in_progress}
    ready = plan.stale - going
    if not plan.moved and not ready:
        return
    rows = []
    for cell in raw:
        if not (max(first, whole_from) <= cell.hour < target) or cell.hour in going:
            continue
        rows.append(
            RunHour(
                tool=tool,
                version_id=cell.version_id,
                hour=cell.hour,
                runs=cell.runs,
                succeeded=cell.succeeded,
                errors=cell.errors,
                cancelled=cell.cancelled,
                lost=cell.lost,
                in_progress=cell.in_progress,
                durations=pack(cell.durations),
                waits=pack(cell.waits),
                stale=bool(cell.in_progress),
            )
        )
    with transaction.atomic():
        redo = plan.redo | Q(hour__in=ready) if ready else plan.redo
        RunHour.objects.filter(tool=tool).filter(redo | Q(hour__lt=first)).delete()
        # Two pages rolling the same hours up at once write the same rows.
        RunHour.objects.bulk_create(rows, ignore_conflicts=True)
        if plan.moved:
            RunHourMark.objects.bulk_create(
                [RunHourMark(tool=tool, since=first, through=target)],
                update_conflicts=True,
                unique_fields=["tool"],
                update_fields=["since", "through"],
            )


def pack(values: Sequence[float]) -> bytes:
    """Sorted seconds as stored: 8-byte IEEE doubles, little-endian (exact, and read back
    without parsing: a week of a busy tool is 15,000 values)."""
    packed = array("d", values)
    if sys.byteorder == "big":  # pragma: no cover - the console runs on little-endian
        packed.byteswap()
    return packed.tobytes()


def unpack(data: bytes | memoryview) -> array:
    values = array("d")
    values.frombytes(data)
    if sys.byteorder == "big":  # pragma: no cover
        values.byteswap()
    return values


def invalidate(run: Run) -> int:
    """A finished run's hour is read from the runs again (a lost run that ended after all)."""
    return RunHour.objects.filter(
        version_id=run.version_id, hour=floor_hour(run.created_at)
    ).update(stale=True)


def roll_up(now: datetime | None = None) -> int:
    """The beat's work: every tool's closed hours of the last KEPT rolled up, stale ones
    again, older ones dropped. Returns how many tools it rolled up."""
    now = now or timezone.now()
    target = closed_before(now)
    oldest = floor_hour(now - KEPT)
    RunHour.objects.filter(hour__lt=oldest).delete()
    RunHourMark.objects.filter(since__lt=oldest).update(since=oldest)
    marks = {
        t: (s, u) for t, s, u in RunHourMark.objects.values_list("tool_id", "since", "through")
    }
    stale = set(RunHour.objects.filter(stale=True).values_list("tool_id", flat=True))
    done = 0
    for tool in Tool.objects.order_by("pk"):
        mark = marks.get(tool.pk)
        if tool.pk in stale or mark is None or mark[0] > oldest or mark[1] < target:
            hours(tool, oldest, now)
            done += 1
    return done


def hours(tool: Tool, since: datetime, now: datetime) -> None:
    """Roll up `tool`'s closed hours from `since` (a whole hour) to now, stale ones again."""
    stale = RunHour.objects.filter(tool=tool, stale=True, hour__gte=since)
    stale = set(stale.values_list("hour", flat=True))
    mark = RunHourMark.objects.filter(tool=tool).values_list("since", "through").first()
    plan = _plan(since, now, mark, stale)
    if plan.moved or stale:
        _write(tool, plan, _cells(_runs(tool, plan.raw, now), {}), since)
