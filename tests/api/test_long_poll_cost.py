"""What a long poll (GET /api/v1/runs/<id>?wait=S) costs the web server while it waits:
each look at the database is CPU the workers' runs do not get on a small machine."""

from __future__ import annotations

from tools_app.api import runs as api_runs


def test_it_looks_at_the_database_at_most_twenty_times_in_half_a_second():
    looks = []

    def news() -> bool:
        looks.append(1)
        return False

    api_runs._wait_for_news(news, 0.5)
    # 4 ms, then each pause 1.2 times the last: 17 looks in 0.5 s (a loaded machine
    # sleeps longer, never shorter). 2 ms growing by 1.1 looked 34 times.
    assert 1 <= len(looks) <= 20


def test_it_answers_as_soon_as_a_look_finds_news():
    looks = []

    def news() -> bool:
        looks.append(1)
        return len(looks) == 3

    api_runs._wait_for_news(news, 5.0)
    assert len(looks) == 3
