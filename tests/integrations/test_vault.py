"""The vault: Fernet/MultiFernet encryption, the development key file, clear errors."""

from __future__ import annotations

import stat
import threading

import pytest

from tests.support import integrations as support
from tools_app.integrations import vault

fernet_keys = support.fernet_keys
new_key = support.new_key


def test_it_round_trips_text(fernet_keys):
    fernet_keys("A")
    for text in ["sk-live-123", "ünïcødé ✓ 🔑", "x" * 65536, " spaced \n"]:
        token, key_id = vault.encrypt(text)
        assert text not in token
        assert vault.decrypt(token) == text
        assert key_id == vault.primary_key_id()


def test_it_makes_a_different_token_each_time(fernet_keys):
    fernet_keys("A")
    assert vault.encrypt("same")[0] != vault.encrypt("same")[0]


def test_it_encrypts_with_the_first_key_and_decrypts_with_any(fernet_keys):
    fernet_keys("A")
    old_token, old_id = vault.encrypt("under A")
    fernet_keys("B", "A")
    new_token, new_id = vault.encrypt("under B")
    assert old_id != new_id
    assert vault.decrypt(old_token) == "under A"
    assert vault.decrypt(new_token) == "under B"
    fernet_keys("B")
    assert vault.decrypt(new_token) == "under B"
    with pytest.raises(vault.VaultError):
        vault.decrypt(old_token)


def test_it_raises_a_clear_error_never_empty_or_ciphertext(fernet_keys):
    fernet_keys("A")
    token, _ = vault.encrypt("plain-value-42")
    fernet_keys("B")
    with pytest.raises(vault.VaultError) as caught:
        vault.decrypt(token, what="secret searxng.token")
    message = str(caught.value)
    assert "secret searxng.token cannot be decrypted" in message
    assert "CONSOLE_ENCRYPTION_KEYS" in message
    assert token not in message and "plain-value-42" not in message
    for garbage in ["", "not a token", "gAAAA" + "x" * 80]:
        with pytest.raises(vault.VaultError):
            vault.decrypt(garbage)


def test_it_rotates_a_token_to_the_first_key(fernet_keys):
    fernet_keys("A")
    token, _ = vault.encrypt("value")
    fernet_keys("B", "A")
    rotated, key_id = vault.rotate(token)
    assert key_id == vault.primary_key_id()
    fernet_keys("B")
    assert vault.decrypt(rotated) == "value"


def test_it_names_an_invalid_key_without_showing_it(settings):
    good = new_key()
    settings.CONSOLE_ENCRYPTION_KEYS = [good, "not-a-fernet-key-but-secret"]
    with pytest.raises(vault.KeyConfigurationError) as caught:
        vault.encrypt("x")
    assert "CONSOLE_ENCRYPTION_KEYS: key #2 is not a valid Fernet key" in str(caught.value)
    assert "not-a-fernet-key-but-secret" not in str(caught.value)
    assert good not in str(caught.value)


def test_it_generates_a_private_development_key_file(settings):
    settings.CONSOLE_ENCRYPTION_KEYS = []
    path = settings.ENCRYPTION_KEY_FILE
    assert not path.exists()
    token, _ = vault.encrypt("dev")
    assert vault.is_development_key()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert vault.decrypt(token) == "dev"
    # A new process (an empty cache) reads the same file, it does not make a new key.
    vault.clear_cache()
    assert vault.decrypt(token) == "dev"
    assert [p.name for p in path.parent.iterdir() if "encryption" in p.name] == [path.name]


def test_it_creates_the_development_key_once_under_races(settings):
    settings.CONSOLE_ENCRYPTION_KEYS = []
    path = settings.ENCRYPTION_KEY_FILE
    found: list[str] = []
    barrier = threading.Barrier(8)

    def create() -> None:
        barrier.wait()
        found.append(vault._read_or_create_key_file(path))

    threads = [threading.Thread(target=create) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(found)) == 1 and found[0] == path.read_text().strip()
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_it_reports_an_unreadable_key_file(settings):
    settings.CONSOLE_ENCRYPTION_KEYS = []
    settings.ENCRYPTION_KEY_FILE.mkdir()  # a folder where the key file should be
    with pytest.raises(vault.KeyConfigurationError) as caught:
        vault.encrypt("x")
    assert "development key file" in str(caught.value)
    assert "cannot be read" in str(caught.value)


def test_it_reports_a_corrupt_key_file(settings):
    settings.CONSOLE_ENCRYPTION_KEYS = []
    settings.ENCRYPTION_KEY_FILE.write_text("garbage\n")
    with pytest.raises(vault.KeyConfigurationError) as caught:
        vault.encrypt("x")
    assert str(settings.ENCRYPTION_KEY_FILE) in str(caught.value)
    assert "garbage" not in str(caught.value)


def test_it_fingerprints_keys_stably(fernet_keys):
    a, b = fernet_keys("A", "B")
    assert vault.key_id(a) == vault.key_id(a) != vault.key_id(b)
    assert len(vault.key_id(a)) == vault.KEY_ID_LENGTH
    assert vault.known_key_ids() == (vault.key_id(a), vault.key_id(b))
