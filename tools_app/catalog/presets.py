"""Per-tool presets for `user-only` inputs (docs/tool-format.md): values an admin sets so
that a run gets them without a model ever seeing or filling them. No HTTP here.

- Only `user-only` inputs take a preset (hidden ones come from an integration).
- A sensitive preset is encrypted with tools_app.integrations.vault like an integration
  secret and is write-only: nothing shows it again; runs get it under the redaction label
  `{{preset.NAME}}`, so it is masked in everything a run stores.
- A person running the tool (the form, `run_tool`, the API) may fill a user-only input
  themselves, which wins over the preset; a model (MCP) never may: schema.validate_params
  refuses the name for it.
- Audit events name the tool and the input, never the value.
- A sensitive preset is a secret and follows the integrations' policy
  (tools_app/integrations/policy.py): a run of the published version, a run started by an
  admin (or `run_tool`) receives it; a run of any other version (a draft, an older version)
  receives it only when an admin switched on "allow test runs with sensitive presets" for
  the tool. Otherwise it is withheld: never decrypted, not filled in, and the run form and
  the run's notices name it (never its value). Plain presets are not secrets: every run
  gets them. for_run() is the only way to a preset's value and it takes the decision
  itself, so no run path can skip it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables

from tools_app.audit import Actor, record
from tools_app.integrations import vault
from tools_app.integrations.policy import Basis, trusted_basis
from tools_app.lib import listinput
from tools_app.manifest import schema
from tools_app.manifest.inputs import ARRAY_TYPES, InputSpec
from tools_app.manifest.toolmd import Manifest
from tools_app.models import Tool, ToolPreset, ToolVersion

PRESET_LABEL = "{{{{preset.{name}}}}}"
# A file travels as a (large) upload, not a stored setting.
PRESET_TYPES = ("string", "number", "integer", "boolean", "enum", "json", *ARRAY_TYPES)


class PresetError(Exception):
    """The value does not fit the input, or the preset cannot be read; safe to show."""


@dataclass(frozen=True)
class Withheld:
    """A sensitive preset a run does not receive, and why (safe to show: no value)."""

    name: str
    reason: str

    @property
    def notice(self) -> str:
        return f"The sensitive preset for {self.name} was withheld from this run: {self.reason}."


@dataclass(frozen=True)
class PresetAccess:
    """What a run receives of a tool's presets: decided from names and flags only."""

    filled: frozenset[str]  # inputs a preset fills (plain ones, granted sensitive ones)
    sensitive: tuple[str, ...]  # the sensitive presets of the version's inputs
    basis: Basis  # why the sensitive ones are received, or Basis.WITHHELD (or none)
    reason: str
    withheld: tuple[Withheld, ...]


@dataclass(frozen=True)
class Filled:
    values: dict[str, Any]  # input name -> preset value
    secrets: dict[str, str]  # redaction label -> text of a sensitive value
    withheld: tuple[Withheld, ...] = ()

    def notices(self) -> list[str]:
        return [w.notice for w in self.withheld]


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
    # A sensitive input's preset is always sealed, also when only the published version
    # declares it so: a developer's newer draft must not turn the admin's key into plain text.
    sensitive = sensitive or spec.sensitive or _published_sensitive(tool, spec.name)
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


def _published_sensitive(tool: Tool, name: str) -> bool:
    published = tool.published_version
    if published is None:
        return False
    spec = Manifest.from_dict(published.manifest).inputs.get(name)
    return spec is not None and spec.sensitive


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


def set_allow_test_runs(tool: Tool, allowed: bool, *, actor: Actor) -> Tool:
    """Switch "allow test runs with sensitive presets" on or off for `tool`, audited;
    nothing happens (no audit) when it already has that value."""
    with transaction.atomic():
        current = Tool.objects.select_for_update().get(pk=tool.pk)
        if current.presets_allow_test_runs == allowed:
            return current
        current.presets_allow_test_runs = allowed
        current.save(update_fields=["presets_allow_test_runs"])
        summary = (
            f"{current.name}: runs of versions other than the published one, started by "
            f"developers, {'now receive' if allowed else 'no longer receive'} its "
            "sensitive presets"
        )
        record(
            actor,
            "tool.presets.allow_test_runs",
            current,
            summary,
            {"allow_test_runs": allowed},
        )
    return current


