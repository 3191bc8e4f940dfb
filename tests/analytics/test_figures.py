"""A tool's figures over a window (counts by outcome, error rate, per version, per hour or
day, a version against another) and the console's slowest and most failing tools."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from tests.support.analytics import add_runs
from tools_app.analytics.figures import WINDOWS, console_analytics, steps, tool_analytics
from tools_app.models.runs import RunStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def versions(make_tool):
    make_tool("counted")
    tool = make_tool("counted", body="# v2\n")
    return tool, tool.versions.get(number=1), tool.versions.get(number=2)


def analytics(tool, window="7d", **kw):
    numbers = list(tool.versions.order_by("-number").values_list("number", flat=True))
    return tool_analytics(tool, window=WINDOWS[window], now=timezone.now(), numbers=numbers, **kw)


def test_it_counts_each_outcome_and_the_error_rate_of_finished_runs(versions):
    tool, one, two = versions
    add_runs(two, 6, status=RunStatus.SUCCEEDED)
    add_runs(two, 2, status=RunStatus.FAILED)
    add_runs(two, 1, status=RunStatus.TIMED_OUT)
    add_runs(two, 1, status=RunStatus.CANCELLED)
    add_runs(two, 2, status=RunStatus.LOST)
    add_runs(two, 3, status=RunStatus.QUEUED, waits=[None] * 3)

    summary = analytics(tool).summary

    assert (summary.runs, summary.succeeded, summary.errors) == (15, 6, 3)
    assert (summary.cancelled, summary.lost, summary.in_progress) == (1, 2, 3)
    assert summary.finished == 12
    assert summary.error_rate == 3 / 12  # queued runs are not finished yet


def test_it_keeps_to_the_window(versions):
    tool, one, two = versions
    add_runs(two, 2, age=timedelta(hours=2))
    add_runs(two, 3, age=timedelta(days=3))
    add_runs(two, 4, age=timedelta(days=20))
    add_runs(two, 5, age=timedelta(days=40))

    assert analytics(tool, "24h").summary.runs == 2
    assert analytics(tool, "7d").summary.runs == 5
    assert analytics(tool, "30d").summary.runs == 9


def test_it_gives_each_version_and_compares_the_latest_with_the_one_before(versions):
    tool, one, two = versions
    add_runs(one, durations=[1.0, 2.0, 3.0])
    add_runs(one, 1, status=RunStatus.FAILED, durations=[9.0])
    add_runs(two, durations=[5.0, 7.0])

    found = analytics(tool)

    assert [number for number, _ in found.versions] == [2, 1]
    per = dict(found.versions)
    assert per[1].runs == 4 and per[1].errors == 1 and per[1].p50 == 2.5
    assert per[2].p50 == 6.0
    assert (found.comparison.a, found.comparison.b) == (2, 1)
    assert found.comparison.figures_b.error_rate == 0.25
    assert found.summary.runs == 6


def test_it_narrows_to_one_version_and_compares_with_the_one_asked(versions):
    tool, one, two = versions
    add_runs(one, durations=[1.0, 3.0])
    add_runs(two, durations=[5.0, 7.0, 9.0])

    found = analytics(tool, version=1, compare=2)

    assert found.summary.runs == 2 and found.summary.p50 == 2.0
    assert sum(b.runs for b in found.timeline) == 2
    assert (found.comparison.a, found.comparison.b) == (1, 2)
    assert analytics(tool, version=1).comparison is None  # nothing before version 1


def test_it_charts_every_hour_of_the_window_with_its_runs_and_p95(versions):
    tool, one, two = versions
    now = timezone.now()
    add_runs(two, durations=[1.0, 2.0, 3.0], age=timedelta(hours=3), now=now)
    add_runs(two, 1, status=RunStatus.FAILED, durations=[10.0], age=timedelta(hours=3), now=now)

    timeline = analytics(tool, "24h").timeline

    assert len(timeline) in (24, 25)  # the hours overlapping the last 24
    busy = [b for b in timeline if b.runs]
    assert len(busy) == 1 and busy[0].runs == 4 and busy[0].errors == 1
    assert busy[0].p95 == pytest.approx(3.0 + 0.85 * 7.0)
    assert busy[0].start <= now - timedelta(hours=3) < busy[0].start + timedelta(hours=1)
    assert all(b.p95 is None for b in timeline if not b.runs)


def test_it_charts_days_in_the_consoles_time_zone():
    zone = ZoneInfo("Europe/Paris")
    until = datetime(2025, 3, 31, 12, tzinfo=UTC)  # the clocks went forward on the 30th
    days = steps(until - timedelta(days=30), until, "day", zone)
    assert len(days) == 31
    assert days[0] == datetime(2025, 3, 1, tzinfo=zone)
    assert all(d.hour == 0 for d in days)
    hours = steps(until - timedelta(hours=24), until, "hour", zone)
    assert len(hours) == 25 and len(set(hours)) == 25


def test_it_finds_the_slowest_and_the_most_failing_tools(make_tool):
    slow = make_tool("slow").versions.get()
    quick = make_tool("quick").versions.get()
    flaky = make_tool("flaky").versions.get()
    make_tool("idle")
    add_runs(slow, durations=[30.0, 40.0, 50.0])
    add_runs(quick, durations=[0.1, 0.2])
    add_runs(quick, 1, status=RunStatus.FAILED, durations=[0.3])
    add_runs(flaky, 1, status=RunStatus.TIMED_OUT, durations=[60.0])
    add_runs(flaky, 1, status=RunStatus.FAILED, durations=[0.5])

    found = console_analytics(window=WINDOWS["7d"], now=timezone.now())

    assert [row.name for row in found.slowest] == ["flaky", "slow", "quick"]
    assert [row.name for row in found.failing] == ["flaky", "quick"]
    assert found.failing[0].figures.error_rate == 1.0
    assert found.total.runs == 8 and found.total.errors == 3
