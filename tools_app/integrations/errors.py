"""Errors of the integrations domain; messages never contain a secret value."""

from __future__ import annotations

from collections.abc import Mapping

from django.utils import timezone

from tools_app.models import Integration, Tool


class IntegrationError(Exception):
    """A problem a person can act on; the message never contains a secret value."""


class UnknownType(IntegrationError):
    pass


class UnknownIntegration(IntegrationError):
    pass


class InvalidIntegration(IntegrationError):
    """Bad input. `errors` maps a field name (or "slug", "label", "custom_fields",
    "__all__") to messages."""

    def __init__(self, errors: Mapping[str, list[str]]) -> None:
        self.errors = {k: list(v) for k, v in errors.items() if v}
        super().__init__(
            "; ".join(
                f"{k}: {m}" if k != "__all__" else m for k, ms in self.errors.items() for m in ms
            )
        )


class Conflict(IntegrationError):
    """Someone saved the integration after the form was opened."""

    def __init__(self, integration: Integration, base_revision: int) -> None:
        self.integration = integration
        self.base_revision = base_revision
        who = integration.updated_by.get_username() if integration.updated_by else "someone"
        when = timezone.localtime(integration.updated_at).strftime("%Y-%m-%d %H:%M:%S %Z")
        super().__init__(
            f"{integration.slug} was changed by {who} at {when} after you opened this form, "
            "so your changes were not saved. Your entries are kept below (secret fields must "
            "be typed again): review them against the current values and save again."
        )


class InUse(IntegrationError):
    def __init__(self, integration: Integration, tools: list[Tool]) -> None:
        self.integration = integration
        self.tools = tools
        names = ", ".join(t.name for t in tools)
        super().__init__(
            f"{integration.slug} is declared by published tools ({names}); "
            "confirm to delete it anyway (those tools then fail until it is configured again)"
        )


class SecretsUnavailable(IntegrationError):
    """The encryption keys are unusable, so no secret can be stored: nothing was saved."""


class IntegrationUnavailable(IntegrationError):
    """Raised to the runner: the run fails with this message."""


class RotationError(IntegrationError):
    def __init__(self, slug: str, field_name: str, rotated: int, reason: str) -> None:
        self.slug = slug
        self.field = field_name
        self.rotated = rotated
        super().__init__(
            f"stopped at integration '{slug}', field '{field_name}': {reason}. "
            f"{rotated} secret{'s' if rotated != 1 else ''} re-encrypted before it; "
            "nothing was changed for this one. Add the key it was encrypted with to "
            "CONSOLE_ENCRYPTION_KEYS (after the new one) or set the secret again, then rerun."
        )
