"""`manage.py check --deploy` with the production settings docs/operations.md gives: no warnings.
A development install (generated secret key, plain HTTP) is the counter-example."""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.test import Client

from tests.support import console_env, manage

REPO = Path(__file__).resolve().parents[2]


def check_deploy(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    return manage(
        "check", "--deploy", "--fail-level", "WARNING",
        env=console_env(tmp_path, fresh=True, **env), timeout=120,
    )  # fmt: skip


def production_env() -> dict[str, str]:
    return {
        "CONSOLE_SECRET_KEY": secrets.token_urlsafe(50),
        "CONSOLE_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
        "CONSOLE_ALLOWED_HOSTS": "console.example.com",
        "CONSOLE_CSRF_TRUSTED_ORIGINS": "https://console.example.com",
    }


def test_it_passes_the_deploy_check_with_production_settings(tmp_path: Path) -> None:
    done = check_deploy(tmp_path, **production_env())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("override", "warning"),
    [
        ({"CONSOLE_HTTPS": "False"}, "security.W004"),
        ({"CONSOLE_SSL_REDIRECT": "False"}, "security.W008"),
        ({"CONSOLE_SECURE_COOKIES": "False"}, "security.W012"),
        ({"CONSOLE_HSTS_PRELOAD": "False"}, "security.W021"),
        ({"CONSOLE_DEBUG": "True"}, "security.W018"),
    ],
)
def test_it_warns_when_a_production_setting_is_weakened(
    tmp_path: Path, override: dict[str, str], warning: str
) -> None:
    done = check_deploy(tmp_path, **{**production_env(), **override})
    assert done.returncode == 1 and warning in done.stdout + done.stderr


def test_it_keeps_plain_http_for_a_development_install(tmp_path: Path) -> None:
    """No CONSOLE_SECRET_KEY: `dev.py up` on http://127.0.0.1 must not redirect to HTTPS."""
    done = check_deploy(tmp_path)
    assert "security.W008" in done.stdout + done.stderr


def test_it_redirects_to_https_but_not_health_probes(settings, db) -> None:
    settings.SECURE_SSL_REDIRECT = True
    client = Client()
    assert client.get("/api/healthz").status_code == 200
    response = client.get("/tools/")
    assert response.status_code == 301 and response["Location"].startswith("https://")
