"""Write-only secrets, clearing, concurrent edits, bad input, and the runner's environment."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from tests.support import integrations as support
from tests.support.forms import find_form, submit
from tools_app.audit import Actor
from tools_app.integrations import vault
from tools_app.integrations.environment import env_preview, environment_for
from tools_app.integrations.errors import Conflict, IntegrationUnavailable, InvalidIntegration
from tools_app.integrations.service import set_enabled, update_integration
from tools_app.models import AuditEvent, Integration, IntegrationSecret

SECRET = "sk-live-Z9q8W7e6R5t4Y3u2"
URL_VALUE = "https://searx.example.org"

fast_passwords = support.fast_passwords
fernet_keys = support.fernet_keys


@pytest.fixture
def searxng(db, console_admin) -> Integration:
    return support.create(
        "searxng", values={"url": URL_VALUE}, secrets={"token": SECRET}, user=console_admin
    )


def edit(client: Client, slug: str = "searxng", **data) -> object:
    """Open the integration's edit page, change `data` in its form, press Save."""
    url = reverse("integration_edit", args=[slug])
    return submit(client, url, data, form_id="integration-form", button="Save")


def stored(slug: str = "searxng", field: str = "token") -> str:
    secret = IntegrationSecret.objects.get(integration__slug=slug, field=field)
    return vault.decrypt(secret.ciphertext)


def test_it_never_puts_a_stored_secret_in_the_edit_form(searxng, console_admin_client):
    page = console_admin_client.get(reverse("integration_edit", args=["searxng"])).content
    html = page.decode()
    assert SECRET.encode() not in page
    ciphertext = searxng.secrets.get().ciphertext
    assert ciphertext not in html
    # No leading or trailing characters either.
    for piece in (SECRET[:4], SECRET[-4:]):
        assert piece not in html
    secret_input = re.search(r"<input[^>]*name=\"secret_token\"[^>]*>", html).group(0)
    assert 'type="password"' in secret_input and "value=" not in secret_input
    assert 'autocomplete="new-password"' in secret_input
    assert not re.search(r'type="hidden"[^>]*name="secret_', html)
    assert re.search(r"set on \d{4}-\d\d-\d\d \d\d:\d\d UTC by ada", html)
    assert 'name="clear_token"' in html


def test_it_keeps_the_stored_secret_when_the_field_is_empty(searxng, console_admin_client):
    before = searxng.secrets.get()
    response = edit(console_admin_client, field_url="https://other.example.org", secret_token="")
    assert response.status_code == 302
    after = searxng.secrets.get()
    assert (after.ciphertext, after.set_at) == (before.ciphertext, before.set_at)
    assert stored() == SECRET
    event = AuditEvent.objects.filter(action="integration.update").get()
    assert event.data["fields_changed"] == ["url"] and event.data["secrets_set"] == []


def test_it_replaces_a_secret_when_a_new_one_is_typed(searxng, console_admin_client, developer):
    response = edit(console_admin_client, secret_token="sk-new-value-123")
    assert response.status_code == 302
    assert stored() == "sk-new-value-123"
    event = AuditEvent.objects.filter(action="integration.update").get()
    assert event.summary == "set secret token"
    assert "sk-new-value-123" not in str(event.data) + event.summary


def test_it_clears_a_secret_explicitly(searxng, console_admin_client):
    response = edit(console_admin_client, clear_token="on")
    assert response.status_code == 302
    assert not searxng.secrets.exists()
    assert AuditEvent.objects.get(action="integration.update").data["secrets_cleared"] == ["token"]
    page = console_admin_client.get(reverse("integration_edit", args=["searxng"])).content
    assert b"not set" in page and b'name="clear_token"' not in page


def test_it_refuses_typing_and_clearing_at_once(searxng, console_admin_client):
    response = edit(console_admin_client, clear_token="on", secret_token="typed-and-cleared")
    assert response.status_code == 400
    page = response.content.decode()
    assert "type a new Bearer token or clear it, not both" in page
    assert "typed-and-cleared" not in page
    assert stored() == SECRET


