"""The audit page's filters (a GET form: every field is optional)."""

from __future__ import annotations

import datetime

from django import forms
from django.db.models import Case, CharField, Q, QuerySet, Value, When
from django.db.models.functions import Cast, Left, StrIndex
from django.utils import timezone

from tools_app.models import AuditEvent, Tool


class AuditFilterForm(forms.Form):
    actor = forms.CharField(required=False, max_length=200, label="Who")
    action = forms.CharField(required=False, max_length=64, widget=forms.Select)
    target = forms.CharField(required=False, max_length=200, label="Target")
    since = forms.DateField(required=False, label="From", widget=forms.DateInput({"type": "date"}))
    until = forms.DateField(required=False, label="To", widget=forms.DateInput({"type": "date"}))

    def __init__(self, *args, actions: list[str] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["action"].widget.choices = [
            ("", "Any action"),
            *((action, action) for action in actions or []),
        ]

    def clean(self) -> dict:
        data = super().clean()
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            self.add_error("until", "The end date is before the start date.")
        return data

    def filter(self, events: QuerySet[AuditEvent]) -> QuerySet[AuditEvent]:
        data = self.cleaned_data
        if data.get("actor"):
            events = events.filter(actor__icontains=data["actor"])
        if data.get("action"):
            events = events.filter(action=data["action"])
        if data.get("target"):
            # A target's name as shown, or its type ("tool", "integration") or id.
            term = data["target"]
            tools = Tool.objects.filter(name__icontains=term)
            events = events.annotate(target_tool=_target_tool()).filter(
                Q(target__icontains=term)
                | Q(target_type=term.lower())
                | Q(target_id=term)
                | Q(target_tool__in=tools.annotate(key=Cast("pk", CharField())).values("key"))
            )
        # Dates are days in the console's time zone, both ends included.
        if data.get("since"):
            events = events.filter(created_at__gte=_start_of(data["since"]))
        if data.get("until"):
            events = events.filter(
                created_at__lt=_start_of(data["until"] + datetime.timedelta(days=1))
            )
        return events

    @property
    def is_filtered(self) -> bool:
        return any(self.cleaned_data.get(name) for name in self.fields)


def _target_tool() -> Case:
    """The tool id in a run's or version's stored target: the page shows those as "Run of
    alpha · 1a2b3c4d" and "alpha v3", but str() stored "8 1a2b..." and "8@3", so a search
    for the name shown must go through the tool's id."""

    def before(separator: str) -> Left:
        return Left("target", StrIndex("target", Value(separator)) - 1)

    return Case(
        When(target_type="run", target__contains=" ", then=before(" ")),
        When(target_type="toolversion", target__contains="@", then=before("@")),
        default=Value(""),
        output_field=CharField(),
    )


def _start_of(day: datetime.date) -> datetime.datetime:
    return timezone.make_aware(datetime.datetime.combine(day, datetime.time.min))


class SecretFindForm(forms.Form):
    """Find by value: a suspected leaked secret, compared by its ledger fingerprint. The
    field is a password input that never renders the value back."""

    value = forms.CharField(
        label="Suspected leaked value",
        max_length=20_000,
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
    )

    def clean_value(self) -> str:
        value = self.cleaned_data["value"]
        if not value.strip():
            raise forms.ValidationError("Paste the value to look for.")
        return value
