"""A tool whose declared integration does not exist, or is disabled, says so on the tool
list, the tool page and the run form, before anyone runs it and meets the failure."""

from __future__ import annotations

import pytest

from tests.support.integrations import create
from tools_app.models import Integration

pytestmark = pytest.mark.django_db

MISSING = "(missing or disabled)"


@pytest.fixture
def fetcher(make_tool):
    return make_tool("fetcher", integrations=["brave", "github"])


def pages(client) -> dict[str, str]:
    return {
        url: client.get(url).content.decode()
        for url in ("/tools/", "/tools/fetcher/", "/tools/fetcher/run/")
    }


def test_it_marks_a_declared_integration_that_does_not_exist(developer_client, fetcher):
    create("github", "searxng", values={"url": "https://s.example.org"})
    for url, html in pages(developer_client).items():
        assert f"brave {MISSING}" in html, url
        assert f"github {MISSING}" not in html, url


def test_it_marks_a_disabled_integration(developer_client, fetcher):
    create("github", "searxng", values={"url": "https://s.example.org"})
    create("brave", "searxng", values={"url": "https://s.example.org"})
    for url, html in pages(developer_client).items():
        assert MISSING not in html, url
    Integration.objects.filter(slug="brave").update(enabled=False)
    for url, html in pages(developer_client).items():
        assert f"brave {MISSING}" in html, url