def test_it_refuses_clearing_a_required_secret(db, console_admin_client):
    support.create("apify", secrets={"token": "apify-token-1"})
    response = edit(console_admin_client, "apify", clear_token="on")
    assert response.status_code == 400
    assert "API token is required" in response.content.decode()
    assert stored("apify") == "apify-token-1"


def test_it_tells_the_second_of_two_concurrent_editors_and_loses_nothing(
    searxng, console_admin_client, db
):
    second_admin = User.objects.create_user("bob", password="pw-for-tests-only")
    second_admin.groups.add(Group.objects.get(name="admin"))
    bob = Client()
    bob.force_login(second_admin)
    # Both open the form at revision 1.
    url = reverse("integration_edit", args=["searxng"])
    forms = []
    for client in (console_admin_client, bob):
        page = client.get(url).content.decode()
        assert 'name="revision" value="1"' in page
        forms.append(find_form(page, form_id="integration-form"))
    first = console_admin_client.post(
        url, forms[0].filled({"field_url": "https://first.example.org"})
    )
    assert first.status_code == 302
    # Bob fills in the page he opened before ada saved.
    changes = {"field_url": "https://second.example.org", "secret_token": "bobs-new-token"}
    second = bob.post(url, forms[1].filled(changes))
    assert second.status_code == 409
    page = second.content.decode()
    assert "was changed by ada" in page and "your changes were not saved" in page
    assert 'value="https://second.example.org"' in page  # bob's entry is kept in the form
    assert "bobs-new-token" not in page  # but a secret is never echoed back
    searxng.refresh_from_db()
    assert searxng.values == {"url": "https://first.example.org"} and searxng.revision == 2
    assert stored() == SECRET
    # Bob reloads and saves on the current revision.
    third = edit(bob, field_url="https://second.example.org")
    assert third.status_code == 302
    searxng.refresh_from_db()
    assert searxng.values == {"url": "https://second.example.org"} and searxng.revision == 3


def test_it_refuses_a_stale_revision_in_the_domain_too(searxng):
    update_integration("searxng", actor=Actor.system(), revision=1, label="one")
    with pytest.raises(Conflict, match="after you opened this form"):
        update_integration("searxng", actor=Actor.system(), revision=1, label="two")
    assert Integration.objects.get().label == "one"


@pytest.mark.parametrize(
    ("secret", "ok"),
    [
        ("x" * (64 * 1024), True),
        ("x" * (64 * 1024 + 1), False),
        ("é" * (32 * 1024 + 1), False),  # 65,538 bytes in UTF-8
        ("bad\x00byte", False),
    ],
    ids=["64KiB", "64KiB+1", "multibyte-over", "nul"],
)
def test_it_limits_secrets_to_64_kib(searxng, console_admin_client, secret, ok):
    response = edit(console_admin_client, secret_token=secret)
    if ok:
        assert response.status_code == 302
        assert stored() == secret
    else:
        assert response.status_code == 400
        page = response.content.decode()
        assert "larger than 64 KiB" in page or "NUL" in page
        assert stored() == SECRET
    assert secret[:1000] not in response.content.decode()


@pytest.mark.parametrize(
    "url",
    [
        "not a url",
        "searx.example.org",
        "ftp://searx.example.org",
        "javascript:alert(1)",
        "http://",
        "https://user:pw@searx.example.org",
        "http://exa mple.org",
    ],
)
def test_it_refuses_a_non_url_where_a_url_is_expected(searxng, console_admin_client, url):
    response = edit(console_admin_client, field_url=url)
    assert response.status_code == 400
    assert "must" in response.content.decode()
    searxng.refresh_from_db()
    assert searxng.values == {"url": URL_VALUE}


@pytest.mark.parametrize(
    "url", ["http://searxng:8080", "https://example.org/searxng/", "http://[::1]:8888"]
)
def test_it_accepts_urls_of_internal_services(searxng, console_admin_client, url):
    assert edit(console_admin_client, field_url=url).status_code == 302


def test_it_refuses_a_relative_database_path(db, console_admin_client):
    response = submit(
        console_admin_client,
        reverse("integration_create", args=["email_db"]),
        {"slug": "email_db", "field_path": "mail/db.sqlite3"},
        button="Create integration",
    )
    assert response.status_code == 400
    assert "must be an absolute path" in response.content.decode()


