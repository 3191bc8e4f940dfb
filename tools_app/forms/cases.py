"""Forms of the test-case pages: saving a run as a case, and an admin's publish override."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import yaml
from django import forms

from tools_app.cases import document
from tools_app.catalog import presets
from tools_app.manifest.inputs import InputSpec

SECRET_PREFIX = "sealed__"
MAX_EXTRA = 64 * 1024
MAX_REASON = 2000
# The textarea's expectations are parsed as the `expect:` list of one case in a cases.yaml
# made around them: these lines come first, so a problem's line minus this is the textarea's.
_WRAP = "cases:\n  - name: {name}\n    expect:\n"
_WRAP_LINES = 3
_INDENT = " " * 6


def shown_yaml(expectation: Mapping[str, Any]) -> str:
    """One expectation as it will read in cases.yaml."""
    return yaml.safe_dump(
        [dict(expectation)], sort_keys=False, allow_unicode=True, width=100
    ).rstrip()


def parse_expectations(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Expectations typed as a YAML list (`- contains: x`), in file form, checked by the
    same parser as cases.yaml; problems name the textarea's own lines. Never raises."""
    if not text.strip():
        return [], []
    body = "".join(_INDENT + line + "\n" for line in text.splitlines())
    result = document.parse_cases(_WRAP.format(name="typed") + body)
    problems = []
    for problem in result.problems:
        line = problem.line - _WRAP_LINES
        where = f"line {line}: " if line >= 1 else ""
        problems.append(f"{where}{problem.message}")
    if problems:
        return [], problems
    if not result.cases:
        return [], ["the expectations could not be read: write a YAML list, one item per line"]
    return [e.to_yaml() for e in result.cases[0].expect], []


class SaveCaseForm(forms.Form):
    """A finished run kept as a test case: a name, the expectations picked among those
    proposed from its result and typed ones, and its sensitive inputs typed again (the run
    kept only masks of them). The version it starts from rides along as `base`, so a save
    made meanwhile is a conflict, as in the editor."""

    name = forms.CharField(
        label="Case name",
        max_length=64,
        help_text="Lower-case letters, digits, - and _, starting with a letter or digit.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    description = forms.CharField(label="Description", required=False, max_length=500)
    proposed = forms.MultipleChoiceField(
        label="Expectations proposed from this run's result",
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    extra = forms.CharField(
        label="More expectations (YAML)",
        required=False,
        strip=False,
        max_length=MAX_EXTRA,
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false", "class": "code"}),
        help_text='A YAML list, for example  - regex: "Example\\s+Domain"  (see docs/cases.md).',
    )
    base = forms.IntegerField(widget=forms.HiddenInput, min_value=0)

    def __init__(
        self,
        *args,
        proposals: list[dict[str, Any]],
        existing: Collection[str],
        sensitive: Mapping[str, tuple[InputSpec, bool]],
        **kwargs,
    ) -> None:
        """`sensitive`: input name -> (spec, required: the run had a value for it)."""
        super().__init__(*args, **kwargs)
        self.proposals = proposals
        self.existing = set(existing)
        self.sensitive = sensitive
        self.fields["proposed"].choices = [
            (str(i), shown_yaml(item)) for i, item in enumerate(proposals)
        ]
        for name, (_spec, required) in sensitive.items():
            self.fields[SECRET_PREFIX + name] = forms.CharField(
                label=f"{name} (sensitive)",
                required=required,
                strip=False,
                max_length=64 * 1024,
                widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
                help_text=(
                    "The run did not keep its value: type it again."
                    if required
                    else "Optional: the run had none."
                )
                + " It is sealed in cases.yaml and never shown again.",
            )

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        if not document.NAME_RE.fullmatch(name):
            raise forms.ValidationError(
                "Use lower-case letters, digits, - and _, starting with a letter or digit "
                "(at most 64 characters)."
            )
        if name in self.existing:
            raise forms.ValidationError(f"This tool already has a case named {name}.")
        return name

    def clean_extra(self) -> list[dict[str, Any]]:
        expectations, problems = parse_expectations(self.cleaned_data["extra"])
        if problems:
            raise forms.ValidationError(problems)
        return expectations

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        picked = [self.proposals[int(i)] for i in data.get("proposed", [])]
        if "extra" in data:
            data["expect"] = picked + data["extra"]
            if not data["expect"]:
                raise forms.ValidationError(
                    "Pick at least one expectation or type one: a case that expects "
                    "nothing can never pass."
                )
        sealed: dict[str, Any] = {}
        for name, (spec, _required) in self.sensitive.items():
            text = data.get(SECRET_PREFIX + name)
            if not text:
                continue
            try:
                sealed[name] = presets.parse_value(spec, text)
            except presets.PresetError as exc:
                self.add_error(SECRET_PREFIX + name, str(exc))
        data["sealed_values"] = sealed
        return data

    def secret_fields(self) -> list[forms.BoundField]:
        return [self[SECRET_PREFIX + name] for name in self.sensitive]


class OverrideForm(forms.Form):
    """An admin publishes a version whose cases failed: the reason is required and audited."""

    reason = forms.CharField(
        label="Reason",
        max_length=MAX_REASON,
        widget=forms.Textarea(attrs={"rows": 3}),
        error_messages={"required": "Say why: the reason is required."},
        help_text="Why this version may be published although its cases fail (audited, "
        "shown on the version).",
    )

    def clean_reason(self) -> str:
        reason = self.cleaned_data["reason"].strip()
        if not reason:
            raise forms.ValidationError("Say why: the reason is required.")
        return reason


class AcceptForm(forms.Form):
    """ "Accept the new output": the latest version the page showed (a save since is a conflict)."""

    base = forms.IntegerField(widget=forms.HiddenInput, min_value=0)
