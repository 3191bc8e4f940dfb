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

import secrets
import sys
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from tools_app.models import Run, RunHour, RunHourMark, Tool
from tools_app.models.runs import RunStatus

HOUR = timedelta(hours=1)
# How long after its end an hour is closed, so no run queued in it is still uncommitted.
MARGIN = timedelta(minutes=10)
# The beat keeps this much (the longest window, 30 days, and its first partial day).
KEPT = timedelta(days=32)

T = TypeVar("T")

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


def window(
    tool: Tool,
    since: datetime,
    until: datetime,
    numbers: dict[int, int],
    digest: Callable[[list[Cell]], Digest[T]],
    tag: Hashable,
) -> tuple[T, list[Cell]]:
    """`tool`'s runs queued in (since, until]: `digest` of the cells the rollups hold, and
    the cells read from the runs elsewhere; the closed hours read from the runs are rolled
    up on the way. `numbers`: the tool's version numbers by version id. The digest is kept
    (`Kept`) while the tool's mark and stamp say its rows are the same, under `tag` (what
    else the digest depends on). 3 queries, 2 with the digest kept, 3 more (in a
    transaction) when it rolls hours up."""
    first = floor_hour(since) + HOUR  # the hour holding `since` is only partly in
    # The mark before the rows: hours another request rolls up meanwhile are past it, so
    # they are read from the runs rather than missed.
    mark = _mark(tool)
    key = (tool._state.db, tool.pk, first, mark, tuple(numbers), tag)
    found = KEPT_DIGESTS.get(key) if mark is not None else None
    if found is None:
        rows = list(
            RunHour.objects.filter(tool=tool, hour__gte=first).order_by().values_list(*ROW_FIELDS)
        )
        stale = {r[1] for r in rows if r[10]}
    else:
        rows, (stale, value) = [], found
    plan = _plan(first, until, mark and mark[:2], stale)
    raw = _cells(_runs(tool, [(">", since, "<", first), *plan.raw], until), numbers)
    _write(tool, plan, raw, first)
    if found is None:
        closed = [
            Cell(numbers.get(r[0], 0), *r[:8], unpack(r[8]), unpack(r[9]))
            for r in rows
            if plan.rolled_from <= r[1] < plan.rolled_until and r[1] not in plan.stale
        ]
        made = digest(closed)
        value = made.value
        # Kept only when it is the mark's hours: without a usable mark, none are read.
        if mark is not None and (plan.rolled_from, plan.rolled_until) == mark[:2]:
            KEPT_DIGESTS.put(key, (stale, value), made.weight)
    return value, raw


@dataclass(frozen=True)
class Digest(Generic[T]):
    """What a reader makes of the rolled-up cells, and how many values it holds."""

    value: T
    weight: int


