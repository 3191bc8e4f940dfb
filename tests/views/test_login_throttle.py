"""Login throttling (django-axes) and the login pages' edges, driven through the real
forms: the POST data is what the rendered form holds (CSRF token included), as a
browser would send it.

CONSOLE_LOGIN_FAILURE_LIMIT (10) wrong passwords for one username lock that username for
CONSOLE_LOGIN_LOCKOUT_MINUTES (15), on the console's login and Django admin's alike;
during the lock even the right password does not log in."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.test import Client

from tests.support.forms import find_form, submit
from tools_app.models import AuditEvent

pytestmark = pytest.mark.django_db

PASSWORD = "the-right-password-42"
LOGIN = "/accounts/login/"
ADMIN_LOGIN = "/admin/login/"
LIMIT = 10


@pytest.fixture
def dave(db) -> User:
    return User.objects.create_user("dave", "dave@example.com", PASSWORD)


@pytest.fixture
def root(db) -> User:
    return User.objects.create_superuser("root", "root@example.com", PASSWORD)


class Visitor:
    """A browser-like client: CSRF enforced, a fixed address and user agent unless told."""

    def __init__(self, ip: str = "203.0.113.7", agent: str = "Mozilla/5.0 (X11) test") -> None:
        self.client = Client(enforce_csrf_checks=True, REMOTE_ADDR=ip, HTTP_USER_AGENT=agent)

    def login(self, username: str, password: str, url: str = LOGIN, **headers):
        page = self.client.get(url)
        assert page.status_code == 200
        form = find_form(page.content.decode(), form_id="login-form")
        data = form.filled({"username": username, "password": password})
        assert "csrfmiddlewaretoken" in data
        return self.client.post(form.attrs.get("action") or url, data, **headers)

    def logged_in(self) -> bool:
        return "_auth_user_id" in self.client.session


def fail(visitor: Visitor, username: str, times: int, url: str = LOGIN) -> list[int]:
    return [visitor.login(username, f"wrong-{i}", url).status_code for i in range(times)]


def test_it_locks_a_username_after_ten_wrong_passwords(dave):
    visitor = Visitor()

    statuses = fail(visitor, "dave", LIMIT)
    right = visitor.login("dave", PASSWORD)

    # Nine ordinary "didn't match" pages, then the tenth wrong password locks.
    assert statuses == [200] * (LIMIT - 1) + [429]
    assert right.status_code == 429 and not visitor.logged_in()
    html = right.content.decode()
    assert "Login locked" in html and "locked for 15 minutes" in html
    assert "even with the right password" in html
    # A rendered page with the console's look, not bare text.
    assert 'class="topbar"' in html and "css/console.css" in html
    assert visitor.client.get("/tools/").status_code == 302


def test_it_ignores_rotating_addresses_and_user_agents(dave):
    for i in range(LIMIT):
        attacker = Visitor(ip=f"198.51.100.{i + 1}", agent=f"bot/{i}")
        attacker.login("dave", f"wrong-{i}")

    fresh = Visitor(ip="192.0.2.200", agent="another browser")
    response = fresh.login("dave", PASSWORD)

    assert response.status_code == 429 and not fresh.logged_in()


def test_it_counts_spellings_that_log_in_as_the_same_user(dave):
    # The form strips spaces and NFKC-normalises (a fullwidth "ｄ" is "d"): each variant is
    # the same account, so each failure counts against it.
    variants = [" dave", "dave ", "\uff44ave", "\uff44\uff41\uff56\uff45", "dave"]
    visitor = Visitor()
    for i in range(LIMIT):
        visitor.login(variants[i % len(variants)], f"wrong-{i}")

    assert visitor.login("\uff44ave", PASSWORD).status_code == 429
    assert visitor.login("dave", PASSWORD).status_code == 429 and not visitor.logged_in()


def test_it_locks_django_admins_login_too(root):
    visitor = Visitor()

    statuses = fail(visitor, "root", LIMIT, ADMIN_LOGIN)
    right = visitor.login("root", PASSWORD, ADMIN_LOGIN)

    assert statuses[-1] == 429 and right.status_code == 429
    assert "Login locked" in right.content.decode() and not visitor.logged_in()
    # The lock is on the username: the console's own login refuses it as well.
    assert visitor.login("root", PASSWORD).status_code == 429 and not visitor.logged_in()


def test_a_lock_on_one_username_leaves_others_alone(dave, root):
    visitor = Visitor()
    fail(visitor, "dave", LIMIT)

    response = visitor.login("root", PASSWORD)

    assert response.status_code == 302 and visitor.logged_in()


def test_the_right_password_before_the_limit_resets_the_count(dave):
    visitor = Visitor()
    fail(visitor, "dave", LIMIT - 1)
    assert visitor.login("dave", PASSWORD).status_code == 302
    assert submit(visitor.client, "/", button="Log out").status_code == 302
    assert not visitor.logged_in()

    statuses = fail(visitor, "dave", LIMIT - 1)

    assert statuses == [200] * (LIMIT - 1)
    assert visitor.login("dave", PASSWORD).status_code == 302 and visitor.logged_in()


def test_the_lock_ends_after_the_cool_off(dave):
    visitor = Visitor()
    fail(visitor, "dave", LIMIT)
    assert visitor.login("dave", PASSWORD).status_code == 429

    # Let 16 minutes pass for the stored attempts.
    past = AccessAttempt.objects.get(username="dave").attempt_time - timedelta(minutes=16)
    AccessAttempt.objects.filter(username="dave").update(attempt_time=past)

    assert visitor.login("dave", PASSWORD).status_code == 302 and visitor.logged_in()


def test_it_audits_the_start_of_a_lock_once(dave):
    visitor = Visitor()
    fail(visitor, "dave", LIMIT + 5)

    events = list(AuditEvent.objects.filter(action="login.locked_out"))

    assert len(events) == 1
    assert events[0].data == {"username": "dave"} and events[0].ip == "203.0.113.7"
    assert PASSWORD not in str(events[0].summary) and "wrong-" not in events[0].summary
    stored = AccessAttempt.objects.get(username="dave")
    assert "wrong-" not in stored.post_data


def test_the_lock_length_comes_from_the_environment():
    code = (
        "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'console.settings');"
        "from django.conf import settings;"
        "print(settings.AXES_COOLOFF_TIME.total_seconds(), settings.AXES_FAILURE_LIMIT)"
    )
    env = {**os.environ, "CONSOLE_LOGIN_LOCKOUT_MINUTES": "3"}
    env.pop("CONSOLE_LOGIN_FAILURE_LIMIT", None)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["180.0", "10"]


# --- No password reset: the console sends no mail -----------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "/accounts/password_reset/",
        "/accounts/password_reset/done/",
        "/accounts/reset/MQ/set-password/",
        "/accounts/reset/MQ/abc-123/",
        "/accounts/reset/done/",
    ],
)
def test_password_reset_views_are_not_routed(url, dave):
    assert Client().get(url).status_code == 404
    assert Client().post(url, {"email": "dave@example.com"}).status_code == 404


def test_the_admin_login_offers_no_password_reset(db):
    html = Client().get(ADMIN_LOGIN).content.decode()
    assert "login-form" in html and "Forgotten your password" not in html


def test_an_admin_lifts_a_lock_in_django_admin_and_it_is_audited(dave, root):
    attacker = Visitor()
    fail(attacker, "dave", LIMIT)
    attempt = AccessAttempt.objects.get(username="dave")
    staff = Client()
    staff.force_login(root)

    # Django admin's own confirm page, and its button.
    delete = f"/admin/axes/accessattempt/{attempt.pk}/delete/"
    response = submit(staff, delete, button="Yes, I’m sure")

    assert response.status_code == 302 and not AccessAttempt.objects.exists()
    event = AuditEvent.objects.get(action="admin.delete")
    assert event.actor == "root" and event.target_type == "accessattempt"
    user = Visitor(ip="192.0.2.55")
    assert user.login("dave", PASSWORD).status_code == 302 and user.logged_in()
