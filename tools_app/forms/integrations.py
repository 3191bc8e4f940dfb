"""The integration form: built from the type's fields (or a custom integration's own).

Secret inputs are PasswordInputs that never render a value, not even after a failed
submit; the stored secret is only described ("set on DATE by USER"). Each secret has a
"clear" checkbox, because an empty input means "keep"."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone

from tools_app.integrations.errors import InvalidIntegration
from tools_app.integrations.fields import fields_of, format_custom_fields, parse_custom_fields
from tools_app.integrations.service import FieldState, field_states
from tools_app.integrations.types import FieldSpec, IntegrationType
from tools_app.integrations.validation import (
    MAX_LABEL,
    MAX_PATH,
    MAX_SECRET,
    MAX_VALUE,
    secret_problem,
    slug_problem,
    value_problem,
)
from tools_app.models import Integration

VALUE_PREFIX = "field_"
SECRET_PREFIX = "secret_"
CLEAR_PREFIX = "clear_"


class IntegrationForm(forms.Form):
    slug = forms.CharField(
        max_length=64,
        required=False,
        help_text="Tools name this in their integrations list. Defaults to the type's slug.",
    )
    label = forms.CharField(max_length=MAX_LABEL, required=False)
    enabled = forms.BooleanField(required=False, initial=True)
    revision = forms.IntegerField(required=False, widget=forms.HiddenInput)
    custom_fields = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 5, "spellcheck": "false"}),
        help_text="One variable per line: NAME followed by any of secret, required, url, "
        "path. Example: MY_SERVICE_TOKEN secret required",
    )

    def __init__(
        self,
        data: Any = None,
        *,
        itype: IntegrationType,
        integration: Integration | None = None,
        **kwargs: Any,
    ) -> None:
        self.itype = itype
        self.integration = integration
        initial = kwargs.pop("initial", {}) or {}
        if integration is not None:
            initial.update(
                label=integration.label,
                enabled=integration.enabled,
                revision=integration.revision,
                custom_fields=format_custom_fields(fields_of(integration)),
            )
            initial.update({VALUE_PREFIX + k: v for k, v in (integration.values or {}).items()})
        else:
            initial.setdefault("slug", itype.slug)
        super().__init__(data, initial=initial, **kwargs)
        if integration is not None:
            del self.fields["slug"]
            self.fields["revision"].required = True
        else:
            del self.fields["revision"]
            self.fields["slug"].widget.attrs["placeholder"] = itype.slug
        if not itype.custom:
            del self.fields["custom_fields"]
        self.specs = self._specs(data)
        self.states = {s.spec.name: s for s in field_states(integration)} if integration else {}
        for spec in self.specs:
            self._add(spec)

    def _specs(self, data: Any) -> tuple[FieldSpec, ...]:
        if not self.itype.custom:
            return self.itype.fields
        text = data.get("custom_fields") if data is not None else None
        if text is not None:
            try:
                return tuple(parse_custom_fields(text))
            except InvalidIntegration:
                pass
        return fields_of(self.integration) if self.integration else ()

    def _add(self, spec: FieldSpec) -> None:
        help_text = spec.help
        if spec.secret:
            state = self.states.get(spec.name)
            if state is not None and state.is_set:
                when = timezone.localtime(state.set_at).strftime("%Y-%m-%d %H:%M %Z")
                status = f"set on {when} by {state.set_by or 'system'}"
                placeholder = "•••••••• (leave empty to keep)"
            else:
                status = "not set"
                placeholder = "not set"
            self.fields[SECRET_PREFIX + spec.name] = forms.CharField(
                label=spec.display,
                required=False,
                strip=False,
                max_length=MAX_SECRET * 4,
                widget=forms.PasswordInput(
                    render_value=False,
                    attrs={
                        "autocomplete": "new-password",
                        "placeholder": placeholder,
                        "spellcheck": "false",
                    },
                ),
                validators=[_secret_validator],
                help_text=help_text,
            )
            self.fields[SECRET_PREFIX + spec.name].secret_status = status
            if state is not None and state.is_set:
                self.fields[CLEAR_PREFIX + spec.name] = forms.BooleanField(
                    label=f"Clear {spec.display}", required=False
                )
        else:
            widget_attrs = {"spellcheck": "false"}
            if spec.default:
                widget_attrs["placeholder"] = spec.default
            field = forms.CharField(
                label=spec.display,
                required=False,
                max_length=MAX_PATH if spec.kind != "string" else MAX_VALUE,
                widget=forms.URLInput(attrs=widget_attrs)
                if spec.kind == "url"
                else forms.TextInput(attrs=widget_attrs),
                validators=[_value_validator(spec)],
                help_text=help_text,
            )
            self.fields[VALUE_PREFIX + spec.name] = field

    # -- clean_* -----------------------------------------------------------------------

    def clean_slug(self) -> str:
        slug = (self.cleaned_data.get("slug") or "").strip() or self.itype.slug
        if problem := slug_problem(slug):
            raise ValidationError(problem)
        if Integration.objects.filter(slug=slug).exists():
            raise ValidationError(f"an integration with slug {slug!r} already exists")
        return slug

    def clean_label(self) -> str:
        return (self.cleaned_data.get("label") or "").strip()

    def clean_custom_fields(self) -> str:
        text = self.cleaned_data.get("custom_fields") or ""
        try:
            parse_custom_fields(text)
        except InvalidIntegration as exc:
            raise ValidationError(exc.errors["custom_fields"]) from None
        return text

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        for spec in self.specs:
            if (
                spec.secret
                and cleaned.get(SECRET_PREFIX + spec.name)
                and cleaned.get(CLEAR_PREFIX + spec.name)
            ):
                self.add_error(
                    SECRET_PREFIX + spec.name,
                    f"type a new {spec.display} or clear it, not both",
                )
        return cleaned

    # -- what the domain functions take --------------------------------------------------

    def values(self) -> dict[str, str]:
        data = self.cleaned_data if hasattr(self, "cleaned_data") else {}
        return {s.name: data.get(VALUE_PREFIX + s.name) or "" for s in self.specs if not s.secret}

    def secrets(self) -> dict[str, str]:
        data = self.cleaned_data if hasattr(self, "cleaned_data") else {}
        return {s.name: data.get(SECRET_PREFIX + s.name) or "" for s in self.specs if s.secret}

    def cleared(self) -> list[str]:
        data = self.cleaned_data if hasattr(self, "cleaned_data") else {}
        return [s.name for s in self.specs if s.secret and data.get(CLEAR_PREFIX + s.name)]

    def raw_values(self) -> tuple[dict[str, str], dict[str, str], list[str]]:
        """Values straight from the POST (for the connection test, which validates them
        itself and must work before the form is valid)."""
        data = self.data
        values = {
            s.name: str(data.get(VALUE_PREFIX + s.name, "")) for s in self.specs if not s.secret
        }
        secrets = {
            s.name: str(data.get(SECRET_PREFIX + s.name, "")) for s in self.specs if s.secret
        }
        cleared = [s.name for s in self.specs if s.secret and data.get(CLEAR_PREFIX + s.name)]
        return values, secrets, cleared

    def add_domain_errors(self, errors: dict[str, list[str]]) -> None:
        names = {s.name: s for s in self.specs}
        for key, messages in errors.items():
            target: str | None
            if key in names:
                prefix = SECRET_PREFIX if names[key].secret else VALUE_PREFIX
                target = prefix + key
            elif key in self.fields:
                target = key
            else:
                target = None
            for message in messages:
                self.add_error(target, message)

    # -- rendering helpers ---------------------------------------------------------------

    def spec_rows(self) -> Iterable[dict[str, Any]]:
        for spec in self.specs:
            if spec.secret:
                field = self[SECRET_PREFIX + spec.name]
                clear_name = CLEAR_PREFIX + spec.name
                yield {
                    "spec": spec,
                    "field": field,
                    "status": self.fields[SECRET_PREFIX + spec.name].secret_status,
                    "clear": self[clear_name] if clear_name in self.fields else None,
                }
            else:
                yield {"spec": spec, "field": self[VALUE_PREFIX + spec.name]}

    @property
    def states_list(self) -> list[FieldState]:
        return list(self.states.values())


def _secret_validator(value: str) -> None:
    problem = secret_problem(value)
    if problem:
        raise ValidationError(f"the secret {problem}")


def _value_validator(spec: FieldSpec):
    def validate(value: str) -> None:
        value = value.strip()
        if value and (problem := value_problem(spec.kind, value)):
            raise ValidationError(problem)

    return validate


class TestRunsForm(forms.Form):
    """The "allow test runs" switch: runs of draft versions receive the credentials."""

    allow = forms.BooleanField(required=False)


class DeleteForm(forms.Form):
    confirm = forms.BooleanField(
        required=False,
        label="Delete it anyway: the tools listed above fail until it is configured again",
    )
