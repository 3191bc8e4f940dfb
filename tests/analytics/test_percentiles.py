"""Percentiles are percentile_cont's: computed by PostgreSQL, and the same floats on SQLite."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.db import connection

from tests.support.analytics import add_runs
from tools_app.analytics.figures import WINDOWS, figures_by, in_window
from tools_app.analytics.percentiles import PercentileCont, interpolate, interpolate_union, kth
from tools_app.models import Run


def test_it_interpolates_linearly_between_the_closest_ranks():
    values = [float(n) for n in range(1, 101)]
    assert interpolate(values, 0.5) == 50.5
    assert interpolate(values, 0.95) == pytest.approx(95.05, abs=1e-12)
    assert interpolate(values, 0.99) == pytest.approx(99.01, abs=1e-12)
    assert interpolate(values, 0.0) == 1.0 and interpolate(values, 1.0) == 100.0
    assert interpolate([7.0], 0.95) == 7.0
    assert interpolate([], 0.5) is None


def test_it_refuses_a_fraction_outside_zero_to_one():
    # The fraction goes into the SQL as a literal: nothing but a number in [0, 1] may.
    for bad in ((-0.1,), (0.5, 1.5), (float("nan"),), ("0.5]); DROP TABLE x; --",), ()):
        with pytest.raises(ValueError):
            PercentileCont("duration", bad)


@pytest.mark.django_db
def test_it_gives_the_exact_percentiles_of_known_durations(make_tool):
    """Durations 1..100 s, waits 0.01..1.00 s: p50 50.5, p95 95.05, p99 99.01 and waits
    p50 0.505, p95 0.9505, on this test's database (both run in CI)."""
    version = make_tool("known").versions.get()
    durations = [float(n) for n in range(1, 101)]
    random.Random(4).shuffle(durations)
    add_runs(version, durations=durations, waits=[n / 100 for n in range(1, 101)])

    found = figures_by(in_window(Run.objects.all(), WINDOWS["24h"], _now()))[()]

    assert found.runs == 100
    assert found.p50 == 50.5
    assert found.p95 == pytest.approx(95.05, abs=1e-9)
    assert found.p99 == pytest.approx(99.01, abs=1e-9)
    assert found.wait_p50 == pytest.approx(0.505, abs=1e-9)
    assert found.wait_p95 == pytest.approx(0.9505, abs=1e-9)


@pytest.mark.django_db
def test_it_gives_the_same_floats_as_percentile_cont(make_tool):
    """Random durations: the SQLite interpolation is the very float PostgreSQL returns (on
    PostgreSQL the database computes both sides of this comparison)."""
    version = make_tool("noisy").versions.get()
    rng = random.Random(7)
    durations = [round(rng.lognormvariate(0, 1.5), 6) for _ in range(257)]
    add_runs(version, durations=durations)

    found = figures_by(Run.objects.all())[()]

    ordered = sorted(durations)
    assert found.duration == {f: interpolate(ordered, f) for f in (0.5, 0.95, 0.99)}
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY duration) FROM tools_app_run"
            )
            assert cursor.fetchone()[0] == found.p95


@pytest.mark.django_db
def test_it_computes_each_group_apart_and_leaves_out_runs_without_a_value(make_tool):
    one = make_tool("grouped").versions.get()
    two = make_tool("grouped", body="# v2\n").versions.get(number=2)
    add_runs(one, durations=[1.0, 2.0, 3.0, 4.0])
    add_runs(two, durations=[10.0, 20.0])
    add_runs(two, 3, status="lost", waits=[None, None, None])  # no duration, never started

    found = figures_by(Run.objects.all(), ("version__number",))

    assert found[(1,)].p50 == 2.5 and found[(1,)].runs == 4
    assert found[(2,)].p50 == 15.0 and found[(2,)].runs == 5 and found[(2,)].lost == 3
    assert found[(2,)].wait_p50 == 0.5  # only the two runs that started


def _now():
    from django.utils import timezone

    return timezone.now() + timedelta(seconds=1)


def test_two_lists_give_the_percentiles_of_their_merge_without_merging():
    draw = random.Random(30)
    for _ in range(3000):
        # Ties across both lists, and either one empty.
        a = sorted(draw.choice([draw.random(), 0.5, 1.0]) for _ in range(draw.randint(0, 9)))
        b = sorted(draw.choice([draw.random(), 0.5, 1.0]) for _ in range(draw.randint(0, 9)))
        merged = sorted(a + b)
        assert [kth(a, b, k) for k in range(len(merged))] == merged
        for fraction in (0.0, 0.5, 0.95, 0.99, 1.0):
            assert interpolate_union(a, b, fraction) == interpolate(merged, fraction)
