"""Forms of the OpenAPI import page: read a document (upload or paste), then choose its
operations. The second step carries the document back in a hidden field, base64-encoded
(a browser would rewrite its line breaks otherwise), so the page keeps no state between
the steps."""

from __future__ import annotations

import base64
import binascii

from django import forms

from tools_app.http_tools.openapi.document import MAX_DOCUMENT, fetch_document

HELP_SERVER = (
    "The API's base URL (https://api.example.com/v1), when the document's server is "
    "relative, templated or not the one to call. Leave empty to use the document's."
)


def _mib(size: int) -> str:
    return f"{size / 1048576:g} MiB"


class OpenApiReadForm(forms.Form):
    document = forms.FileField(
        label="OpenAPI document",
        required=False,
        help_text=f"OpenAPI 3.0 or 3.1, JSON or YAML, at most {_mib(MAX_DOCUMENT)}.",
        widget=forms.ClearableFileInput(
            attrs={"accept": ".json,.yaml,.yml,application/json,application/yaml"}
        ),
    )
    text = forms.CharField(
        label="Or paste it",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false", "autocomplete": "off"}),
    )
    url = forms.URLField(
        label="Or read it from a URL",
        required=False,
        assume_scheme="https",
        help_text="Fetched by the console through its egress policy (a service on your "
        "network only where an admin allowed it on the System page).",
    )
    prefix = forms.RegexField(
        regex=r"^[a-z][a-z0-9_]{0,30}$",
        required=False,
        help_text="Put before every tool name (petstore -> petstore_find_pets).",
        error_messages={"invalid": "Lowercase letters, digits and _, starting with a letter."},
    )
    server = forms.URLField(
        label="Server URL", required=False, assume_scheme="https", help_text=HELP_SERVER
    )

    def clean_document(self):
        upload = self.cleaned_data.get("document")
        if upload and upload.size > MAX_DOCUMENT:  # by its size, before a byte is parsed
            raise forms.ValidationError(
                f"The file is {_mib(upload.size)}; at most {_mib(MAX_DOCUMENT)} are read."
            )
        return upload

    def clean_text(self) -> str:
        text = self.cleaned_data.get("text") or ""
        if len(text) > MAX_DOCUMENT:
            raise forms.ValidationError(f"The text is longer than {_mib(MAX_DOCUMENT)}.")
        return text

    def clean(self):
        data = super().clean()
        given = [bool(data.get("document")), bool((data.get("text") or "").strip())]
        given.append(bool(data.get("url")))
        if given.count(True) != 1 and not self.errors:
            raise forms.ValidationError(
                "Upload a document, paste one or give its URL (one of them)."
            )
        return data

    def document_bytes(self) -> tuple[bytes, str]:
        """The document and where it came from. A URL is fetched here (OpenApiError when
        it cannot be)."""
        upload = self.cleaned_data.get("document")
        if upload:
            return upload.read(MAX_DOCUMENT + 1), upload.name
        if url := self.cleaned_data.get("url"):
            return fetch_document(url), url
        return self.cleaned_data["text"].encode("utf-8"), "pasted document"


def encode_source(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode_source(text: str) -> bytes | None:
    """The document a choosing form carried, or None when it is not valid base64."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None


class OpenApiChooseForm(forms.Form):
    source = forms.CharField(widget=forms.HiddenInput, max_length=MAX_DOCUMENT * 4 // 3 + 4)
    origin = forms.CharField(widget=forms.HiddenInput, max_length=200)
    prefix = forms.CharField(widget=forms.HiddenInput, required=False, max_length=31)
    server = forms.CharField(widget=forms.HiddenInput, required=False, max_length=2048)
    operations = forms.MultipleChoiceField(
        label="Operations", widget=forms.CheckboxSelectMultiple, choices=()
    )

    def __init__(self, *args, choices: list[tuple[str, str]] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["operations"].choices = choices
