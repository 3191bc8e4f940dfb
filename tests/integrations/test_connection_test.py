"""The connection test: the type's request with the form's values, before saving, through
the console's outbound HTTP client. A local http.server stands in for the providers."""

from __future__ import annotations

import json

import httpx
import pytest
from django.urls import reverse

from tests.support import integrations as support
from tests.support.forms import submit
from tests.support.stand_in import Reply, Request, redirect
from tools_app.audit import Actor
from tools_app.egress import client as http_client
from tools_app.integrations.connection import connection_test, redact
from tools_app.integrations.types import get_type
from tools_app.models import AuditEvent, Integration

fake_provider = support.fake_provider
fast_passwords = support.fast_passwords


@pytest.fixture(autouse=True)
def allow_the_fake_provider(request, settings) -> None:
    """The provider stand-in listens on 127.0.0.1, which the egress policy refuses unless
    the allow list names it (tests/egress/test_egress_policy.py tests the refusal)."""
    if "fake_provider" in request.fixturenames:
        provider = request.getfixturevalue("fake_provider")
        settings.TOOL_NETWORK_ALLOW = "127.0.0.1:" + provider.url.rsplit(":", 1)[1]


SECRET = "tok-connection-7Hq2Lm9P"


def connection_test_url(slug: str | None = None, type_slug: str | None = None) -> str:
    if slug:
        return reverse("integration_test", args=[slug])
    return reverse("integration_test_new", args=[type_slug])


def press_test(client, *, type_slug: str | None = None, slug: str | None = None, **kw):
    """Fill in the new (type_slug) or edit (slug) page's form with the changes in `kw` and
    press its Test connection button (htmx=True: as htmx sends it, the same form data)."""
    htmx = {"HTTP_HX_REQUEST": "true"} if kw.pop("htmx", False) else {}
    page = (
        reverse("integration_edit", args=[slug])
        if slug
        else reverse("integration_create", args=[type_slug])
    )
    return submit(client, page, kw, form_id="integration-form", button="Test connection", **htmx)


def test_it_tests_new_values_before_saving(console_admin_client, fake_provider):
    # The "Test connection" button of the new-integration form (it posts elsewhere).
    response = submit(
        console_admin_client,
        reverse("integration_create", args=["searxng"]),
        {"slug": "searxng", "field_url": fake_provider.url + "/", "secret_token": SECRET},
        button="Test connection",
        HTTP_HX_REQUEST="true",
    )
    assert response.wsgi_request.path == connection_test_url(type_slug="searxng")
    assert response.status_code == 200
    page = response.content.decode()
    assert "<html" not in page  # an htmx partial
    assert "Connection works: HTTP 200 OK" in page
    seen = fake_provider.last
    assert seen.method == "GET" and seen.path == "/search?q=test&format=json"
    assert seen.headers["authorization"] == f"Bearer {SECRET}"
    assert not Integration.objects.exists()  # nothing saved
    event = AuditEvent.objects.get(action="integration.test")
    assert event.data == {"type": "searxng", "slug": "searxng", "ok": True, "status": 200}
    assert SECRET not in event.summary + json.dumps(event.data)


def test_it_sends_no_credential_header_for_an_unset_optional_secret(
    console_admin_client, fake_provider
):
    press_test(console_admin_client, type_slug="searxng", field_url=fake_provider.url)
    assert "authorization" not in fake_provider.last.headers


def test_it_shows_the_status_and_a_redacted_excerpt_on_failure(console_admin_client, fake_provider):
    fake_provider.status = 401
    fake_provider.echo_authorization = True
    response = press_test(
        console_admin_client,
        type_slug="searxng",
        field_url=fake_provider.url,
        secret_token=SECRET,
        htmx=True,
    )
    page = response.content.decode()
    assert "The provider answered HTTP 401 Unauthorized (expected 2xx)." in page
    assert "invalid credentials" in page
    assert "Bearer {{searxng.token}}" in page
    assert SECRET not in page
    assert AuditEvent.objects.get(action="integration.test").data["status"] == 401


def test_it_uses_the_stored_secret_when_the_field_is_empty(console_admin_client, fake_provider, db):
    support.create("searxng", values={"url": fake_provider.url}, secrets={"token": SECRET})
    edit_page = reverse("integration_edit", args=["searxng"])
    response = submit(console_admin_client, edit_page, {"secret_token": ""},
                      button="Test connection")  # fmt: skip
    assert response.wsgi_request.path == connection_test_url("searxng")
    assert "Connection works" in response.content.decode()
    assert fake_provider.last.headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in response.content.decode()
    # A typed secret wins over the stored one; "clear" means none.
    press_test(console_admin_client, slug="searxng", secret_token="typed-now")
    assert fake_provider.last.headers["authorization"] == "Bearer typed-now"
    press_test(console_admin_client, slug="searxng", clear_token="on")
    assert "authorization" not in fake_provider.last.headers


def test_it_never_sends_a_stored_secret_to_another_address(console_admin_client, fake_provider, db):
    support.create(
        "searxng", values={"url": "https://searx.example.org"}, secrets={"token": SECRET}
    )
    response = press_test(
        console_admin_client, slug="searxng", field_url=fake_provider.url, secret_token=""
    )
    page = response.content.decode()
    assert "the stored token is only sent to the saved address" in page
    assert fake_provider.seen == []
    # Typing the secret again is the way to test a new address.
    press_test(
        console_admin_client, slug="searxng", field_url=fake_provider.url, secret_token="retyped"
    )
    assert fake_provider.last.headers["authorization"] == "Bearer retyped"


