"""Integration pages: every URL for every role, and what each page shows."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from tests.support import integrations as support
from tests.support.forms import find_form, link, submit
from tools_app.models import AuditEvent, Integration, IntegrationSecret

SECRET = "sk-page-test-5f1c2a9e"
URL_VALUE = "https://searx.internal.example.org"

fake_provider = support.fake_provider
fast_passwords = support.fast_passwords


@pytest.fixture
def searxng(db, make_tool) -> Integration:
    integration = support.create(
        "searxng", values={"url": URL_VALUE}, secrets={"token": SECRET}, label="Search"
    )
    make_tool("web_search", integrations=["searxng"])
    return integration


def _client(role: str, request) -> Client:
    if role == "anonymous":
        return Client()
    fixture = {
        "nobody": "nobody",
        "viewer": "viewer",
        "developer": "developer",
        "admin": "console_admin",
    }[role]
    client = Client()
    client.force_login(request.getfixturevalue(fixture))
    return client


ROLES = ["anonymous", "nobody", "viewer", "developer", "admin"]
# (url name, kwargs, method, POST data, who may use it, admin's status)
PAGES = [
    ("integrations", {}, "get", None, "viewer", 200),
    ("integration", {"slug": "searxng"}, "get", None, "viewer", 200),
    ("integration_environment", {}, "get", None, "viewer", 200),
    ("integration_new", {}, "get", None, "admin", 200),
    ("integration_create", {"type_slug": "apify"}, "get", None, "admin", 200),
    (
        "integration_create",
        {"type_slug": "apify"},
        "post",
        {"slug": "apify", "enabled": "on", "secret_token": "apify-secret"},
        "admin",
        302,
    ),
    ("integration_edit", {"slug": "searxng"}, "get", None, "admin", 200),
    (
        "integration_edit",
        {"slug": "searxng"},
        "post",
        {"revision": "1", "field_url": "https://other.example.org", "enabled": "on"},
        "admin",
        302,
    ),
    ("integration_test", {"slug": "searxng"}, "post", {"field_url": "PROVIDER"}, "admin", 200),
    ("integration_test_new", {"type_slug": "email_db"}, "post", {}, "admin", 200),
    ("integration_disable", {"slug": "searxng"}, "get", None, "admin", 200),
    ("integration_disable", {"slug": "searxng"}, "post", {}, "admin", 302),
    ("integration_enable", {"slug": "searxng"}, "get", None, "admin", 200),
    ("integration_enable", {"slug": "searxng"}, "post", {}, "admin", 302),
    ("integration_test_runs", {"slug": "searxng"}, "get", None, "admin", 200),
    ("integration_delete", {"slug": "searxng"}, "get", None, "admin", 200),
    ("integration_delete", {"slug": "searxng"}, "post", {"confirm": "on"}, "admin", 302),
]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(
    ("name", "kwargs", "method", "data", "allowed", "admin_status"),
    PAGES,
    ids=[f"{p[2]}-{p[0]}-{i}" for i, p in enumerate(PAGES)],
)
def test_it_enforces_roles_on_every_url(
    request, searxng, fake_provider, role, name, kwargs, method, data, allowed, admin_status
):
    client = _client(role, request)
    url = reverse(name, kwargs=kwargs)
    if data and data.get("field_url") == "PROVIDER":
        data = {**data, "field_url": fake_provider.url}
    before = (
        list(Integration.objects.values_list("slug", "enabled", "revision", "values")),
        list(IntegrationSecret.objects.values_list("ciphertext", flat=True)),
        AuditEvent.objects.count(),
    )
    response = client.post(url, data) if method == "post" else client.get(url)
    may = role == "admin" or (allowed == "viewer" and role in ("viewer", "developer"))
    if role == "anonymous":
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))
    elif not may:
        assert response.status_code == 403
    else:
        assert response.status_code == admin_status, response.content[:500]
    if not may:
        after = (
            list(Integration.objects.values_list("slug", "enabled", "revision", "values")),
            list(IntegrationSecret.objects.values_list("ciphertext", flat=True)),
            AuditEvent.objects.count(),
        )
        assert after == before
        assert fake_provider.seen == []
    body = response.content.decode()
    assert SECRET not in body


def test_it_refuses_get_on_post_only_urls(searxng, console_admin_client):
    assert (
        console_admin_client.get(reverse("integration_test", args=["searxng"])).status_code == 405
    )


def test_it_shows_viewers_names_types_fields_set_and_tools_never_values(searxng, viewer_client):
    for url in [reverse("integrations"), reverse("integration", args=["searxng"])]:
        page = viewer_client.get(url).content.decode()
        assert "searxng" in page and "SearXNG" in page
        assert "web_search" in page
        assert "token (secret): set" in page or "set on" in page
        assert URL_VALUE not in page
        assert SECRET not in page
        assert "/integrations/searxng/edit/" not in page


def test_it_shows_admins_plain_values_but_never_secrets(searxng, console_admin_client):
    page = console_admin_client.get(reverse("integration", args=["searxng"])).content.decode()
    assert URL_VALUE in page
    assert SECRET not in page
    assert re.search(r"set on \d{4}-\d\d-\d\d \d\d:\d\d UTC by system", page)


def test_it_lists_types_to_create_from(console_admin_client, db):
    page = console_admin_client.get(reverse("integration_new")).content.decode()
    for slug in ["searxng", "email_db", "apify", "openai", "custom"]:
        assert reverse("integration_create", args=[slug]) in page
    assert console_admin_client.get("/integrations/new/nope/").status_code == 404


def test_it_creates_an_integration_from_a_type(console_admin_client, console_admin):
    page = console_admin_client.get(reverse("integration_create", args=["searxng"]))
    assert 'value="searxng"' in page.content.decode()  # the slug defaults to the type's
    response = submit(
        console_admin_client,
        reverse("integration_create", args=["searxng"]),
        {"slug": "", "label": "Search", "enabled": "on", "field_url": URL_VALUE,
         "secret_token": SECRET},
        button="Create integration",
    )  # fmt: skip
    assert response.status_code == 302
    assert response["Location"] == reverse("integration", args=["searxng"])
    integration = Integration.objects.get(slug="searxng")
    assert integration.values == {"url": URL_VALUE}
    assert integration.updated_by == console_admin
    secret = integration.secrets.get()
    assert secret.field == "token" and secret.set_by == console_admin
    assert SECRET not in secret.ciphertext
    event = AuditEvent.objects.get(action="integration.create")
    assert event.actor == "ada"
    assert event.data == {
        "type": "searxng",
        "fields_changed": ["url"],
        "secrets_set": ["token"],
        "secrets_cleared": [],
    }
    assert SECRET not in event.summary and URL_VALUE not in event.summary


def test_it_refuses_a_duplicate_or_bad_slug(searxng, console_admin_client):
    url = reverse("integration_create", args=["searxng"])
    for slug, message in [
        ("searxng", "already exists"),
        ("Bad Slug", "is not a valid slug"),
        ("new", "is reserved"),
    ]:
        response = submit(
            console_admin_client,
            url,
            {"slug": slug, "field_url": URL_VALUE, "secret_token": "typed-secret-1"},
            button="Create integration",
        )
        assert response.status_code == 400
        page = response.content.decode()
        assert message in page
        assert "typed-secret-1" not in page
    assert Integration.objects.count() == 1


def test_it_creates_a_custom_integration_in_two_steps(console_admin_client):
    url = reverse("integration_create", args=["custom"])
    page = console_admin_client.get(url).content.decode()
    assert "No variables defined yet." in page
    variables = "CRM_URL url required\r\nCRM_KEY secret"
    refreshed = submit(
        console_admin_client,
        url,
        {"slug": "crm", "custom_fields": variables},
        button="Apply the variable list",
    )
    assert refreshed.status_code == 200
    page = refreshed.content.decode()
    assert 'name="field_crm_url"' in page and 'name="secret_crm_key"' in page
    assert not Integration.objects.exists()
    # The next step fills in the page the refresh rendered, as the person does.
    form = find_form(page, form_id="integration-form")
    assert form.data()["custom_fields"] == variables
    changes = {"field_crm_url": "https://crm.example.org", "secret_crm_key": "crm-secret-value"}
    response = console_admin_client.post(url, form.filled(changes))
    assert response.status_code == 302
    integration = Integration.objects.get(slug="crm")
    assert [f["env"] for f in integration.custom_fields] == ["CRM_URL", "CRM_KEY"]
    assert integration.values == {"crm_url": "https://crm.example.org"}
    assert integration.secrets.get().field == "crm_key"


def test_it_refuses_a_bad_custom_field_list(console_admin_client):
    response = submit(
        console_admin_client,
        reverse("integration_create", args=["custom"]),
        {"slug": "crm", "custom_fields": "LD_PRELOAD secret"},
        button="Create integration",
    )
    assert response.status_code == 400
    assert "&#x27;LD_PRELOAD&#x27; is reserved" in response.content.decode()
    assert not Integration.objects.exists()


def test_it_disables_and_enables(searxng, console_admin_client):
    page_url = reverse("integration", args=["searxng"])
    confirm = link(console_admin_client.get(page_url).content.decode(), "Disable…")
    response = submit(console_admin_client, confirm, button="Disable")
    assert response.status_code == 302
    searxng.refresh_from_db()
    assert not searxng.enabled and searxng.revision == 2
    page = console_admin_client.get(reverse("integrations")).content.decode()
    assert "disabled" in page
    confirm = link(console_admin_client.get(page_url).content.decode(), "Enable…")
    response = submit(console_admin_client, confirm, button="Enable")
    assert response.status_code == 302
    assert response["Location"] == reverse("integration", args=["searxng"])
    searxng.refresh_from_db()
    assert searxng.enabled
    assert list(
        AuditEvent.objects.filter(target_type="integration")
        .order_by("id")
        .values_list("action", flat=True)
    ) == ["integration.create", "integration.disable", "integration.enable"]


@pytest.mark.parametrize(
    ("link_text", "question", "button", "enabled_before", "allow_before"),
    [
        ("Disable…", "Disable integration searxng?", "Disable", True, False),
        ("Enable…", "Enable integration searxng?", "Enable", False, False),
        ("Allow test runs…", "Allow test runs with searxng?", "Allow test runs", True, False),
        ("Stop allowing test runs…", "Stop test runs with searxng?", "Stop allowing test runs",
         True, True),
    ],
)  # fmt: skip
def test_it_asks_before_switching_an_integration(
    searxng, console_admin_client, link_text, question, button, enabled_before, allow_before
):  # fmt: skip
    Integration.objects.filter(slug="searxng").update(
        enabled=enabled_before, allow_test_runs=allow_before
    )
    detail = console_admin_client.get(reverse("integration", args=["searxng"])).content.decode()
    assert '<form method="post" action="/integrations/searxng/' not in detail
    confirm = link(detail, link_text)

    page = console_admin_client.get(confirm)

    assert page.status_code == 200
    text = page.content.decode()
    assert question in text and 'href="/integrations/searxng/">Cancel</a>' in text
    before = AuditEvent.objects.count()
    searxng.refresh_from_db()
    assert (searxng.enabled, searxng.allow_test_runs) == (enabled_before, allow_before)

    response = submit(console_admin_client, confirm, button=button)

    assert response.status_code == 302
    assert response["Location"] == "/integrations/searxng/"
    searxng.refresh_from_db()
    assert (searxng.enabled, searxng.allow_test_runs) != (enabled_before, allow_before)
    assert AuditEvent.objects.count() == before + 1


def test_it_refuses_deleting_an_integration_published_tools_declare(
    searxng, console_admin_client, make_tool
):
    make_tool("draft_search", integrations=["searxng"], publish=False)
    url = reverse("integration_delete", args=["searxng"])
    page = console_admin_client.get(url).content.decode()
    assert "Published tools declare this integration" in page
    assert 'href="/tools/web_search/"' in page
    assert "draft_search" in page  # listed apart: not published
    response = submit(console_admin_client, url, button="Delete searxng")
    assert response.status_code == 409
    assert "declared by published tools (web_search)" in response.content.decode()
    assert Integration.objects.filter(slug="searxng").exists()
    response = submit(console_admin_client, url, {"confirm": "on"}, button="Delete searxng")
    assert response.status_code == 302
    assert not Integration.objects.exists() and not IntegrationSecret.objects.exists()
    event = AuditEvent.objects.get(action="integration.delete")
    assert event.data == {"type": "searxng", "secrets_deleted": ["token"], "tools": ["web_search"]}


def test_it_deletes_an_unused_integration_without_confirmation(console_admin_client, db):
    support.create("apify", secrets={"token": "x-token"})
    url = reverse("integration_delete", args=["apify"])
    assert "Published tools declare" not in console_admin_client.get(url).content.decode()
    assert submit(console_admin_client, url, button="Delete apify").status_code == 302
    assert not Integration.objects.exists()


def test_it_previews_the_environment_names_only(searxng, viewer_client, make_tool):
    make_tool("mailer", integrations=["email_db", "searxng"])
    page = viewer_client.get(reverse("integration_environment")).content.decode()
    assert "SEARXNG_URL" in page and "SEARXNG_TOKEN" in page
    assert URL_VALUE not in page and SECRET not in page
    assert "mailer" in page and "not configured" in page  # email_db does not exist
    page = viewer_client.get(reverse("integration_environment") + "?tool=web_search")
    assert "mailer" not in page.content.decode()


def test_it_shows_the_environment_on_the_integration_page(searxng, viewer_client):
    page = viewer_client.get(reverse("integration", args=["searxng"])).content.decode()
    assert "<code>SEARXNG_URL</code>" in page and "<code>SEARXNG_TOKEN</code>" in page


def test_it_lets_admins_open_a_page_whose_type_is_gone(console_admin_client, db):
    Integration.objects.create(slug="legacy", type_slug="retired", values={"a": "b"})
    page = console_admin_client.get(reverse("integration", args=["legacy"]))
    assert page.status_code == 200
    assert "not installed" in page.content.decode()
    assert console_admin_client.get(reverse("integrations")).status_code == 200
    confirm = link(page.content.decode(), "Delete…")
    assert submit(console_admin_client, confirm, button="Delete legacy").status_code == 302
    assert not Integration.objects.filter(slug="legacy").exists()


def test_it_keeps_secrets_out_of_django_admin(searxng, db):
    superuser = User.objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    client = Client()
    client.force_login(superuser)
    ciphertext = searxng.secrets.get().ciphertext
    pages = [
        reverse("admin:tools_app_integration_changelist"),
        reverse("admin:tools_app_integration_change", args=[searxng.pk]),
    ]
    from django.contrib import admin

    if IntegrationSecret in admin.site._registry:
        secret = searxng.secrets.get()
        pages += [
            reverse("admin:tools_app_integrationsecret_changelist"),
            reverse("admin:tools_app_integrationsecret_change", args=[secret.pk]),
        ]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        page = response.content.decode()
        assert SECRET not in page and ciphertext not in page
        assert 'name="ciphertext"' not in page
    # The change page cannot alter values or secrets.
    change = reverse("admin:tools_app_integration_change", args=[searxng.pk])
    client.post(
        change,
        {"label": "x", "enabled": "on", "values": '{"url": "https://evil.example"}',
         "secrets-TOTAL_FORMS": "0", "secrets-INITIAL_FORMS": "0"},
    )  # fmt: skip
    searxng.refresh_from_db()
    assert searxng.values == {"url": URL_VALUE}
    assert searxng.secrets.get().ciphertext == ciphertext


def test_it_marks_posted_secrets_sensitive_for_error_reports(searxng, console_admin_client):
    from django.views.debug import SafeExceptionReporterFilter

    for url, button in [
        (reverse("integration_create", args=["apify"]), "Create integration"),
        (reverse("integration_edit", args=["searxng"]), "Save"),
        (reverse("integration_create", args=["searxng"]), "Test connection"),
    ]:
        changes = {"secret_token": "posted-secret"}
        response = submit(console_admin_client, url, changes, form_id="integration-form",
                          button=button)  # fmt: skip
        cleansed = SafeExceptionReporterFilter().get_post_parameters(response.wsgi_request)
        assert "posted-secret" not in str(dict(cleansed))


def test_it_gives_each_field_error_the_id_its_field_points_at(searxng, console_admin_client):
    # Django names "<id>_error" in a field's aria-describedby once it has an error: a
    # screen reader announces nothing if no element has that id.
    response = submit(
        console_admin_client,
        reverse("integration_create", args=["searxng"]),
        {"slug": "Bad Slug", "field_url": "not a url", "secret_token": "typed-secret-1"},
        button="Create integration",
    )
    page = response.content.decode()
    described = re.findall(r'aria-describedby="([^"]+)"', page)
    ids = set(re.findall(r' id="([^"]+)"', page))
    assert any(ref.endswith("_error") for refs in described for ref in refs.split())
    assert [ref for refs in described for ref in refs.split() if ref not in ids] == []
