"""Forms of the tool's presets page (admins) and of its samples page (developers)."""

from __future__ import annotations

from typing import Any

from django import forms

from tools_app.catalog import presets
from tools_app.catalog.versions import SAMPLE_NAME_RE
from tools_app.forms.runs import parse_json_field
from tools_app.lib import nesting
from tools_app.manifest.inputs import InputSpec

MAX_SAMPLE_BODY = 1024 * 1024


class PresetForm(forms.Form):
    """Set one user-only input's preset. The value is typed as text: strings as they are,
    other types as JSON. Never pre-filled: a sensitive value is write-only."""

    input = forms.ChoiceField(label="Input")
    value = forms.CharField(
        label="Value",
        strip=False,
        max_length=64 * 1024,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false", "autocomplete": "off"}),
        help_text="Text for string inputs; one item per line for list inputs (string[], "
        "integer[], ...); JSON for numbers, booleans and json inputs.",
    )
    sensitive = forms.BooleanField(
        label="Sensitive",
        required=False,
        help_text="Encrypted, never shown again, masked in run records. Always on for "
        "inputs declared sensitive.",
    )

    def __init__(self, *args, inputs: dict[str, InputSpec], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.inputs = inputs
        self.fields["input"].choices = [(name, name) for name in inputs]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        spec = self.inputs.get(data.get("input", ""))
        if spec is None or "value" not in data:
            return data
        if spec.type not in ("string", "enum") and data["value"].lstrip()[:1] in ("[", "{"):
            # The nesting cap with its path, even where the parser runs out of stack.
            try:
                nesting.loads(data["value"], root=f"params.{spec.name}", level=2)
            except nesting.TooDeep as exc:
                self.add_error("value", str(exc))
                return data
            except ValueError:
                pass  # parse_value words the other JSON problems
        try:
            data["typed"] = presets.parse_value(spec, data["value"])
        except presets.PresetError as exc:
            self.add_error("value", str(exc))
        return data


class ClearPresetForm(forms.Form):
    input = forms.CharField(max_length=64)


class PresetTestRunsForm(forms.Form):
    allow = forms.BooleanField(required=False)


class DocumentedSampleForm(forms.Form):
    """A response example pasted from an API's documentation, with where it came from."""

    source = forms.URLField(
        label="Documentation URL",
        max_length=2000,
        assume_scheme="https",
        help_text="The page that shows this response, so a reviewer can check it.",
    )
    name = forms.CharField(
        label="Sample name",
        max_length=64,
        help_text="Saved as samples/<name>.json (a-z, 0-9, _ and -).",
    )
    status = forms.IntegerField(label="HTTP status", initial=200, min_value=100, max_value=599)
    body = forms.CharField(
        label="Response body (JSON)",
        strip=True,
        max_length=MAX_SAMPLE_BODY,
        widget=forms.Textarea(
            attrs={"rows": 12, "spellcheck": "false", "class": "code", "data-json-editor": ""}
        ),
    )

    def clean_source(self) -> str:
        source = self.cleaned_data["source"]
        if not source.lower().startswith(("https://", "http://")):
            raise forms.ValidationError("Give the documentation's http(s) URL.")
        return source

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip().lower()
        if not SAMPLE_NAME_RE.fullmatch(name):
            raise forms.ValidationError("Use a-z, 0-9, _ and - (starting with a letter or digit).")
        return name

    def clean_body(self) -> Any:
        # The body is level 2 of the sample file, as read_samples reads it.
        return parse_json_field("Response body", self.cleaned_data["body"], root="body", level=2)
