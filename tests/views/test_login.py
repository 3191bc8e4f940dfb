"""Logging in and out through the pages' own forms, as a person does."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.support.forms import submit

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
PASSWORD = "pw-for-tests-only"  # tests.support.make_user


def log_in(client: Client, page: str, username: str, password: str, **kwargs):
    changes = {"username": username, "password": password}
    return submit(client, page, changes, button="Log in", **kwargs)


def test_it_says_why_a_login_failed_and_stays_logged_out(developer):
    client = Client()

    response = log_in(client, LOGIN, "dave", "not-the-password")

    assert response.status_code == 200
    assert "Your username and password didn't match" in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert client.get("/tools/").status_code == 302


def test_it_logs_in_and_goes_where_the_person_was_heading(developer):
    client = Client()
    # An anonymous visit to the run history lands on the login page with ?next=.
    to_login = client.get("/runs/?status=failed")
    assert to_login.status_code == 302
    page = to_login["Location"]
    assert page.startswith(LOGIN + "?next=")

    response = log_in(client, page, "dave", PASSWORD)

    assert response.status_code == 302 and response["Location"] == "/runs/?status=failed"
    assert client.get("/runs/").status_code == 200


def test_it_ignores_a_next_that_leaves_the_console(developer):
    client = Client()

    response = log_in(client, LOGIN + "?next=https://evil.example/phish", "dave", PASSWORD)

    assert response.status_code == 302 and response["Location"] == "/"  # the home page


def test_it_logs_out_with_the_pages_own_form(developer):
    client = Client()
    log_in(client, LOGIN, "dave", PASSWORD)
    assert client.get("/tools/").status_code == 200

    response = submit(client, "/tools/", button="Log out")

    assert response.status_code == 302 and response["Location"] == LOGIN
    assert "_auth_user_id" not in client.session
    assert client.get("/tools/").status_code == 302