class Kept:
    """The digests of the last windows read, newest last, up to `limit` values in all
    (a 30-day window of a tool run every few seconds holds about a million)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.weight = 0
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: Hashable, value: Any, weight: int) -> None:
        if weight > self.limit:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.weight -= old[1]
            self._items[key] = (value, weight)
            self.weight += weight
            while self.weight > self.limit:
                _, (_, dropped) = self._items.popitem(last=False)
                self.weight -= dropped


# Per process: 2,000,000 values are 16 MB as arrays of doubles.
KEPT_DIGESTS = Kept(2_000_000)


@dataclass
class _Plan:
    """What to read from the runs and what to roll up from them."""

    since: datetime  # the mark to be
    through: datetime
    rolled_from: datetime  # rows from this until the next are good (unless stale)
    rolled_until: datetime
    stale: set[datetime]
    raw: list[Range]  # beyond the window's first partial hour
    redo: Q  # the hours not rolled up yet (their rows, if any, are leftovers)
    moved: bool  # the mark moves


def _plan(first: datetime, until: datetime, mark: tuple | None, stale: set[datetime]) -> _Plan:
    target = closed_before(until)
    if mark is None or mark[1] < first or mark[0] >= target:
        # Nothing usable (none yet, or a gap since): roll up the window's hours afresh.
        since, through, rolled_from, rolled_until = first, target, first, first
        raw = [(">=", first, "<=", until)]
        redo = Q(pk__isnull=False)  # every row of the tool
    else:
        since, through = min(mark[0], first), max(mark[1], target)
        rolled_from, rolled_until = mark
        raw = [(">=", rolled_until, "<=", until)]
        redo = Q(hour__gte=rolled_until)
        if since < mark[0]:
            raw.append((">=", since, "<", mark[0]))
            redo |= Q(hour__lt=mark[0])
    for hour in stale:
        raw.append((">=", hour, "<", hour + HOUR))
    moved = mark is None or (since, through) != tuple(mark)
    return _Plan(since, through, rolled_from, rolled_until, stale, raw, redo, moved)


# Cell's fields from version_id on, in order, then the row's own (`window` reads them).
ROW_FIELDS = (
    *("version_id", "hour", "runs", "succeeded", "errors", "cancelled"),
    *("lost", "in_progress", "durations", "waits", "stale"),
)


def _mark(tool: Tool) -> tuple[datetime, datetime, int] | None:
    """The tool's mark (since, through, stamp), by plain SQL as `_runs`."""
    connection = connections[tool._state.db or DEFAULT_DB_ALIAS]
    quote = connection.ops.quote_name
    meta = RunHourMark._meta
    since, through, stamp, of = (
        quote(meta.get_field(f).column) for f in ("since", "through", "stamp", "tool")
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {since}, {through}, {stamp} FROM {quote(meta.db_table)} WHERE {of} = %s",  # noqa: S608 (quoted names)
            [tool.pk],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    return _aware(row[0], connection), _aware(row[1], connection), row[2]


# Runs queued from one moment to another, each bound with its comparison.
Range = tuple[str, datetime, str, datetime]
BOUNDS = {">", ">=", "<", "<="}


def _runs(tool: Tool, ranges: Sequence[Range], until: datetime) -> list[tuple]:
    """(version id, created_at, status, duration, started_at) of `tool`'s runs queued in
    any of `ranges` and by `until`. Plain SQL: the ORM's building of this query took
    longer than the rest of a page that reads kept sums (bench/analytics.py)."""
    if not ranges:
        return []
    connection = connections[tool._state.db or DEFAULT_DB_ALIAS]
    adapt = connection.ops.adapt_datetimefield_value
    column = {f: connection.ops.quote_name(Run._meta.get_field(f).column) for f in RAW_COLUMNS}
    created = column["created_at"]
    where = []
    params: list[Any] = [tool.pk, adapt(until)]
    for low_op, low, high_op, high in ranges:
        if low_op not in BOUNDS or high_op not in BOUNDS:  # only these reach the SQL
            raise ValueError(f"not a comparison: {low_op!r} {high_op!r}")
        where.append(f"({created} {low_op} %s AND {created} {high_op} %s)")
        params += [adapt(low), adapt(high)]
    table = connection.ops.quote_name(Run._meta.db_table)
    # Quoted names of the model's columns and the comparisons above; values are params.
    sql = (
        f"SELECT {', '.join(column[f] for f in RAW_COLUMNS[:-1])} FROM {table}"  # noqa: S608
        f" WHERE {column['tool']} = %s AND {created} <= %s AND ({' OR '.join(where)})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if connection.vendor == "postgresql":  # its driver gives aware datetimes already
        return rows
    return [(v, _aware(c, connection), st, d, _aware(sa, connection)) for v, c, st, d, sa in rows]


RAW_COLUMNS = ("version", "created_at", "status", "duration", "started_at", "tool")


def _aware(value: Any, connection: BaseDatabaseWrapper) -> datetime | None:
    """A datetime column's value as the ORM gives it (aware, in UTC)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = parse_datetime(value)
    if timezone.is_naive(value):
        value = timezone.make_aware(value, connection.timezone)
    return value


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
    stamp = new_stamp()
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
        # The stamp changes with the rows, also when only stale hours were redone.
        RunHourMark.objects.bulk_create(
            [RunHourMark(tool=tool, since=first, through=target, stamp=stamp)],
            update_conflicts=True,
            unique_fields=["tool"],
            update_fields=["since", "through", "stamp"],
        )


def new_stamp() -> int:
    return secrets.randbits(63)


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
    changed = RunHour.objects.filter(
        version_id=run.version_id, hour=floor_hour(run.created_at)
    ).update(stale=True)
    if changed:
        RunHourMark.objects.filter(tool_id=run.tool_id).update(stamp=new_stamp())
    return changed


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
