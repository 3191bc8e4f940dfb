"""The agent token form: a name for people and the scopes the token grants."""

from __future__ import annotations

import re

from django import forms

from tools_app.models.tokens import Scope

# What each scope lets an agent do, shown beside its checkbox.
SCOPE_HELP = {
    Scope.REGISTRY_READ: "list tools and read their versions (/api/v1/registry, /api/v1/tools)",
    Scope.SYNC_READ: "mirror DATA_PATH/tools (/api/v1/sync/manifest and bundles)",
    Scope.TOOLS_INVOKE: "run tools through the console and read their runs",
    Scope.SECRETS_READ: "read the integration variables of published tools (/api/v1/env; "
    "only when CONSOLE_ENV_BRIDGE=on)",
}
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


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

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        # The name ends up in the audit log and in tables; keep it one printable line.
        if _CONTROL_RE.search(name):
            raise forms.ValidationError("The name cannot contain control characters.")
        return name

    def clean_scopes(self) -> list[str]:
        return sorted(set(self.cleaned_data["scopes"]))
