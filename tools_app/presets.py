"""Per-tool presets for `user-only` inputs (DESIGN.md section 8): values an admin sets so
that a run gets them without a model ever seeing or filling them. No HTTP here.

- Only `user-only` inputs take a preset (hidden ones come from an integration).
- A sensitive preset is encrypted with tools_app.vault like an integration secret and is
  write-only: nothing shows it again; runs get it under the redaction label
  `{{preset.NAME}}`, so it is masked in everything a run stores.
- A person running the tool (the form, `run_tool`, the API) may fill a user-only input
  themselves, which wins over the preset; a model (MCP) never may: schema.validate_params
  refuses the name for it.
- Audit events name the tool and the input, never the value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables

from tools_app import listinput, schema, vault
from tools_app.audit import Actor, record
from tools_app.models import Tool, ToolPreset
from tools_app.toolmd import ARRAY_TYPES, InputSpec, Manifest

PRESET_LABEL = "{{{{preset.{name}}}}}"
# A file travels as a (large) upload, not a stored setting.
PRESET_TYPES = ("string", "number", "integer", "boolean", "enum", "json", *ARRAY_TYPES)


class PresetError(Exception):
    """The value does not fit the input, or the preset cannot be read; safe to show."""


@dataclass(frozen=True)
class Filled:
    values: dict[str, Any]  # input name -> preset value
    secrets: dict[str, str]  # redaction label -> text of a sensitive value


def presettable(manifest: Manifest) -> dict[str, InputSpec]:
    return {
        name: spec
        for name, spec in manifest.inputs.items()
        if spec.visibility == "user-only" and spec.type in PRESET_TYPES
    }


def parse_value(spec: InputSpec, text: str) -> Any:
    """The typed value of a preset typed as text: strings and enums as they are, lists one
    item per line (or a JSON array), the other types as JSON (`42`, `true`, `{"a": 1}`).
    Checked against the input like run params; the message never quotes a sensitive value."""
    if spec.type in ("string", "enum"):
        value: Any = text
    elif spec.type in ARRAY_TYPES and not text.lstrip().startswith("["):
        # One item per line, as on the run form; a JSON array (as the API takes) also works.
        try:
            value = listinput.parse_lines(spec.type[:-2], text) or []
        except listinput.LineError as exc:
            raise PresetError(f"{spec.name}: {exc}") from None
    else:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:
            where = (
                f" ({exc.msg}, line {exc.lineno}, column {exc.colno})"
                if isinstance(exc, json.JSONDecodeError)
                else ""
            )
            raise PresetError(f"{spec.name}: not valid JSON for a {spec.type}{where}") from None
    single = Manifest(name="preset", label="", description="", inputs={spec.name: spec})
    _filled, errors = schema.validate_params(single, {spec.name: value})
    if errors:
        raise PresetError("; ".join(errors))
    return value


@sensitive_variables("value", "token")
def set_preset(
    tool: Tool, spec: InputSpec, value: Any, *, sensitive: bool, actor: Actor
) -> ToolPreset:
    sensitive = sensitive or spec.sensitive  # a sensitive input's preset is always sealed
    fields: dict[str, Any] = {"sensitive": sensitive, "set_at": timezone.now()}
    fields["set_by"] = actor.user
    if sensitive:
        try:
            token, kid = vault.encrypt(json.dumps(value))
        except vault.VaultError as exc:
            raise PresetError(f"Encryption keys: {exc}. Nothing was saved.") from None
        fields |= {"value": None, "ciphertext": token, "key_id": kid}
    else:
        fields |= {"value": value, "ciphertext": "", "key_id": ""}
    with transaction.atomic():
        preset, _created = ToolPreset.objects.update_or_create(
            tool=tool, input=spec.name, defaults=fields
        )
        record(
            actor,
            "tool.preset.set",
            tool,
            f"{tool.name}: preset for {spec.name} set" + (" (sensitive)" if sensitive else ""),
            {"input": spec.name, "sensitive": sensitive},
        )
    return preset


def clear_preset(tool: Tool, name: str, *, actor: Actor) -> bool:
    with transaction.atomic():
        deleted, _ = ToolPreset.objects.filter(tool=tool, input=name).delete()
        if deleted:
            record(
                actor,
                "tool.preset.clear",
                tool,
                f"{tool.name}: preset for {name} removed",
                {"input": name},
            )
    return bool(deleted)


def for_run(tool: Tool, manifest: Manifest) -> Filled:
    """The presets of the manifest's user-only inputs, decrypted. Raises PresetError when
    a sensitive one cannot be decrypted (the run must not go on without it)."""
    names = presettable(manifest)
    values: dict[str, Any] = {}
    secrets: dict[str, str] = {}
    for preset in ToolPreset.objects.filter(tool=tool, input__in=list(names)):
        if preset.sensitive:
            try:
                value = json.loads(vault.decrypt(preset.ciphertext, what=f"preset {preset.input}"))
            except vault.VaultError as exc:
                raise PresetError(str(exc)) from None
        else:
            value = preset.value
        values[preset.input] = value
        if preset.sensitive or names[preset.input].sensitive:
            text = value if isinstance(value, str) else json.dumps(value)
            secrets[PRESET_LABEL.format(name=preset.input)] = text
            if isinstance(value, list):  # a list's items may travel alone (?key=a&key=b)
                for index, item in enumerate(value):
                    if isinstance(item, str):
                        secrets[PRESET_LABEL.format(name=f"{preset.input}.{index}")] = item
    return Filled(values, secrets)
