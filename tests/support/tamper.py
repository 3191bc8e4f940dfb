"""Database edits that bypass the console (issue 26's attacks): a queryset update of a
published version, as SQL or a restored dump would make it. No signal fires, no save()
runs, the tool's `updated_at` stays: only the signature can tell."""

from __future__ import annotations

from tools_app.models import Tool, ToolVersion
from tools_app.models.tools import decode_files, encode_files


def published(name: str) -> ToolVersion:
    version = Tool.objects.get(name=name).published_version
    assert version is not None
    return version


def edit_description(name: str, description: str) -> None:
    """What a model reads changes; files and signature stay."""
    version = published(name)
    manifest = {**version.manifest, "description": description}
    ToolVersion.objects.filter(pk=version.pk).update(manifest=manifest)


def edit_file(name: str, path: str, data: bytes) -> None:
    """One stored file changes; manifest and signature stay."""
    version = published(name)
    files = {**decode_files(version.files), path: data}
    ToolVersion.objects.filter(pk=version.pk).update(files=encode_files(files))
