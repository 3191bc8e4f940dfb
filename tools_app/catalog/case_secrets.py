"""Sensitive inputs of cases (cases.yaml `sealed:`, docs/cases.md): sealed with the vault
like a sensitive preset, and never shown again. No HTTP here.

Each value is its own vault token holding the value, the tool and the input it was sealed
for, and who sealed it:
- bound to the tool and the input, so a developer cannot copy another tool's token into a
  case of their own (whose code could print it) and have it opened there;
- opened for a run by the same rule as a sensitive preset (tools_app/catalog/presets.py,
  tools_app/integrations/policy.py): a run of the published version, by an admin or an
  operator (`test_tools`), or of a tool that allows test runs with its sensitive presets;
  and also for the person who sealed it (their own key, in their own draft);
- a token sealed on another console (an imported tool) or under a key since removed
  cannot be opened: SealedInputError says which input and how to fix it, never a value.

Tokens live in version files, which never change: rotating keys (rotate_keys) leaves them
under the old key, which must stay in CONSOLE_ENCRYPTION_KEYS (or the values be re-entered)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django.views.decorators.debug import sensitive_variables

from tools_app.integrations import vault
from tools_app.integrations.policy import trusted_basis
from tools_app.models import Tool, ToolVersion

FORMAT = 1


class SealedInputError(Exception):
    """A sealed input cannot be opened for this run; the message is safe to show."""


@sensitive_variables("values", "value")
def seal(values: Mapping[str, Any], *, tool: str, user=None) -> dict[str, str]:
    """{input name: vault token} for cases.yaml's `sealed:`. Raises vault.VaultError when
    the console's keys are unusable (nothing is saved then)."""
    by = user.pk if user is not None and getattr(user, "is_authenticated", False) else None
    sealed = {}
    for name, value in values.items():
        payload = {"f": FORMAT, "tool": tool, "input": name, "by": by, "value": value}
        sealed[name], _key_id = vault.encrypt(json.dumps(payload, ensure_ascii=False))
    return sealed


def _unseal(token: str, *, tool: str, name: str) -> dict[str, Any]:
    where = f"{tool}: sealed input {name}"
    if not isinstance(token, str) or not token:
        raise SealedInputError(f"{where} is not a vault token; enter its value again")
    try:
        payload = json.loads(vault.decrypt(token, what=where))
    except vault.VaultError:
        raise SealedInputError(
            f"{where} cannot be opened on this console: it was sealed on another console "
            "(an imported tool) or under an encryption key that is no longer configured; "
            "enter its value again (save the case again from a run)"
        ) from None
    except ValueError:
        raise SealedInputError(f"{where} holds no sealed value; enter its value again") from None
    if not isinstance(payload, dict) or payload.get("f") != FORMAT or "value" not in payload:
        raise SealedInputError(f"{where} holds no sealed value; enter its value again")
    if payload.get("tool") != tool or payload.get("input") != name:
        raise SealedInputError(
            f"{where} was sealed for another tool or input; enter its value again"
        )
    return payload


def may_open(version: ToolVersion, *, user=None, via: str) -> bool:
    """Whether a run of `version` by `user` through `via` receives every sealed input,
    whoever sealed it (the sensitive presets' rule)."""
    if trusted_basis(version, user=user, via=via) is not None:
        return True
    return Tool.objects.filter(pk=version.tool_id, presets_allow_test_runs=True).exists()


@sensitive_variables("opened")
def open_inputs(case, version: ToolVersion, *, user=None, via: str) -> dict[str, Any]:
    """The case's sealed inputs as values for a run of `version` by `user` (None: an agent
    token or the system) through `via`. Raises SealedInputError (naming the input, never a
    value) when one cannot be opened, or is not this person's to use."""
    if not case.sealed:
        return {}
    tool = version.tool.name
    trusted = None
    opened: dict[str, Any] = {}
    me = user.pk if user is not None and getattr(user, "is_authenticated", False) else None
    for name, token in case.sealed.items():
        payload = _unseal(token, tool=tool, name=name)
        if me is None or payload.get("by") != me:
            if trusted is None:
                trusted = may_open(version, user=user, via=via)
            if not trusted:
                raise SealedInputError(
                    f"{tool}: sealed input {name} was sealed by someone else and is withheld "
                    f"from this run: version {version.number} is not the published version, "
                    f"the run is not started by an admin, and {tool} does not allow test "
                    "runs with its sensitive presets"
                )
        opened[name] = payload["value"]
    return opened