def test_it_names_unknown_and_missing_fields(db):
    with pytest.raises(InvalidIntegration) as caught:
        support.create("searxng", values={"url": URL_VALUE, "colour": "blue"})
    assert caught.value.errors == {"colour": ["unknown field 'colour' (fields: url, token)"]}
    with pytest.raises(InvalidIntegration) as caught:
        support.create("searxng", values={})
    assert caught.value.errors == {"url": ["Base URL is required"]}
    with pytest.raises(InvalidIntegration) as caught:
        support.create("searxng", values={"url": URL_VALUE, "token": "pl41n-v4lue"})
    assert "secret field" in str(caught.value) and "pl41n-v4lue" not in str(caught.value)
    with pytest.raises(InvalidIntegration) as caught:
        support.create("searxng", values={"url": URL_VALUE}, secrets={"nope": "s3cr3t"})
    assert "unknown field 'nope'" in str(caught.value) and "s3cr3t" not in str(caught.value)
    assert not Integration.objects.exists()


def test_it_strips_a_trailing_newline_from_secrets(db):
    support.create("apify", secrets={"token": "tok-123\n"})
    assert stored("apify") == "tok-123"


# -- the runner's environment ----------------------------------------------------------


def test_it_gives_a_tool_only_its_declared_integrations(searxng):
    support.create("apify", secrets={"token": "apify-token"})
    support.create("openai", secrets={"api_key": "sk-openai"})
    env, secrets = environment_for(["searxng"])
    assert env == {"SEARXNG_URL": URL_VALUE, "SEARXNG_TOKEN": SECRET}
    assert secrets == {"{{searxng.token}}": SECRET}
    env, secrets = environment_for(["openai", "apify"])
    assert env == {
        "OPENAI_API_KEY": "sk-openai",
        "OPENAI_BASE_URL": "https://api.openai.com/v1",  # the type's default
        "APIFY_TOKEN": "apify-token",
    }
    assert set(secrets) == {"{{openai.api_key}}", "{{apify.token}}"}
    assert environment_for([]) == ({}, {})


def test_it_omits_optional_fields_that_are_not_set(db):
    support.create("searxng", values={"url": URL_VALUE})
    assert environment_for(["searxng"]) == ({"SEARXNG_URL": URL_VALUE}, {})


def test_it_explains_why_a_run_cannot_get_its_integrations(searxng, fernet_keys):
    with pytest.raises(IntegrationUnavailable, match="'email_db' is not configured"):
        environment_for(["searxng", "email_db"])
    set_enabled(searxng, False, actor=Actor.system())
    with pytest.raises(IntegrationUnavailable, match="'searxng' is disabled"):
        environment_for(["searxng"])


def test_it_fails_clearly_when_a_secret_cannot_be_decrypted(db, fernet_keys):
    fernet_keys("A")
    support.create("searxng", values={"url": URL_VALUE}, secrets={"token": SECRET})
    fernet_keys("B")
    with pytest.raises(IntegrationUnavailable) as caught:
        environment_for(["searxng"])
    assert "secret searxng.token cannot be decrypted" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_it_refuses_two_integrations_setting_one_variable(searxng):
    support.create(
        "other_search",
        "custom",
        custom_fields="SEARXNG_URL url",
        values={"searxng_url": "https://other.example.org"},
    )
    with pytest.raises(IntegrationUnavailable, match="both set SEARXNG_URL"):
        environment_for(["searxng", "other_search"])


def test_it_previews_variable_names_without_values(searxng, make_tool):
    tool = make_tool("web_search", integrations=["searxng", "email_db"])
    preview = env_preview(tool)
    assert [(i.slug, i.state) for i in preview] == [("searxng", "ok"), ("email_db", "missing")]
    assert [(v.env, v.secret, v.is_set) for v in preview[0].variables] == [
        ("SEARXNG_URL", False, True),
        ("SEARXNG_TOKEN", True, True),
    ]
    assert SECRET not in repr(preview)
