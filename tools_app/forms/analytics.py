"""The analytics pages' GET forms: the window, and on a tool's page the version shown and
the one it is compared with. A value outside the choices is a form error (a 400 page)."""

from __future__ import annotations

from collections.abc import Sequence

from django import forms
from django.forms.utils import flatatt
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from tools_app.analytics.figures import DEFAULT_WINDOW, WINDOWS, Window


class Select(forms.Select):
    """Django's select, drawn without its templates: three selects through the form
    renderer cost more than the analytics they choose (bench/analytics.py)."""

    def render(self, name, value, attrs=None, renderer=None) -> SafeString:
        attrs = self.build_attrs(self.attrs, attrs)
        wanted = self.format_value(value)
        picked = False
        options = []
        for option, label in self.choices:
            option = "" if option is None else str(option)
            selected = not picked and option in wanted
            picked = picked or selected
            options.append((option, " selected" if selected else "", label))
        return format_html(
            '<select name="{}"{}>{}</select>',
            name,
            flatatt(attrs),
            format_html_join("", '<option value="{}"{}>{}</option>', options),
        )


class WindowForm(forms.Form):
    window = forms.ChoiceField(
        required=False,
        label="Window",
        choices=[(w.key, f"Last {w.label}") for w in WINDOWS.values()],
        widget=Select,
    )

    def __init__(self, data=None, *args, **kwargs) -> None:
        # The select shows the window in use, the default one included.
        if data is not None and not data.get("window"):
            data = data.copy()
            data["window"] = DEFAULT_WINDOW
        super().__init__(data, *args, **kwargs)

    def clean_window(self) -> Window:
        return WINDOWS[self.cleaned_data["window"] or DEFAULT_WINDOW]


class ToolAnalyticsForm(WindowForm):
    version = forms.TypedChoiceField(required=False, coerce=int, empty_value=None, widget=Select)
    compare = forms.TypedChoiceField(
        required=False, coerce=int, empty_value=None, label="Compare with", widget=Select
    )

    def __init__(self, *args, numbers: Sequence[int], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        versions = [(str(n), f"v{n}") for n in numbers]
        self.fields["version"].choices = [("", "All versions"), *versions]
        self.fields["compare"].choices = [("", "The version before"), *versions]
