"""rotate_encryption_keys: batches, resumable, idempotent, stops on what it cannot read."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from tests.support import integrations as support
from tools_app.audit import Actor
from tools_app.integrations import vault
from tools_app.integrations.environment import environment_for
from tools_app.integrations.service import update_integration
from tools_app.models import AuditEvent, Integration, IntegrationSecret

fernet_keys = support.fernet_keys


def plant(count: int, prefix: str = "secret") -> dict[int, str]:
    """`count` secrets under the current first key, fast: one field per integration,
    100 fields per integration. Returns pk -> plaintext."""
    now = timezone.now()
    integrations = Integration.objects.bulk_create(
        Integration(slug=f"bulk-{prefix}-{i}", type_slug="custom", custom_fields=[])
        for i in range((count + 99) // 100)
    )
    rows = []
    for n in range(count):
        plaintext = f"{prefix}-{n}-{'x' * (n % 50)}"
        token, key_id = vault.encrypt(plaintext)
        rows.append(
            IntegrationSecret(
                integration=integrations[n // 100],
                field=f"f{n % 100}",
                ciphertext=token,
                key_id=key_id,
                set_at=now,
            )
        )
    IntegrationSecret.objects.bulk_create(rows, batch_size=500)
    return {
        row.pk: f"{prefix}-{n}-{'x' * (n % 50)}"
        for n, row in enumerate(
            IntegrationSecret.objects.filter(
                integration__slug__startswith=f"bulk-{prefix}-"
            ).order_by("pk")
        )
    }


def rotate(*args: str) -> str:
    out = io.StringIO()
    call_command("rotate_encryption_keys", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue().strip()


def test_it_rotates_1000_secrets_readable_under_the_new_key_alone(db, fernet_keys):
    fernet_keys("old")
    expected = plant(1000)
    fernet_keys("new", "old")
    assert rotate("--batch-size", "128") == (
        "re-encrypted 1000 secrets under the first key (0 already were; 1000 in total)"
    )
    fernet_keys("new")
    primary = vault.primary_key_id()
    rows = list(IntegrationSecret.objects.order_by("pk"))
    assert len(rows) == 1000
    assert all(row.key_id == primary for row in rows)
    assert {row.pk: vault.decrypt(row.ciphertext) for row in rows} == expected
    event = AuditEvent.objects.get(action="integrations.rotate_keys")
    assert event.data == {
        "rotated": 1000,
        "already_current": 0,
        "runs": 0,
        "presets": 0,
        "oauth": 0,
        # The signing keys (the test's key ring) were sealed under neither key.
        "signing": 0,
        "ledger": 0,  # no run received a secret: no ledger key yet
    }


def test_it_is_idempotent(db, fernet_keys):
    fernet_keys("old")
    plant(30)
    fernet_keys("new", "old")
    rotate()
    before = list(IntegrationSecret.objects.values_list("ciphertext", flat=True))
    assert rotate() == "re-encrypted 0 secrets under the first key (30 already were; 30 in total)"
    assert list(IntegrationSecret.objects.values_list("ciphertext", flat=True)) == before


def test_it_stops_at_a_secret_no_key_decrypts_and_changes_nothing_for_it(db, fernet_keys):
    fernet_keys("old")
    good = plant(250, "good")
    fernet_keys("lost")
    support.create("apify", secrets={"token": "under-a-lost-key"})
    bad = IntegrationSecret.objects.get(integration__slug="apify")
    fernet_keys("old")
    later = plant(50, "later")
    fernet_keys("new", "old")

    with pytest.raises(CommandError) as caught:
        rotate("--batch-size", "100")
    message = str(caught.value)
    assert caught.value.returncode == 1
    assert "stopped at integration 'apify', field 'token'" in message
    assert "250 secrets re-encrypted before it" in message
    assert "nothing was changed for this one" in message
    bad_after = IntegrationSecret.objects.get(pk=bad.pk)
    assert (bad_after.ciphertext, bad_after.key_id) == (bad.ciphertext, bad.key_id)
    # Everything before it is done; everything after it is untouched (and still readable).
    new_id = vault.primary_key_id()
    assert set(IntegrationSecret.objects.filter(pk__in=good).values_list("key_id", flat=True)) == {
        new_id
    }
    assert new_id not in set(
        IntegrationSecret.objects.filter(pk__in=later).values_list("key_id", flat=True)
    )
    event = AuditEvent.objects.get(action="integrations.rotate_keys")
    assert event.data == {"rotated": 250, "failed": "apify.token"}

    # The admin sets the lost secret again; the rotation resumes where it stopped.
    update_integration("apify", actor=Actor.system(), secrets={"token": "fresh"})
    assert rotate("--batch-size", "100") == (
        "re-encrypted 50 secrets under the first key (251 already were; 301 in total)"
    )
    fernet_keys("new")
    for pk, plaintext in {**good, **later}.items():
        assert vault.decrypt(IntegrationSecret.objects.get(pk=pk).ciphertext) == plaintext
    assert environment_for(["apify"])[0] == {"APIFY_TOKEN": "fresh"}


def test_it_resumes_an_interrupted_rotation(db, fernet_keys):
    """An interruption leaves whole batches done and the rest as they were; the next run
    only does the rest."""
    fernet_keys("old")
    expected = plant(300)
    fernet_keys("new", "old")
    # Interrupt: the first two batches of 100 are committed, then the process dies. Here
    # the rows are rotated as those batches would have been.
    first = list(IntegrationSecret.objects.order_by("pk")[:200])
    for row in first:
        row.ciphertext, row.key_id = vault.rotate(row.ciphertext)
    IntegrationSecret.objects.bulk_update(first, ["ciphertext", "key_id"])
    assert rotate("--batch-size", "100") == (
        "re-encrypted 100 secrets under the first key (200 already were; 300 in total)"
    )
    fernet_keys("new")
    assert {
        row.pk: vault.decrypt(row.ciphertext) for row in IntegrationSecret.objects.all()
    } == expected


def test_it_rotates_secrets_stored_before_key_ids_existed(db, fernet_keys):
    fernet_keys("old")
    plant(5)
    IntegrationSecret.objects.update(key_id="")
    fernet_keys("new", "old")
    assert rotate().startswith("re-encrypted 5 secrets")


def test_it_rotates_the_sealed_inputs_of_queued_runs(db, fernet_keys, make_tool):
    from tools_app.models import Run

    fernet_keys("old")
    tool = make_tool("sealed_tool")
    sealed, _ = vault.encrypt('{"password": "p"}')
    run = Run.objects.create(
        tool=tool, version=tool.published_version, via="api", sealed_params=sealed
    )
    fernet_keys("new", "old")
    rotate()
    fernet_keys("new")
    run.refresh_from_db()
    assert vault.decrypt(run.sealed_params) == '{"password": "p"}'


def test_it_refuses_a_broken_key_list(db, settings):
    settings.CONSOLE_ENCRYPTION_KEYS = ["nonsense"]
    with pytest.raises(CommandError, match="key #1 is not a valid Fernet key"):
        rotate()


def test_it_refuses_a_bad_batch_size(db, fernet_keys):
    fernet_keys("a")
    with pytest.raises(SystemExit) as caught:
        rotate("--batch-size", "0")
    assert caught.value.code == 2
