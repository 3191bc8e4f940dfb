"""The System page's form for an egress exception."""

from __future__ import annotations

from django import forms

from tools_app.egress import policy as egress_policy
from tools_app.models import EgressException


class EgressExceptionForm(forms.Form):
    entry = forms.CharField(
        max_length=100,
        label="Destination",
        help_text="An address or network with an optional port: 127.0.0.1:8888, "
        "10.0.5.0/24, [fd00::1]:8080.",
    )
    note = forms.CharField(
        max_length=200, required=False, help_text="What it is, for the next admin."
    )

    def clean_entry(self) -> str:
        entry = self.cleaned_data["entry"].strip()
        if "," in entry:
            raise forms.ValidationError("One destination at a time.")
        try:
            (allow,) = egress_policy.parse_allow(entry, source="the System page")
        except (egress_policy.PolicyError, ValueError) as exc:
            raise forms.ValidationError(str(exc) or "Not a destination.") from None
        # Stored as the policy writes it, so one destination is one row however typed.
        entry = str(allow)
        if EgressException.objects.filter(entry=entry).exists():
            raise forms.ValidationError(f"{entry} is already allowed.")
        return entry
