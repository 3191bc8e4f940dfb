"""Validation of integration values, names and secrets (no database access)."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from django.views.decorators.debug import sensitive_variables

from tools_app.integrations.paths import protected_path_problem

# An integration's slug is what tool manifests name it by: one pattern for both.
from tools_app.manifest.toolmd import SLUG_RE

TYPE_SLUG_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")
FIELD_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")
ENV_RE = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")
# An integration field's `kind`.
FIELD_KINDS = ("string", "url", "path")
METHODS = ("GET", "HEAD", "POST")
TYPE_KEYS = ("label", "description", "custom", "fields", "test", "oauth", "egress")
# A type's `egress`: open (the default) adds its URLs' hosts to what a run may reach;
# confined makes them all a run granted it may reach (docs/egress.md).
EGRESS_MODES = ("open", "confined")
FIELD_KEYS = ("name", "label", "env", "kind", "secret", "required", "default", "help")
TEST_KEYS = ("method", "url", "headers", "body", "expect")

MAX_TYPE_FILE = 64 * 1024
MAX_SECRET = 64 * 1024  # bytes, UTF-8
MAX_VALUE = 8 * 1024
MAX_URL = 2048
MAX_PATH = 4096
MAX_FIELDS = 50
MAX_LABEL = 200
TEST_TIMEOUT = 10.0
EXCERPT_CHARS = 300

# Paths that the integration pages use themselves.
RESERVED_SLUGS = frozenset({"new", "environment", "test", "oauth"})
# Variables an integration may not set: they would change how the tool's runtime behaves.
RESERVED_ENV = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "TMPDIR", "TMP", "TEMP",
        "LANG", "LANGUAGE", "TERM", "TZ", "IFS", "ENV", "BASH_ENV", "PS4", "CDPATH",
        "GLOBIGNORE", "SHELLOPTS", "BASHOPTS", "PROMPT_COMMAND", "DATA_PATH", "PI_TOOLS_DIRS",
    }
)  # fmt: skip
RESERVED_ENV_PREFIXES = (
    "LD_", "DYLD_", "LC_", "NODE_", "NPM_", "PYTHON", "PERL", "RUBY", "INPUT_", "TOOL_",
    "CONSOLE_", "DJANGO_", "CELERY_", "BASH_FUNC_",
)  # fmt: skip


def env_problem(env: str) -> str | None:
    """Why `env` cannot be an integration's variable name, or None."""
    if not ENV_RE.fullmatch(env):
        return (
            f"{env!r} is not a valid environment variable name "
            "(capital letters, digits and _, not starting with a digit)"
        )
    if env in RESERVED_ENV or env.startswith(RESERVED_ENV_PREFIXES):
        return f"{env!r} is reserved for the tool runtime"
    return None


def value_problem(kind: str, value: str) -> str | None:
    if "\x00" in value:
        return "must not contain NUL characters"
    if kind == "url":
        if len(value) > MAX_URL:
            return f"is longer than {MAX_URL} characters"
        return url_problem(value, FIELD_URL_SCHEMES)
    if kind == "path":
        if len(value) > MAX_PATH:
            return f"is longer than {MAX_PATH} characters"
        if not value.startswith("/"):
            return "must be an absolute path, e.g. /data/mail/index.sqlite3"
        if problem := protected_path_problem(value):
            return problem
        return None
    if len(value) > MAX_VALUE:
        return f"is longer than {MAX_VALUE // 1024} KiB"
    return None


_HOST_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9-]{1,63})*\.?")


HTTP_SCHEMES = ("http", "https")
# A url field may also hold a WebSocket endpoint (a browser's DevTools URL).
FIELD_URL_SCHEMES = (*HTTP_SCHEMES, "ws", "wss")


def url_problem(value: str, schemes: tuple[str, ...] = HTTP_SCHEMES) -> str | None:
    """http(s) URLs (or `schemes`) with a host; single-label hosts (http://searxng:8080, a
    container name) are fine. Credentials in the URL are refused: they belong in a secret
    field."""
    example = "must be an http:// or https:// URL"
    if others := [f"{scheme}://" for scheme in schemes if scheme not in HTTP_SCHEMES]:
        example += f" (or {' or '.join(others)})"
    example += ", e.g. https://search.example.org"
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        return example + " (no spaces)"
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return example
    if parts.scheme.lower() not in schemes or not parts.netloc:
        return example
    if parts.username is not None or parts.password is not None:
        return "must not contain a user name or password: put credentials in a secret field"
    host = parts.hostname or ""
    if not host or (port is not None and not 0 < port < 65536):
        return example
    if host.startswith("[") or ":" in host:
        try:
            ipaddress.IPv6Address(host.strip("[]"))
        except ValueError:
            return example
    elif not _HOST_RE.fullmatch(host):
        return example
    if "#" in value:
        return "must not contain a #fragment"
    return None


@sensitive_variables()
def secret_problem(value: str) -> str | None:
    if "\x00" in value:
        return "must not contain NUL characters"
    if len(value.encode("utf-8")) > MAX_SECRET:
        return f"is larger than {MAX_SECRET // 1024} KiB"
    return None


def slug_problem(slug: str) -> str | None:
    if not SLUG_RE.fullmatch(slug):
        return (
            f"{slug!r} is not a valid slug: lower-case letters, digits, _ and -, "
            "starting with a letter or digit, at most 64 characters"
        )
    if slug in RESERVED_SLUGS:
        return f"{slug!r} is reserved"
    return None


@sensitive_variables()
def _normalize_secret(value: str) -> str:
    # A secret pasted or piped with a trailing newline almost never means the newline.
    return value.rstrip("\r\n")
