"""The Analytics tab of a tool and the console's Analytics page: what a viewer reads, a
bad window or version is a 400 page with the error, and a page costs the same number of
queries with one run and one version as with many."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.support.analytics import add_runs
from tools_app.models.runs import RunStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def sample(make_tool):
    tool = make_tool("measured")
    add_runs(tool.versions.get(), durations=[float(n) for n in range(1, 101)])
    add_runs(tool.versions.get(), 2, status=RunStatus.FAILED, durations=[0.5, 0.5])
    return tool


def test_a_viewer_reads_the_tab_with_its_figures_and_charts(viewer_client, sample):
    response = viewer_client.get("/tools/measured/analytics/")

    assert response.status_code == 200
    page = response.content.decode()
    assert '<a href="/tools/measured/analytics/" aria-current="page">Analytics</a>' in page
    figures = dict(re.findall(r"<dt>([^<]+)(?:<span[^>]*>[^<]*</span>)?</dt><dd>([^<]*)", page))
    assert figures["Runs"] == "102" and figures["Errors "] == "2"
    # Durations 1..100 and two of 0.5: the figures as percentile_cont gives them.
    assert "Duration p50" in page and "49.500 s" in page
    # Each chart is an SVG with a name and a description for screen readers.
    for chart in ("runs-chart", "p95-chart"):
        assert f'aria-labelledby="{chart}-title {chart}-desc"' in page
        assert f'<title id="{chart}-title">' in page
    assert "102 runs (2 errors) over the" in page
    assert '<option value="7d" selected>Last 7 days</option>' in page  # the default window
    assert "<script" not in page.split('<section id="analytics">')[1]  # SVG drawn by the server


def test_it_shows_one_version_and_compares_it(viewer_client, make_tool):
    make_tool("twice")
    tool = make_tool("twice", body="# v2\n")
    add_runs(tool.versions.get(number=1), durations=[1.0, 3.0])
    add_runs(tool.versions.get(number=2), durations=[5.0])

    page = viewer_client.get(
        "/tools/twice/analytics/", {"window": "24h", "version": "1", "compare": "2"}
    ).content.decode()

    assert "(v1, last 24 hours)" in page
    assert '<h3 id="comparison">v1 vs v2</h3>' in page
    default = viewer_client.get("/tools/twice/analytics/").content.decode()
    assert '<h3 id="comparison">v2 vs v1</h3>' in default


@pytest.mark.parametrize(
    "query",
    [
        {"window": "1y"},
        {"window": "\x00"},
        {"version": "99"},
        {"version": "abc"},
        {"compare": "-1"},
        {"version": "9" * 5000},
    ],
)
def test_a_bad_window_or_version_is_a_400_page_that_says_why(viewer_client, sample, query):
    response = viewer_client.get("/tools/measured/analytics/", query)

    assert response.status_code == 400
    page = response.content.decode()
    assert "This search cannot be run:" in page and "Select a valid choice" in page
    assert "<h1>" in page  # the tool's page, not a bare error


def test_the_console_page_lists_the_slowest_and_most_failing_tools(viewer_client, sample):
    response = viewer_client.get("/analytics/", {"window": "30d"})

    assert response.status_code == 200
    page = response.content.decode()
    assert '<a href="/analytics/" aria-current="page">Analytics</a>' in page  # in the nav
    assert 'href="/tools/measured/analytics/?window=30d">measured</a>' in page
    # 0.5, 0.5, 1..100: p95 at rank 1 + 0.95 * 101 = 96.95, between 94 and 95.
    assert "94.950 s" in page and "98.990 s" in page
    assert viewer_client.get("/analytics/", {"window": "1d"}).status_code == 400


def test_an_unknown_tool_is_a_404(viewer_client):
    assert viewer_client.get("/tools/nope/analytics/").status_code == 404
    assert viewer_client.get("/tools/%2e%2e/analytics/").status_code == 404


def test_logged_out_visitors_are_sent_to_log_in(client, sample):
    for path in ("/analytics/", "/tools/measured/analytics/"):
        response = client.get(path)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def many(make_tool, versions: int, runs: int) -> None:
    """`versions` versions of "busy", `runs` runs of each over the last week, of every
    outcome, and another tool."""
    for n in range(versions):
        tool = make_tool("busy", body=f"# v{n}\n")
    for version in tool.versions.all():
        for i, status in enumerate(RunStatus):
            add_runs(
                version, runs // len(RunStatus) + 1, status=status,
                durations=[float(i)] * (runs // len(RunStatus) + 1), age=timedelta(hours=i * 7),
            )  # fmt: skip
    add_runs(make_tool("other").versions.get(), 3)


def count_queries(client, path: str) -> int:
    with CaptureQueriesContext(connection) as seen:
        assert client.get(path).status_code == 200
    return len(seen)


@pytest.mark.parametrize(
    "path",
    [
        "/tools/busy/analytics/",
        "/tools/busy/analytics/?window=30d&version=1",
        "/tools/busy/analytics/?window=24h&version=1&compare=1",
        "/analytics/",
    ],
)
def test_a_page_costs_the_same_queries_with_one_run_or_many(
    viewer_client, make_tool, django_assert_max_num_queries, path
):
    make_tool("busy")
    add_runs(make_tool("other").versions.get(), 1)
    few = count_queries(viewer_client, path)

    many(make_tool, versions=6, runs=60)
    with django_assert_max_num_queries(few):
        assert viewer_client.get(path).status_code == 200