def _is_secret(preset: ToolPreset, spec: InputSpec) -> bool:
    # The admin's choice when setting it, or the input as this version declares it.
    return preset.sensitive or spec.sensitive


def _withheld_reason(version: ToolVersion) -> str:
    return (
        f"version {version.number} is not the published version, the run is not started "
        f"by an admin, and {version.tool.name} does not allow test runs with its sensitive "
        "presets (an admin can allow them on the tool's Presets page, run this version, "
        "or publish it)"
    )


def _allows_test_runs(tool_id: int) -> bool:
    # From the database, not a Tool loaded earlier: an admin's "stop" applies at once.
    return Tool.objects.filter(pk=tool_id, presets_allow_test_runs=True).exists()


def _decide(
    version: ToolVersion, stored: list[ToolPreset], names: dict[str, InputSpec], *, user, via: str
) -> PresetAccess:
    filled = frozenset(p.input for p in stored)
    sensitive = tuple(sorted(p.input for p in stored if _is_secret(p, names[p.input])))
    if not sensitive:  # plain presets are not secrets: every run gets them
        return PresetAccess(filled, (), Basis.WITHHELD, "", ())
    basis = trusted_basis(version, user=user, via=via)
    if basis is not None:
        reason = str(basis.label)
    elif _allows_test_runs(version.tool_id):
        basis, reason = Basis.TEST_RUNS, "the tool allows test runs with its sensitive presets"
    else:
        basis, reason = Basis.WITHHELD, _withheld_reason(version)
    withheld = ()
    if basis == Basis.WITHHELD:
        withheld = tuple(Withheld(name, reason) for name in sensitive)
    kept = filled - {w.name for w in withheld}
    return PresetAccess(kept, sensitive, basis, reason, withheld)


def _stored(version: ToolVersion, names: dict[str, InputSpec]) -> list[ToolPreset]:
    if not names:  # no query, not even for the version's tool, for most tools
        return []
    presets = ToolPreset.objects.filter(tool_id=version.tool_id, input__in=list(names))
    return list(presets.order_by("input"))


def access(version: ToolVersion, manifest: Manifest, *, user=None, via: str) -> PresetAccess:
    """What a run of `version` started by `user` (None: an agent token or the system)
    through `via` would receive of the tool's presets: the run form asks this, so what it
    shows is what the run gets. Decrypts nothing."""
    names = presettable(manifest)
    return _decide(version, _stored(version, names), names, user=user, via=via)


def for_run(version: ToolVersion, manifest: Manifest, *, user=None, via: str) -> Filled:
    """The presets of the manifest's user-only inputs that a run of `version` started by
    `user` through `via` receives, decrypted; the withheld sensitive ones are not even
    decrypted. Raises PresetError when a granted sensitive one cannot be decrypted (the
    run must not go on without it)."""
    names = presettable(manifest)
    stored = _stored(version, names)
    decided = _decide(version, stored, names, user=user, via=via)
    values: dict[str, Any] = {}
    secrets: dict[str, str] = {}
    for preset in stored:
        if preset.input not in decided.filled:
            continue
        if preset.sensitive:
            try:
                value = json.loads(vault.decrypt(preset.ciphertext, what=f"preset {preset.input}"))
            except vault.VaultError as exc:
                raise PresetError(str(exc)) from None
        else:
            value = preset.value
        values[preset.input] = value
        if _is_secret(preset, names[preset.input]):
            text = value if isinstance(value, str) else json.dumps(value)
            secrets[PRESET_LABEL.format(name=preset.input)] = text
            if isinstance(value, list):  # a list's items may travel alone (?key=a&key=b)
                for index, item in enumerate(value):
                    if isinstance(item, str):
                        secrets[PRESET_LABEL.format(name=f"{preset.input}.{index}")] = item
    return Filled(values, secrets, decided.withheld)
