"""Host paths the sandbox may read through integrations' `path` fields."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tools_app.integrations.fields import fields_of
from tools_app.models import Integration


def readable_paths_for(slugs: Iterable[str]) -> list[Path]:
    """Host paths a tool declaring `slugs` may read: the values of the declared, enabled
    integrations' `path` fields (e.g. the e-mail database). The runner binds them
    read-only into the sandbox, which otherwise sees only the tool's own folder."""
    paths: list[Path] = []
    for integration in Integration.objects.enabled().filter(slug__in=list(slugs)):
        for spec in fields_of(integration):
            value = (integration.values or {}).get(spec.name) or spec.default
            if spec.kind == "path" and not spec.secret and value:
                paths.append(Path(value))
    return paths
