"""Helpers for the editor tests: submit the editor's form the way a browser would."""

from __future__ import annotations

import io
import zipfile
from html.parser import HTMLParser

from django.test import Client


class _FormParser(HTMLParser):
    """The successful controls of one <form id=...>: what a browser would submit."""

    def __init__(self, form_id: str) -> None:
        super().__init__(convert_charrefs=True)
        self.form_id = form_id
        self.inside = False
        self.fields: list[tuple[str, str]] = []
        self._textarea: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.inside = a.get("id") == self.form_id
        if not self.inside:
            return
        if tag == "input" and a.get("name"):
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio") and "checked" not in a:
                return
            if kind in ("submit", "button", "file"):
                return
            self.fields.append((a["name"], a.get("value", "on" if kind == "checkbox" else "")))
        elif tag == "textarea" and a.get("name"):
            self._textarea = a["name"]
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "textarea" and self._textarea is not None:
            text = "".join(self._text)
            # HTML drops one newline right after <textarea>; browsers submit CRLF breaks.
            text = text.replace("\r\n", "\n").replace("\r", "\n").removeprefix("\n")
            text = text.replace("\n", "\r\n")
            self.fields.append((self._textarea, text))
            self._textarea = None
        elif tag == "form":
            self.inside = False


def form_data(html: str, form_id: str = "tool-form") -> dict[str, str]:
    parser = _FormParser(form_id)
    parser.feed(html)
    data = dict(parser.fields)
    assert data, f"no form #{form_id} in the page"
    return data


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
