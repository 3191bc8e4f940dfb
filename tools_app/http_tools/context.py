"""The ValidationContext that checking a TOOL.md needs (httpchecks: the request boundary
and who fills a hidden input), read from this console's settings and database. Every
caller of folder.validate_files (editor, saving and publishing, sync, imports,
validate_tools) and the http-tool executor build it here, so the parser itself stays free
of Django state."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from tools_app.egress import config as egress_config
from tools_app.http_tools.checks import ValidationContext
from tools_app.integrations.fields import fields_of
from tools_app.integrations.types import FieldSpec, integration_types
from tools_app.models import Integration


def validation_context() -> ValidationContext:
    """The settings now; the database (the integrations, one query, and the System page's
    exceptions, another) once an http tool's checks first look, so checking code tools
    reads nothing, and `validate_tools` needs no database for them."""

    @cache
    def integrations() -> list[Integration]:
        return list(Integration.objects.all())

    def fields() -> dict[str, frozenset[str]]:
        found = {slug: _names(itype.fields) for slug, itype in integration_types().items()}
        # An integration's own fields win over those of a type of the same slug.
        return found | {i.slug: _names(fields_of(i)) for i in integrations()}

    return ValidationContext(
        allowed_hosts=tuple(settings.ALLOWED_HOSTS),
        console_ports=console_ports(),
        network_allow=settings.TOOL_NETWORK_ALLOW,
        dns=settings.TOOL_DNS,
        admin_entries=_Later(egress_config.admin_entries),
        integration_urls=_LaterMap(
            lambda: egress_config.integration_urls(i for i in integrations() if i.enabled)
        ),
        confining=_Later(lambda: egress_config.confining(i for i in integrations() if i.enabled)),
        integration_fields=_LaterMap(fields),
    )


def _names(specs: Iterable[FieldSpec]) -> frozenset[str]:
    """The names a hidden input may take to be filled by these fields: their names and
    lower-cased variables."""
    specs = tuple(specs)
    return frozenset({spec.name for spec in specs} | {spec.env.lower() for spec in specs})


def console_ports() -> frozenset[int]:
    """The ports the console itself answers on: CONSOLE_PUBLIC_URL's, else dev.py's 8000."""
    url = urlsplit(settings.PUBLIC_URL) if settings.PUBLIC_URL else None
    if url is None or not url.hostname:
        return frozenset({8000})
    try:
        return frozenset({url.port or (443 if url.scheme == "https" else 80)})
    except ValueError:
        return frozenset({8000})


class _Later(Sequence):
    """A sequence read when first used, then kept (the context is one moment's view)."""

    def __init__(self, load: Callable[[], Iterable[Any]]) -> None:
        self._load = cache(lambda: tuple(load()))

    def __getitem__(self, index):
        return self._load()[index]

    def __len__(self) -> int:
        return len(self._load())


class _LaterMap(Mapping):
    """A mapping read when first used, then kept."""

    def __init__(self, load: Callable[[], Mapping[str, Any]]) -> None:
        self._load = cache(lambda: dict(load()))

    def __getitem__(self, key: str) -> Any:
        return self._load()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())
