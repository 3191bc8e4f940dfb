"""Encryption of secrets at rest (docs/integrations.md). No HTTP concerns here.

Keys come from settings.CONSOLE_ENCRYPTION_KEYS (env `CONSOLE_ENCRYPTION_KEYS`,
comma-separated Fernet keys; the first one encrypts, all of them decrypt). When none are
configured, a development key is generated once into settings.ENCRYPTION_KEY_FILE (mode
0600, created atomically) and the console shows a warning banner while it is in use.

Every ciphertext is stored together with the `key_id` of the key that made it: a short
keyed fingerprint that reveals nothing about the key, but lets checks count secrets that
no configured key can decrypt, or that still wait for rotation, with one query instead of
decrypting every secret on every page.

A token that cannot be decrypted raises VaultError: never an empty string, never the
ciphertext. Messages never contain keys or plaintext.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core import checks
from django.db import DatabaseError
from django.views.decorators.debug import sensitive_variables

from tools_app.config_warnings import ConsoleWarning, Level, warning_source

KEY_ID_LENGTH = 16
# How many stored secrets the system check actually decrypts (the count by key_id covers
# all of them; the sample proves the fingerprints are not lying).
CHECK_SAMPLE = 20


class VaultError(Exception):
    """A secret cannot be encrypted or decrypted. The message is safe to show."""


class KeyConfigurationError(VaultError):
    """The configured keys are unusable (bad syntax, unreadable key file)."""


@dataclass(frozen=True)
class Keyring:
    fernet: MultiFernet
    key_ids: tuple[str, ...]  # same order as the keys; key_ids[0] encrypts
    development: bool
    source: str  # "CONSOLE_ENCRYPTION_KEYS" or the key file's path

    @property
    def primary_id(self) -> str:
        return self.key_ids[0]


_lock = threading.Lock()
_cache: dict[tuple, Keyring] = {}


def clear_cache() -> None:
    """Forget loaded keys (after the key file or environment changed)."""
    _cache.clear()


@sensitive_variables()
def key_id(key: bytes | str) -> str:
    """A public fingerprint of a Fernet key: HMAC of a constant under the key."""
    raw = key.encode("ascii") if isinstance(key, str) else key
    return hmac.new(raw, b"tool-console key id v1", hashlib.sha256).hexdigest()[:KEY_ID_LENGTH]


@sensitive_variables()
def _parse_keys(keys: list[str], source: str) -> list[Fernet]:
    fernets = []
    for index, key in enumerate(keys, start=1):
        try:
            fernets.append(Fernet(key.strip().encode("ascii")))
        except (ValueError, UnicodeError, TypeError):
            raise KeyConfigurationError(
                f"{source}: key #{index} is not a valid Fernet key "
                "(expected 32 url-safe base64-encoded bytes, as made by "
                "`python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'`)"
            ) from None
    return fernets


def _key_file() -> Path:
    return Path(settings.ENCRYPTION_KEY_FILE)


@sensitive_variables()
def _read_or_create_key_file(path: Path) -> str:
    """The development key, generated on first use. Creation is atomic: the key is written
    to a private temporary file, then hard-linked into place, which fails if another
    process won the race (then its complete file is read)."""
    try:
        return path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        pass
    except (OSError, UnicodeError) as exc:
        raise KeyConfigurationError(
            f"development key file {path} cannot be read ({type(exc).__name__}: "
            f"{getattr(exc, 'strerror', None) or 'not ASCII'})"
        ) from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(Fernet.generate_key().decode("ascii") + "\n")
                f.flush()
                os.fsync(f.fileno())
            # FileExistsError: another process created it first, so use theirs.
            with contextlib.suppress(FileExistsError):
                os.link(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
        return path.read_text(encoding="ascii").strip()
    except OSError as exc:
        raise KeyConfigurationError(
            f"development key file {path} cannot be created ({exc.strerror or exc})"
        ) from None


def keyring() -> Keyring:
    """The configured keys; raises KeyConfigurationError naming the problem."""
    configured = tuple(settings.CONSOLE_ENCRYPTION_KEYS or ())
    cache_key = (configured, str(_key_file()) if not configured else "")
    ring = _cache.get(cache_key)
    if ring is not None:
        return ring
    with _lock:
        if configured:
            keys = list(configured)
            source = "CONSOLE_ENCRYPTION_KEYS"
        else:
            keys = [_read_or_create_key_file(_key_file())]
            source = str(_key_file())
        fernets = _parse_keys(keys, source)
        ring = Keyring(
            fernet=MultiFernet(fernets),
            key_ids=tuple(key_id(k.strip()) for k in keys),
            development=not configured,
            source=source,
        )
        _cache[cache_key] = ring
        return ring


# The development key's one-line banner text.
DEVELOPMENT_KEY_SHORT = "Development key in use"


def is_development_key() -> bool:
    """True while secrets are encrypted with the generated development key file."""
    return not settings.CONSOLE_ENCRYPTION_KEYS


def primary_key_id() -> str:
    return keyring().primary_id


def known_key_ids() -> tuple[str, ...]:
    return keyring().key_ids


@sensitive_variables()
def encrypt(plaintext: str) -> tuple[str, str]:
    """Encrypt under the first key: returns (token, key_id)."""
    if not isinstance(plaintext, str):
        raise TypeError("encrypt() takes a str")
    ring = keyring()
    token = ring.fernet.encrypt(plaintext.encode("utf-8")).decode("ascii")
    return token, ring.primary_id


@sensitive_variables()
def decrypt(token: str, *, what: str = "secret") -> str:
    """Decrypt with any configured key. Raises VaultError, never returns "" or the token."""
    ring = keyring()
    try:
        data = ring.fernet.decrypt(token.encode("ascii"))
    except (InvalidToken, UnicodeError, AttributeError, TypeError):
        raise VaultError(
            f"{what} cannot be decrypted with the configured encryption keys "
            f"({_describe(ring)}); restore the key it was encrypted with "
            "in CONSOLE_ENCRYPTION_KEYS, or set the secret again"
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise VaultError(f"{what} decrypted to bytes that are not UTF-8") from None


@sensitive_variables()
def rotate(token: str, *, what: str = "secret") -> tuple[str, str]:
    """Re-encrypt a token under the first key: returns (token, key_id)."""
    ring = keyring()
    try:
        new = ring.fernet.rotate(token.encode("ascii")).decode("ascii")
    except (InvalidToken, UnicodeError, AttributeError, TypeError):
        raise VaultError(
            f"{what} cannot be decrypted with the configured encryption keys "
            f"({_describe(ring)}); nothing was changed for it"
        ) from None
    return new, ring.primary_id


def can_decrypt(token: str) -> bool:
    try:
        keyring().fernet.decrypt(token.encode("ascii"))
    except (InvalidToken, UnicodeError, AttributeError, TypeError):
        return False
    return True


def _describe(ring: Keyring) -> str:
    if ring.development:
        return "the development key file"
    count = len(ring.key_ids)
    return f"{count} key{'s' if count != 1 else ''} in CONSOLE_ENCRYPTION_KEYS"


# ----------------------------------------------------------------------------------------
# Health: what checks and the banner report.


@dataclass(frozen=True)
class SecretHealth:
    total: int
    unknown_key: int  # encrypted under a key that is not configured
    not_primary: int  # readable, but still under an older key (rotation pending)


def secret_health() -> SecretHealth:
    """Counts by key fingerprint, of integration secrets and sensitive tool presets (both
    sealed here and rotated together): one query each, no decryption."""
    from django.db.models import Count

    from tools_app.models import IntegrationSecret, OAuthConnection, ToolPreset

    ring = keyring()
    counts: dict[str, int] = {}
    for rows in (
        IntegrationSecret.objects.values_list("key_id"),
        ToolPreset.objects.filter(sensitive=True).values_list("key_id"),
        OAuthConnection.objects.values_list("key_id"),
    ):
        for kid, n in rows.annotate(n=Count("id")).order_by():
            counts[kid] = counts.get(kid, 0) + n
    total = sum(counts.values())
    unknown = sum(n for kid, n in counts.items() if kid not in ring.key_ids)
    not_primary = sum(
        n for kid, n in counts.items() if kid in ring.key_ids and kid != ring.primary_id
    )
    return SecretHealth(total=total, unknown_key=unknown, not_primary=not_primary)


def undecryptable_sample(limit: int = CHECK_SAMPLE) -> list[str]:
    """Decrypt up to `limit` recent secrets and sensitive presets; return the names of
    those that fail ("slug.field", "preset tool.input")."""
    from tools_app.models import IntegrationSecret, ToolPreset

    recent: list[tuple[datetime, str, str]] = [
        (secret.set_at, f"{secret.integration.slug}.{secret.field}", secret.ciphertext)
        for secret in IntegrationSecret.objects.select_related("integration").order_by(
            "-set_at", "-id"
        )[:limit]
    ]
    recent += [
        (preset.set_at, f"preset {preset.tool.name}.{preset.input}", preset.ciphertext)
        for preset in ToolPreset.objects.filter(sensitive=True)
        .select_related("tool")
        .order_by("-set_at", "-id")[:limit]
    ]
    recent.sort(key=lambda row: row[0], reverse=True)
    return [name for _at, name, token in recent[:limit] if not can_decrypt(token)]


def _key_problems() -> list[str]:
    try:
        keyring()
    except KeyConfigurationError as exc:
        return [str(exc)]
    return []


def _stored_secret_problems(*, sample: bool) -> tuple[list[str], list[str]]:
    """(errors, warnings) about stored secrets; empty when the database is not ready."""
    try:
        health = secret_health()
        failing = undecryptable_sample() if sample else []
    except (DatabaseError, KeyConfigurationError):
        return [], []
    errors, warnings = [], []
    if health.unknown_key:
        errors.append(
            f"{health.unknown_key} stored secret{'s' if health.unknown_key != 1 else ''} "
            "cannot be decrypted: encrypted with a key that is not in "
            f"{'CONSOLE_ENCRYPTION_KEYS' if not is_development_key() else 'the key file'}"
            " (add the old key back, after the new one, then run "
            "`manage.py rotate_encryption_keys`)"
        )
    elif failing:
        errors.append(
            "stored secrets cannot be decrypted with the configured keys: " + ", ".join(failing)
        )
    if health.not_primary:
        warnings.append(
            f"{health.not_primary} stored secret{'s' if health.not_primary != 1 else ''} "
            "still encrypted with an older key: run `manage.py rotate_encryption_keys`"
        )
    return errors, warnings


@checks.register("tools_app")
def check_encryption_keys(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """System check errors for missing or wrong keys (E101 key config, E102 secrets)."""
    messages: list[checks.CheckMessage] = [
        checks.Error(
            problem,
            hint="Fix CONSOLE_ENCRYPTION_KEYS or the key file; secrets cannot be used until then.",
            id="tools_app.E101",
        )
        for problem in _key_problems()
    ]
    if messages:
        return messages
    errors, _warnings = _stored_secret_problems(sample=True)
    messages += [
        checks.Error(
            problem,
            hint="Runs needing these secrets fail until the key is restored. If it is lost, "
            "set the secrets again (manage.py set_integration, or the console's edit page).",
            id="tools_app.E102",
        )
        for problem in errors
    ]
    return messages


@warning_source
def encryption_warnings() -> list[ConsoleWarning]:
    """Banner lines: development key, key problems, secrets no key decrypts, rotation due."""
    problems = _key_problems()
    if problems:
        return [
            ConsoleWarning(f"Encryption keys: {p}", "Encryption keys do not load", Level.ERROR)
            for p in problems
        ]
    warnings = []
    if is_development_key():
        warnings.append(
            ConsoleWarning(
                "Secrets are encrypted with a generated development key "
                f"({_key_file().name} in the state directory). Set CONSOLE_ENCRYPTION_KEYS "
                "before storing production credentials.",
                DEVELOPMENT_KEY_SHORT,
            )
        )
        try:
            loose = _key_file().stat().st_mode & 0o077
        except OSError:
            loose = 0
        if loose:
            warnings.append(
                ConsoleWarning(
                    f"The development key file {_key_file().name} is readable by other "
                    "users: chmod 600 it.",
                    "The key file is readable by others",
                )
            )
    errors, rotation = _stored_secret_problems(sample=False)
    warnings += [
        ConsoleWarning(f"Encryption keys: {e}", "Stored secrets cannot be decrypted", Level.ERROR)
        for e in errors
    ]
    warnings += [ConsoleWarning(r, "Secrets wait for key rotation") for r in rotation]
    return warnings
