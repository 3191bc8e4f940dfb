"""The tool list's search, filter and sort form (a GET form: every field is optional)."""

from __future__ import annotations

from django import forms

from tools_app.manifest.toolmd import SLUG_RE
from tools_app.models.tools import TOOL_STATUS_FILTERS, Language, ToolQuerySet

# Longer searches are refused with a 400 rather than sent to the database: no tool name
# or useful description phrase is this long, and LIKE over a huge pattern is wasted work.
MAX_QUERY_LENGTH = 200

STATUS_CHOICES = [
    ("", "Any status"),
    *((status.value, status.label) for status in TOOL_STATUS_FILTERS),
]

# Sort keys the URL may carry, mapped to an ordering; "name" breaks ties so pages are
# stable. Anything else falls back to DEFAULT_SORT instead of reaching order_by().
SORTS = {
    "name": ("Name, A to Z", ("name",)),
    "-name": ("Name, Z to A", ("-name",)),
    "-updated": ("Recently updated", ("-updated_at", "name")),
    "updated": ("Least recently updated", ("updated_at", "name")),
    "language": ("Language", ("language", "name")),
    "-versions": ("Most versions", ("-latest_number", "name")),
}
DEFAULT_SORT = "name"


class ToolFilterForm(forms.Form):
    q = forms.CharField(
        required=False,
        strip=True,
        widget=forms.SearchInput(
            attrs={"placeholder": "Search name or description", "maxlength": MAX_QUERY_LENGTH}
        ),
    )
    language = forms.ChoiceField(required=False, choices=[("", "Any language"), *Language.choices])
    status = forms.ChoiceField(required=False, choices=STATUS_CHOICES)
    # A CharField rather than a ChoiceField: a link to an integration no tool uses yet is
    # a valid (empty) search, not an error. The select's options are set in __init__.
    integration = forms.CharField(required=False, max_length=64, widget=forms.Select)
    sort = forms.CharField(
        required=False,
        widget=forms.Select(choices=[(key, label) for key, (label, _) in SORTS.items()]),
    )

    def __init__(self, *args, integrations: list[str] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Keep only the start of an over-long search, so the form that shows the error
        # does not echo back megabytes; clean_q still refuses it.
        self.q_too_long = len(self.data.get("q", "")) > MAX_QUERY_LENGTH
        if self.q_too_long:
            self.data = self.data.copy()
            self.data["q"] = self.data["q"][:MAX_QUERY_LENGTH]
        choices = [("", "Any integration"), *((slug, slug) for slug in integrations or [])]
        self.fields["integration"].widget.choices = choices

    def clean_q(self) -> str:
        q = self.cleaned_data["q"]
        if self.q_too_long:
            raise forms.ValidationError(f"A search may have at most {MAX_QUERY_LENGTH} characters.")
        # PostgreSQL refuses NUL in text; nobody searches for control characters anyway.
        if "\x00" in q:
            raise forms.ValidationError("The search may not contain NUL characters.")
        return q

    def clean_integration(self) -> str:
        slug = self.cleaned_data["integration"]
        if slug and not SLUG_RE.fullmatch(slug):
            raise forms.ValidationError("Not a valid integration name.")
        return slug

    def clean_sort(self) -> str:
        sort = self.cleaned_data["sort"]
        return sort if sort in SORTS else DEFAULT_SORT

    def filter(self, tools: ToolQuerySet) -> ToolQuerySet:
        """Apply the cleaned search, filters and sort. Call only when the form is valid."""
        data = self.cleaned_data
        tools = tools.search(data["q"])
        if data["language"]:
            tools = tools.filter(language=data["language"])
        if data["status"]:
            tools = tools.with_status(data["status"])
        if data["integration"]:
            tools = tools.using_integration(data["integration"])
        return tools.order_by(*SORTS[data["sort"]][1])

    @property
    def is_filtered(self) -> bool:
        data = getattr(self, "cleaned_data", {})
        return any(data.get(key) for key in ("q", "language", "status", "integration"))