def test_it_tests_openai_compatible_servers(console_admin_client, fake_provider):
    response = press_test(
        console_admin_client,
        type_slug="openai",
        field_base_url=fake_provider.url + "/v1",
        secret_api_key="sk-abc",
    )
    assert "Connection works" in response.content.decode()
    assert fake_provider.last.path == "/v1/models"
    assert fake_provider.last.headers["authorization"] == "Bearer sk-abc"


def test_it_says_when_a_type_has_no_test(console_admin_client, db):
    # Its page offers no Test connection button: this is a hand-built request for the URL.
    response = console_admin_client.post(
        connection_test_url(type_slug="email_db"), {"field_path": "/srv/mail.sqlite3"}
    )
    assert "The E-mail database type has no connection test." in response.content.decode()
    assert not AuditEvent.objects.filter(action="integration.test").exists()
    form = console_admin_client.get(reverse("integration_create", args=["email_db"]))
    assert "This type has no connection test." in form.content.decode()


def test_it_asks_for_missing_values_and_validates_them_first(console_admin_client, fake_provider):
    page = press_test(console_admin_client, type_slug="apify").content.decode()
    assert "Not tested: fill in API token first." in page
    page = press_test(
        console_admin_client, type_slug="searxng", field_url="file:///etc/passwd"
    ).content.decode()
    assert "Not tested: Base URL must be an http:// or https:// URL" in page
    assert fake_provider.seen == []


def test_it_reports_an_unreachable_provider(console_admin_client, fake_provider):
    dead = fake_provider.url.rsplit(":", 1)[0] + ":9"  # discard port: nothing listens
    page = press_test(
        console_admin_client, type_slug="searxng", field_url=dead, secret_token=SECRET
    ).content.decode()
    assert "Request failed: could not connect to 127.0.0.1" in page
    assert SECRET not in page


def test_it_renders_a_full_page_without_htmx(console_admin_client, fake_provider):
    page = press_test(
        console_admin_client, type_slug="searxng", field_url=fake_provider.url
    ).content.decode()
    assert "<html" in page and "Connection test: SearXNG" in page


def test_it_calls_the_apify_api_with_the_token(db):
    """api.apify.com is fixed by the type; an httpx transport stands in for it."""
    seen = []

    def apify(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(401, json={"error": {"message": f"bad token {SECRET}"}})

    outcome = connection_test(
        get_type("apify"),
        actor=Actor.system(),
        values={},
        secrets={"token": SECRET},
        transport=httpx.MockTransport(apify),
    )
    assert str(seen[0].url) == "https://api.apify.com/v2/users/me"
    assert seen[0].headers["authorization"] == f"Bearer {SECRET}"
    assert not outcome.ok and outcome.status == 401
    assert outcome.excerpt == '{"error":{"message":"bad token {{apify.token}}"}}'


# -- the outbound HTTP client ------------------------------------------------------------


def test_it_times_out(fake_provider):
    # Without the timeout the answer would come (after 2 s) and nothing would be raised.
    fake_provider.delay = 2
    with pytest.raises(http_client.HttpError, match="no answer within 0.5 s|within 0.5 s"):
        http_client.request("GET", fake_provider.url, timeout=0.5)


def test_it_caps_the_body(fake_provider):
    fake_provider.body = b"x" * 100_000
    result = http_client.request("GET", fake_provider.url, max_body=1000)
    assert result.status == 200 and len(result.body) == 1000 and result.truncated


@pytest.mark.parametrize("location", ["ftp://example.org/", "file:///etc/passwd"])
def test_it_refuses_redirects_to_other_schemes(fake_provider, location):
    fake_provider.status = 302
    fake_provider.headers = {"Location": location}
    with pytest.raises(http_client.HttpError, match="only http and https"):
        http_client.request("GET", fake_provider.url)


def test_it_follows_redirects_on_the_same_origin_with_credentials(fake_provider):
    def handler(request: Request) -> Reply | None:
        return redirect("/end") if request.path == "/start" else None

    fake_provider.handler = handler
    result = http_client.request(
        "GET", fake_provider.url + "/start", headers={"Authorization": "Bearer same-origin"}
    )
    assert result.status == 200 and result.redirects == [fake_provider.url + "/end"]
    assert fake_provider.last.headers["authorization"] == "Bearer same-origin"


def test_it_drops_credentials_on_a_redirect_to_another_origin(fake_provider):
    other = fake_provider.url.replace("127.0.0.1", "localhost")

    def handler(request: Request) -> Reply | None:
        return redirect(other + "/elsewhere", 307) if request.path == "/start" else None

    fake_provider.handler = handler
    http_client.request(
        "GET",
        fake_provider.url + "/start",
        headers={"Authorization": "Bearer x", "X-Api-Key": "k"},
        secret_headers=["X-Api-Key"],
    )
    assert fake_provider.last.path == "/elsewhere"
    assert "authorization" not in fake_provider.last.headers
    assert "x-api-key" not in fake_provider.last.headers


def test_it_stops_redirect_loops(fake_provider):
    fake_provider.status = 302
    fake_provider.headers = {"Location": "/again"}
    with pytest.raises(http_client.HttpError, match="more than 5 redirects"):
        http_client.request("GET", fake_provider.url)


def test_it_redacts_encoded_forms_of_secrets():
    secrets = {"{{x.token}}": "a b/c"}
    text = 'raw a b/c quoted a%20b%2Fc plus a+b%2Fc json "a b/c"'
    assert "a b/c" not in redact(text, secrets)
    assert redact(text, secrets).count("{{x.token}}") == 4
