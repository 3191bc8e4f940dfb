"""Times name their zone: CONSOLE_TIME_ZONE (default UTC) is the zone every page shows,
and each date and time on a page says which it is."""

from __future__ import annotations

import re
import sys

from tests.ops.test_settings import fresh_process
from tests.support import REPO, TEMPLATES


def test_every_time_a_template_shows_names_its_zone():
    """A format with hours and a date (Y-m-d H:i) carries T, the zone's abbreviation."""
    unnamed = [
        f"{path.relative_to(TEMPLATES)}:{number}: {match}"
        for path in sorted(TEMPLATES.rglob("*.html"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        for match in re.findall(r'\|date:"([^"]*)"', line)
        if "Y" in match and "H" in match and "T" not in match
    ]
    assert unnamed == []


def test_pages_show_times_in_the_configured_zone(settings, console_admin_client, make_tool):
    settings.TIME_ZONE = "Asia/Kolkata"  # +05:30 all year: no daylight saving to trip on
    make_tool("alpha")

    page = console_admin_client.get("/tools/").content.decode()

    assert re.search(r">\d{4}-\d\d-\d\d \d\d:\d\d IST</time>", page), page[-2000:]


def test_it_refuses_a_zone_that_does_not_exist(tmp_path):
    done = fresh_process(
        tmp_path,
        [sys.executable, str(REPO / "manage.py"), "check"],
        CONSOLE_TIME_ZONE="Mars/Olympus_Mons",
    )
    assert done.returncode != 0
    assert "CONSOLE_TIME_ZONE='Mars/Olympus_Mons' is not a time zone" in done.stderr
