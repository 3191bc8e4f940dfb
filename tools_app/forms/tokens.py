"""The agent token form: a name for people, the scopes the token grants, when it expires."""

from __future__ import annotations

import datetime
import re

from django import forms
from django.utils import timezone

from tools_app.models.tokens import Scope

# What each scope lets an agent do, shown beside its checkbox.
SCOPE_HELP = {
    Scope.REGISTRY_READ: "list tools and read their versions (/api/v1/registry, /api/v1/tools)",
    Scope.SYNC_READ: "mirror DATA_PATH/tools (/api/v1/sync/manifest and bundles)",
    Scope.TOOLS_INVOKE: "run tools through the console and read their runs",
    Scope.SECRETS_READ: "read the integration variables of published tools (/api/v1/env; "
    "only when CONSOLE_ENV_BRIDGE=on)",
    Scope.METRICS_READ: "scrape the Prometheus metrics (/metrics): counts and timings, no secrets",
}
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
# Days until a token expires ("": never).
EXPIRY_CHOICES = [(7, "in 7 days"), (30, "in 30 days"), (90, "in 90 days")]
EXPIRY_CHOICES += [(365, "in a year"), ("", "never")]


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        strip=True,
        help_text="Who or what uses it, e.g. “build agent on host-3”.",
    )
    scopes = forms.MultipleChoiceField(
        choices=[(scope.value, f"{scope.value}: {SCOPE_HELP[scope]}") for scope in Scope],
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one scope."},
    )

    expires = forms.TypedChoiceField(
        label="Expires",
        choices=EXPIRY_CHOICES,
        coerce=int,
        empty_value=None,
        initial=90,
        required=False,
        help_text="An agent token that leaks works until it expires or is revoked.",
    )

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        # The name ends up in the audit log and in tables; keep it one printable line.
        if _CONTROL_RE.search(name):
            raise forms.ValidationError("The name cannot contain control characters.")
        return name

    def clean_scopes(self) -> list[str]:
        return sorted(set(self.cleaned_data["scopes"]))

    def expires_at(self) -> datetime.datetime | None:
        days = self.cleaned_data.get("expires")
        return timezone.now() + datetime.timedelta(days=days) if days else None
