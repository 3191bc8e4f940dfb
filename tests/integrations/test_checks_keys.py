"""A missing or wrong key: system check errors, a banner, clear run errors, nothing lost."""

from __future__ import annotations

import io
import os

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from tests.support import integrations as support
from tests.support.forms import submit
from tools_app.integrations import vault
from tools_app.integrations.environment import environment_for
from tools_app.integrations.errors import IntegrationUnavailable
from tools_app.models import IntegrationSecret

fernet_keys = support.fernet_keys
fast_passwords = support.fast_passwords

SECRET = "sk-checks-9Kd3Lx7Q"


def errors() -> list[str]:
    return [f"{m.id}: {m.msg}" for m in vault.check_encryption_keys()]


def banner(client) -> str:
    """The configuration warnings in full: the System page the one-line banner links to."""
    return client.get("/system/").content.decode()


def test_it_warns_while_the_development_key_is_in_use(settings, console_admin_client):
    settings.CONSOLE_ENCRYPTION_KEYS = []
    assert errors() == []
    page = banner(console_admin_client)
    assert "Secrets are encrypted with a generated development key" in page
    assert "Set CONSOLE_ENCRYPTION_KEYS" in page


def test_it_warns_about_a_development_key_readable_by_others(settings, console_admin_client):
    settings.CONSOLE_ENCRYPTION_KEYS = []
    vault.encrypt("x")
    os.chmod(settings.ENCRYPTION_KEY_FILE, 0o644)
    assert "is readable by other users: chmod 600 it" in banner(console_admin_client)


def test_it_is_quiet_with_configured_keys(db, fernet_keys, console_admin_client):
    fernet_keys("A")
    support.create("apify", secrets={"token": SECRET})
    assert errors() == []
    assert '<aside id="config-banner"' not in console_admin_client.get("/tools/").content.decode()
    page = banner(console_admin_client)
    assert "Encryption keys:" not in page and "development key" not in page


def test_it_is_a_check_error_and_a_banner_when_a_key_is_invalid(db, settings, console_admin_client):
    settings.CONSOLE_ENCRYPTION_KEYS = [support.new_key(), "short-secret-looking-thing"]
    assert errors() == [
        "tools_app.E101: CONSOLE_ENCRYPTION_KEYS: key #2 is not a valid Fernet key (expected "
        "32 url-safe base64-encoded bytes, as made by `python -c 'from cryptography.fernet "
        "import Fernet; print(Fernet.generate_key().decode())'`)"
    ]
    response = console_admin_client.get("/integrations/")
    assert response.status_code == 200  # pages still work
    assert "Encryption keys do not load" in response.content.decode()  # the banner
    page = banner(console_admin_client)
    assert "Encryption keys: CONSOLE_ENCRYPTION_KEYS: key #2 is not a valid Fernet key" in page
    assert "short-secret-looking-thing" not in page
    with pytest.raises(SystemCheckError, match="tools_app.E101"):
        call_command("check", stdout=io.StringIO(), stderr=io.StringIO())


def test_it_is_a_check_error_and_a_banner_when_the_key_file_is_unreadable(
    db, settings, console_admin_client
):
    settings.CONSOLE_ENCRYPTION_KEYS = []
    # The key ring fixture sealed the signing keys under a generated file: replace it.
    settings.ENCRYPTION_KEY_FILE.unlink(missing_ok=True)
    settings.ENCRYPTION_KEY_FILE.mkdir()
    assert len(errors()) == 1 and "development key file" in errors()[0]
    assert "Encryption keys: development key file" in banner(console_admin_client)


def test_it_is_a_check_error_when_no_key_decrypts_stored_secrets(
    db, fernet_keys, console_admin_client
):
    fernet_keys("old")
    support.create("searxng", values={"url": "https://s.example.org"}, secrets={"token": SECRET})
    before = IntegrationSecret.objects.get().ciphertext
    fernet_keys("replaced")  # the old key was dropped: the secret is unreadable
    assert errors() == [
        "tools_app.E102: 1 stored secret cannot be decrypted: encrypted with a key that is "
        "not in CONSOLE_ENCRYPTION_KEYS (add the old key back, after the new one, then run "
        "`manage.py rotate_encryption_keys`)"
    ]
    assert "Encryption keys: 1 stored secret cannot be decrypted" in banner(console_admin_client)
    with pytest.raises(SystemCheckError, match="tools_app.E102"):
        call_command("check", stdout=io.StringIO(), stderr=io.StringIO())
    # A run that needs it gets a clear error, never an empty string or the ciphertext.
    with pytest.raises(IntegrationUnavailable) as caught:
        environment_for(["searxng"])
    assert "secret searxng.token cannot be decrypted with the configured encryption keys" in str(
        caught.value
    )
    assert before not in str(caught.value)
    # Nothing was overwritten: restoring the key brings the secret back.
    assert IntegrationSecret.objects.get().ciphertext == before
    fernet_keys("replaced", "old")
    assert errors() == []
    assert environment_for(["searxng"])[0]["SEARXNG_TOKEN"] == SECRET
    assert "still encrypted with an older key: run `manage.py rotate_encryption_keys`" in (
        banner(console_admin_client)
    )


def test_it_detects_a_lying_fingerprint_by_decrypting_a_sample(db, fernet_keys):
    fernet_keys("A")
    support.create("apify", secrets={"token": SECRET})
    fernet_keys("B")
    # The row claims the current key but holds a token made under another one.
    IntegrationSecret.objects.update(key_id=vault.primary_key_id())
    assert errors() == [
        "tools_app.E102: stored secrets cannot be decrypted with the configured keys: apify.token"
    ]


def test_it_saves_nothing_while_the_keys_are_unusable(db, settings, console_admin_client):
    settings.CONSOLE_ENCRYPTION_KEYS = ["broken-key"]
    changes = {"slug": "apify", "secret_token": SECRET}
    response = submit(console_admin_client, "/integrations/new/apify/", changes,
                      button="Create integration")  # fmt: skip
    assert response.status_code == 503
    page = response.content.decode()
    assert "Encryption keys: CONSOLE_ENCRYPTION_KEYS: key #1 is not a valid Fernet key" in page
    assert "Nothing was saved." in page and SECRET not in page
    assert not IntegrationSecret.objects.exists()
    from tools_app.models import AuditEvent, Integration

    assert not Integration.objects.exists() and not AuditEvent.objects.exists()
