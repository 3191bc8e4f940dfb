"""The hourly rollups behind a tool's Analytics tab (tools_app/analytics/rollup.py): the
figures they give are the figures of the runs themselves, whatever was rolled up, by the
page or by the beat, and whatever changed since."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.support.analytics import add_runs
from tools_app.analytics import rollup
from tools_app.analytics.figures import WINDOWS, _from_runs, tool_analytics
from tools_app.models import Run, RunHour, RunHourMark
from tools_app.models.runs import RunStatus
from tools_app.runner.records import RunOutcome
from tools_app.runs.execute import _finish

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy(make_tool):
    """Three versions' runs of random durations and waits over the last 32 days, of every
    outcome, some still queued or running in closed hours, some in the open hour."""
    for n in range(3):
        tool = make_tool("busy", body=f"# v{n}\n")
    versions = list(tool.versions.order_by("number"))
    draw = random.Random(27)
    now = timezone.now()
    for _ in range(120):
        age = timedelta(minutes=draw.uniform(0, 32 * 24 * 60))
        status = draw.choice(list(RunStatus))
        count = draw.randint(1, 4)
        durations = [round(draw.lognormvariate(0, 1), 6) for _ in range(count)]
        if status == RunStatus.LOST or draw.random() < 0.1:
            durations = [None] * count
        waits = [draw.choice([None, draw.uniform(0, 3)]) for _ in range(count)]
        version = draw.choice(versions)
        add_runs(version, status=status, durations=durations, waits=waits, age=age, now=now)
    add_runs(versions[-1], 3, status=RunStatus.RUNNING, age=timedelta(minutes=2), now=now)
    return tool


def both(tool, window="7d", **kw):
    """The figures from the rollups and from the runs, at the same moment."""
    now = timezone.now()
    numbers = list(tool.versions.order_by("-number").values_list("number", flat=True))
    args = {"window": WINDOWS[window], "now": now, "numbers": numbers, **kw}
    return tool_analytics(tool, **args), _from_runs(tool, **args)


@pytest.mark.parametrize("window", ["24h", "7d", "30d"])
@pytest.mark.parametrize("version", [None, 2])
def test_it_gives_the_figures_of_the_runs(busy, window, version):
    first, raw = both(busy, window, version=version)  # rolls the hours up on the way
    assert first == raw
    assert RunHour.objects.filter(tool=busy).exists()

    again, raw = both(busy, window, version=version)  # now from the rollups
    assert again == raw
    assert again.summary.runs > 0 and sum(b.runs for b in again.timeline) == again.summary.runs


def test_hours_with_runs_still_going_are_read_from_the_runs_until_they_end(busy):
    both(busy, "30d")
    going = Run.objects.filter(tool=busy, status__in=(RunStatus.QUEUED, RunStatus.RUNNING))
    closed = going.filter(created_at__lt=rollup.closed_before(timezone.now()))
    assert closed.exists()
    assert RunHour.objects.filter(tool=busy, stale=True).count() > 0

    # They end (as a worker or the reaper ends them: an UPDATE of their status).
    closed.update(status=RunStatus.SUCCEEDED, duration=99.0)
    rolled, raw = both(busy, "30d")
    assert rolled == raw and rolled.summary.p99 == raw.summary.p99
    rollup.roll_up()
    assert not RunHour.objects.filter(tool=busy, stale=True, hour__lt=closed_hour()).exists()
    rolled, raw = both(busy, "30d")
    assert rolled == raw


def closed_hour():
    return rollup.closed_before(timezone.now())


def test_a_lost_run_that_finishes_after_all_is_counted_as_it_ended(make_tool):
    version = make_tool("late").versions.get()
    add_runs(version, durations=[1.0, 2.0], age=timedelta(hours=5))
    [run] = add_runs(version, status=RunStatus.LOST, age=timedelta(hours=5))
    rollup.roll_up()
    before, _ = both(version.tool)
    assert before.summary.lost == 1 and before.summary.p50 == 1.5

    run.refresh_from_db()
    _finish(run, RunOutcome("succeeded", {"content": []}, "", [], "process", 0, 30.0))

    assert RunHour.objects.filter(tool=version.tool, stale=True).count() == 1
    after, raw = both(version.tool)
    assert after == raw
    assert (after.summary.lost, after.summary.succeeded, after.summary.p50) == (0, 3, 2.0)


def test_the_page_rolls_up_what_the_beat_has_not(make_tool):
    version = make_tool("lazy").versions.get()
    add_runs(version, durations=[1.0, 3.0], age=timedelta(days=2))
    add_runs(version, durations=[5.0], age=timedelta(days=20))
    assert not RunHourMark.objects.exists()  # no beat ran

    week, _ = both(version.tool, "7d")
    mark = RunHourMark.objects.get(tool=version.tool)
    assert mark.through == closed_hour()
    assert list(RunHour.objects.values_list("runs", flat=True)) == [2]

    month, raw = both(version.tool, "30d")  # the mark reaches back to the longer window
    assert month == raw and month.summary.runs == 3
    assert RunHour.objects.count() == 2
    assert week.summary.p50 == 2.0


def test_the_beat_rolls_every_tool_up_once(make_tool):
    for name in ("one", "two"):
        add_runs(make_tool(name).versions.get(), durations=[1.0], age=timedelta(days=3))

    assert rollup.roll_up() == 2
    assert RunHourMark.objects.count() == 2 and RunHour.objects.count() == 2
    assert rollup.roll_up() == 0  # nothing closed since


def test_deleting_a_version_or_tool_deletes_its_rollups(make_tool):
    make_tool("gone")
    tool = make_tool("gone", body="# v2\n")
    for version in tool.versions.all():
        add_runs(version, durations=[1.0], age=timedelta(days=1))
    rollup.roll_up()
    tool.versions.get(number=1).delete()
    assert RunHour.objects.count() == 1
    tool.delete()
    assert not RunHour.objects.exists() and not RunHourMark.objects.exists()


def test_a_zone_off_the_hour_reads_the_runs(busy, settings):
    with timezone.override("Asia/Kolkata"):  # UTC+5:30: its hours are not UTC's
        rolled, raw = both(busy, "30d")
    assert rolled == raw
    assert not RunHourMark.objects.exists()


def test_reading_the_rollups_costs_three_queries(busy, django_assert_max_num_queries):
    both(busy, "30d")
    ids = dict(busy.versions.order_by("-number").values_list("pk", "number"))
    now = timezone.now()
    with django_assert_max_num_queries(3):
        tool_analytics(busy, window=WINDOWS["30d"], now=now, numbers=list(ids.values()), ids=ids)


def test_hours_rolled_up_by_a_clock_ahead_are_read_all_the_same(make_tool):
    version = make_tool("ahead").versions.get()
    for minutes in (5, 50, 70, 130):
        add_runs(version, durations=[minutes / 10], age=timedelta(minutes=minutes))
    rollup.roll_up(timezone.now() + timedelta(minutes=75))  # the beat's clock, ahead

    rolled, raw = both(version.tool, "24h")
    assert rolled == raw and rolled.summary.runs == 4


def test_a_window_read_again_unchanged_costs_two_queries(busy, django_assert_max_num_queries):
    both(busy, "7d")
    ids = dict(busy.versions.order_by("-number").values_list("pk", "number"))
    now = timezone.now()
    args = {"window": WINDOWS["7d"], "now": now, "numbers": list(ids.values()), "ids": ids}
    kept = tool_analytics(busy, **args)  # the first read under this mark keeps its sums
    with django_assert_max_num_queries(2):
        again = tool_analytics(busy, **args)
    assert again == kept == _from_runs(busy, **{k: v for k, v in args.items() if k != "ids"})


def test_what_a_process_keeps_is_bounded_by_its_values():
    kept = rollup.Kept(limit=10)
    kept.put("a", 1, 4)
    kept.put("b", 2, 4)
    assert kept.get("a") == 1  # now the most recently read
    kept.put("c", 3, 4)  # 12 > 10: the least recently read goes
    assert (kept.get("a"), kept.get("b"), kept.get("c")) == (1, None, 3)
    assert kept.weight == 8
    kept.put("huge", 4, 11)  # more than the whole limit: not kept
    assert kept.get("huge") is None and kept.weight == 8
