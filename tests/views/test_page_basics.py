"""What every page has: an icon (and /favicon.ico answers), a skip link to the main
content; the login page says what the product is."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tools_app.roles import AUDITOR, ensure_groups, set_role

pytestmark = pytest.mark.django_db


def test_it_serves_a_favicon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 302 and response["Location"].endswith("favicon.svg")
    page = client.get("/accounts/login/").content.decode()
    assert 'rel="icon"' in page


def test_every_page_has_a_skip_link_to_the_main_content(viewer_client):
    page = viewer_client.get("/tools/").content.decode()
    assert '<a class="skip-link" href="#main">Skip to main content</a>' in page
    assert '<main id="main"' in page


def test_the_login_page_says_what_the_product_is(client):
    page = client.get("/accounts/login/").content.decode()
    assert "publish the tools that AI agents run" in page


BANNER = '<aside id="config-banner"'


@pytest.fixture
def auditor_client(db) -> Client:
    ensure_groups()
    user = User.objects.create_user("audrey")
    set_role(user, AUDITOR)
    client = Client()
    client.force_login(user)
    return client


def test_the_configuration_banner_can_be_hidden_for_the_session(console_admin_client):
    from tests.support.forms import submit

    page = console_admin_client.get("/tools/").content.decode()
    assert BANNER in page and "Development key in use" in page  # the test key

    response = submit(console_admin_client, "/tools/", action="/warnings/dismiss/", follow=True)
    assert response.redirect_chain[-1][0] == "/tools/"
    assert BANNER not in response.content.decode()
    assert BANNER not in console_admin_client.get("/runs/").content.decode()
    # The System page still lists it in full.
    assert "generated development key" in console_admin_client.get("/system/").content.decode()


def test_the_configuration_banner_is_one_line_for_admins_only(
    console_admin_client, developer_client, viewer_client, auditor_client
):
    """Only admins can change the key; the banner names the worst warning and links to the
    System page for the whole text of every one."""
    page = console_admin_client.get("/tools/").content.decode()
    banner = page[page.index(BANNER) : page.index("</aside>")]
    assert 'class="banner config warning"' in banner
    assert 'href="/system/#warnings"' in banner
    assert "generated development key" not in banner  # the whole sentence is on /system/
    for client in (developer_client, viewer_client, auditor_client):
        page = client.get("/tools/").content.decode()
        assert BANNER not in page and "development key" not in page


def test_the_banner_shows_errors_first_in_their_own_colour(console_admin_client, monkeypatch):
    from tools_app import config_warnings as cw

    broken = cw.ConsoleWarning("The thing is broken.", "Thing broken", cw.Level.ERROR)
    monkeypatch.setattr(cw, "_WARNING_SOURCES", [*cw._WARNING_SOURCES, lambda: [broken]])
    page = console_admin_client.get("/tools/").content.decode()
    banner = page[page.index(BANNER) : page.index("</aside>")]
    assert 'class="banner config error"' in banner
    assert "Thing broken and 1 more" in banner


def test_dismissing_never_redirects_elsewhere(viewer_client):
    response = viewer_client.post("/warnings/dismiss/", {"next": "https://evil.example/"})
    assert response["Location"] == "/"


def test_the_api_docs_link_back_to_the_console(client):
    description = client.get("/api/openapi.json").json()["info"]["description"]
    assert "[← Back to the Tool Console](/)" in description


@pytest.mark.parametrize(
    ("path", "current"),
    [("/tools/", "Tools"), ("/tools/-/new/", "Tools"), ("/runs/", "Runs"), ("/docs/", "Docs")],
)
def test_the_nav_marks_the_section_of_the_page(console_admin_client, path, current):
    page = console_admin_client.get(path).content.decode()
    nav = page[page.index('<nav aria-label="Main">') : page.index("</nav>")]
    marked = re.findall(r'aria-current="page"[^>]*>([^<]+)<', nav)
    assert marked == [current]


def test_the_home_page_marks_no_section(console_admin_client):
    page = console_admin_client.get("/").content.decode()
    nav = page[page.index('<nav aria-label="Main">') : page.index("</nav>")]
    assert "aria-current" not in nav


def test_flash_messages_sit_in_the_content_column(console_admin_client, make_tool):
    make_tool("alpha", publish=False)
    follow = console_admin_client.post("/tools/alpha/publish/1/", follow=True)
    page = follow.content.decode()
    assert 'class="messages"' in page
    assert page.index('<main id="main"') < page.index('class="messages"')
