"""manage.py set_integration: plain values from arguments, secrets only from stdin."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.support import console_env, manage
from tests.support import integrations as support
from tools_app.integrations import vault
from tools_app.models import AuditEvent, Integration, IntegrationSecret

REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-cli-secret-4Rt7Yu1I"

fernet_keys = support.fernet_keys


class Stdin(io.StringIO):
    def isatty(self) -> bool:
        return False


def run(*args: str, stdin: str = "") -> str:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin
    sys.stdin = Stdin(stdin)
    try:
        call_command("set_integration", *args, stdout=out, stderr=err)
    finally:
        sys.stdin = old
    return out.getvalue() + err.getvalue()


def fails(*args: str, stdin: str = "") -> str:
    with pytest.raises(CommandError) as caught:
        run(*args, stdin=stdin)
    assert caught.value.returncode == 1
    return str(caught.value)


def secret(slug: str, field: str) -> str:
    row = IntegrationSecret.objects.get(integration__slug=slug, field=field)
    return vault.decrypt(row.ciphertext)


def test_it_creates_with_values_and_a_secret_from_stdin(db):
    output = run(
        "searxng",
        "--type",
        "searxng",
        "--field",
        "url=https://searx.example.org",
        "--secret-stdin",
        "token",
        stdin=SECRET + "\n",
    )
    assert output.strip() == "created integration searxng [searxng, enabled] (token, url)"
    integration = Integration.objects.get(slug="searxng")
    assert integration.values == {"url": "https://searx.example.org"}
    assert secret("searxng", "token") == SECRET
    event = AuditEvent.objects.get(action="integration.create")
    assert event.actor == "system" and event.data["secrets_set"] == ["token"]
    assert SECRET not in output


def test_it_updates_and_keeps_what_is_not_given(db):
    run("searxng", "--type", "searxng", "--field", "url=https://a.example.org",
        "--secret-stdin", "token", stdin=SECRET)  # fmt: skip
    output = run("searxng", "--field", "url=https://b.example.org", "--label", "Search")
    assert output.strip() == "updated integration searxng [searxng, enabled] (url)"
    integration = Integration.objects.get()
    assert integration.values == {"url": "https://b.example.org"}
    assert integration.label == "Search" and integration.revision == 2
    assert secret("searxng", "token") == SECRET
    run("searxng", "--clear", "token", "--disable")
    integration.refresh_from_db()
    assert not integration.secrets.exists() and not integration.enabled


def test_it_reads_several_secrets_one_line_each(db):
    run("crm", "--type", "custom", "--define", "CRM_KEY secret required", "--define",
        "CRM_PASSWORD secret", "--secret-stdin", "crm_key", "--secret-stdin", "crm_password",
        stdin="key-1\npass word 2\n")  # fmt: skip
    assert secret("crm", "crm_key") == "key-1"
    assert secret("crm", "crm_password") == "pass word 2"
    message = fails(
        "crm", "--secret-stdin", "crm_key", "--secret-stdin", "crm_password", stdin="only-one\n"
    )
    assert "standard input has 1 line(s) for 2 secrets (crm_key, crm_password)" in message
    assert secret("crm", "crm_key") == "key-1"


def test_it_refuses_a_secret_on_the_command_line_without_echoing_it(db):
    message = fails("apify", "--type", "apify", "--field", f"token={SECRET}")
    assert message == (
        "field 'token' is secret: pass it on standard input with --secret-stdin token, "
        "never on the command line"
    )
    assert SECRET not in message
    assert not Integration.objects.exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("searxng", "--type", "searxng", "--field", "colour=blue"),
            "unknown field 'colour' for type 'searxng' (fields: url, token)",
        ),  # fmt: skip
        (("searxng", "--type", "searxng", "--secret-stdin", "nope"), "unknown field 'nope'"),
        (
            ("searxng", "--type", "searxng", "--secret-stdin", "url"),
            "field 'url' is not secret: use --field url=VALUE",
        ),  # fmt: skip
        (("searxng", "--type", "searxng"), "url: Base URL is required"),
        (
            ("searxng", "--type", "searxng", "--field", "url=not a url"),
            "url: Base URL must be an http:// or https:// URL",
        ),  # fmt: skip
        (("Bad Slug", "--type", "searxng"), "'Bad Slug' is not a valid slug"),
        (
            ("apify", "--type", "apify", "--secret-stdin", "token"),
            "standard input is empty for token",
        ),  # fmt: skip
        (("searxng", "--type", "searxng", "--define", "X secret"), "--define is only for custom"),
    ],
)
def test_it_exits_1_with_a_clear_message(db, args, expected):
    assert expected in fails(*args)
    assert not Integration.objects.exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("x", "--type", "nosuch"),
            "unknown integration type 'nosuch' (known: apify, browser, custom,",
        ),
        (
            ("ghost", "--field", "url=https://x.example"),
            "unknown integration 'ghost': give --type TYPE to create it",
        ),  # fmt: skip
    ],
)
def test_it_exits_2_on_an_unknown_or_missing_type(db, args, expected):
    """Bad usage, as docs/commands.md says: like create_agent_token's unknown scope."""
    with pytest.raises(CommandError) as caught:
        run(*args)
    assert caught.value.returncode == 2
    assert expected in str(caught.value)
    assert not Integration.objects.exists()


@pytest.mark.parametrize("field", ["url", "=x", " =x"])
def test_it_exits_2_on_a_malformed_field(db, field):
    with pytest.raises(CommandError) as caught:
        run("searxng", "--type", "searxng", "--field", field)
    assert caught.value.returncode == 2
    assert "--field needs NAME=VALUE" in str(caught.value)
    assert not Integration.objects.exists()


def test_it_refuses_changing_an_integrations_type(db):
    run("search", "--type", "searxng", "--field", "url=https://a.example.org")
    assert "integration 'search' has type 'searxng', not 'apify'" in fails(
        "search", "--type", "apify"
    )


def test_it_refuses_an_oversized_secret(db):
    message = fails("apify", "--type", "apify", "--secret-stdin", "token", stdin="x" * 70000)
    assert "larger than 64 KiB" in message
    assert not Integration.objects.exists()


def test_it_runs_as_a_real_command_with_stdin_and_exit_codes(tmp_path):
    """End to end in a subprocess: a file database, real stdin, real exit statuses."""
    env = console_env(tmp_path, CONSOLE_ENCRYPTION_KEYS=support.new_key())

    def call(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
        return manage(*args, env=env, input=stdin)

    assert call("migrate", "-v", "0").returncode == 0
    done = call("set_integration", "apify", "--type", "apify", "--secret-stdin", "token",
                stdin=SECRET)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "created integration apify [apify, enabled] (token)"
    refused = call("set_integration", "apify", "--field", f"token={SECRET}")
    assert refused.returncode == 1
    assert "field 'token' is secret" in refused.stderr
    assert SECRET not in refused.stdout + refused.stderr + done.stdout + done.stderr
    usage = call("set_integration")
    assert usage.returncode == 2
    malformed = call("set_integration", "apify", "--field", "token")
    assert malformed.returncode == 2, malformed.stderr
    assert "--field needs NAME=VALUE" in malformed.stderr
    raw = (tmp_path / "db.sqlite3").read_bytes()  # console_env's database
    for extra in tmp_path.glob("db.sqlite3-*"):
        raw += extra.read_bytes()
    assert SECRET.encode() not in raw
