"""Helpers for the editor tests: submit the editor's form the way a browser would."""

from __future__ import annotations

import io
import zipfile

from django.test import Client

from tests.support.forms import form_data

__all__ = ["editor_data", "file_index", "form_data", "zip_of"]


def editor_data(client: Client, name: str) -> dict[str, str]:
    """The editor form of tool `name`, as the page renders it."""
    response = client.get(f"/tools/{name}/edit/")
    assert response.status_code == 200
    return form_data(response.content.decode())


def file_index(data: dict[str, str], path: str) -> int:
    for key, value in data.items():
        if key.startswith("files-") and key.endswith("-path") and value == path:
            return int(key.split("-")[1])
    raise KeyError(path)


def zip_of(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()
