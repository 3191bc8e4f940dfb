"""Signing and verifying tool versions (docs/signing.md): publish signs, the worker, MCP and
the registry verify. No HTTP here.

sign() takes the tool's next signing serial; its caller holds the tool's row lock
(catalog/versions.publish_version), so two signatures never share a serial."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from tools_app.audit import Actor, record
from tools_app.catalog import shim
from tools_app.manifest import toolmd
from tools_app.models import Tool, ToolVersion
from tools_app.signing import keyring, statement, trust
from tools_app.signing.envelope import MANIFEST_TYPE, SignatureRefused, seal

logger = logging.getLogger(__name__)

NOT_SIGNED = "not signed"


def publisher_of(actor: Actor, *, seed: bool = False) -> str:
    """Who the signed manifest names: the username, "seed" for seed sync, else "system"."""
    if actor.user is not None:
        return actor.user.get_username()
    return "seed" if seed else "system"


def delivered_files(version: ToolVersion) -> dict[str, bytes]:
    """What a version's folder holds when mirrored: its files and the generated shim."""
    return shim.mirror_files(version.file_bytes(), version.manifest)


def sign(
    version: ToolVersion,
    *,
    publisher: str,
    published=None,
    files: Mapping[str, bytes] | None = None,
    tool: Tool | None = None,
) -> dict:
    """Sign `version` with the newest signing key under the tool's next serial, store the
    envelope on it and return it. Raises keyring.SigningKeyMissing (nothing is changed).
    `files`: delivered_files(version) when the caller has them already; `tool`: the
    version's tool as the caller locked it (select_for_update), which saves a query."""
    key, private = keyring.signer()
    if tool is not None and tool.pk == version.tool_id:
        tool.signing_serial += 1
        serial = tool.signing_serial
        Tool.objects.filter(pk=tool.pk).update(signing_serial=serial)
    else:
        Tool.objects.filter(pk=version.tool_id).update(signing_serial=F("signing_serial") + 1)
        serial = Tool.objects.filter(pk=version.tool_id).values_list("signing_serial", flat=True)[0]
    signed = statement.build(
        version.tool.name,
        version.number,
        version.manifest,
        delivered_files(version) if files is None else files,
        publisher=publisher,
        published=published or timezone.now(),
        serial=serial,
    )
    envelope = seal(MANIFEST_TYPE, signed, key, private)
    version.signature = envelope
    version.signed_serial = serial
    version.signing_key_id = key
    version.save(update_fields=["signature", "signed_serial", "signing_key_id"])
    return envelope


def signed_manifest(version: ToolVersion, keys: trust.KeySet | None = None) -> dict:
    """The verified signed manifest of `version`, or SignatureRefused /
    keyring.SigningKeyMissing. `keys`: keyring.keyset(), when the caller has it."""
    if not version.signature:
        raise SignatureRefused(NOT_SIGNED)
    return (keys or keyring.keyset()).open_manifest(version.signature)


def verify(
    version: ToolVersion,
    files: Mapping[str, bytes] | None = None,
    *,
    keys: trust.KeySet | None = None,
) -> list[str]:
    """What is wrong with `version` against its signature; [] when it verifies: the
    envelope opens with the console's keys, names this tool and version, and its files and
    model view are what is stored now. `keys`: keyring.keyset() read once for many
    versions (it costs a query)."""
    try:
        signed = signed_manifest(version, keys)
    except (SignatureRefused, keyring.SigningKeyMissing) as exc:
        return [str(exc)]
    problems = _identity_problems(signed, version)
    delivered = delivered_files(version) if files is None else files
    problems += statement.file_problems(signed, delivered)
    problems += statement.model_problems(signed, statement.model_view(version.manifest))
    if not problems:
        problems += derived_problems(version, delivered)
    return problems


# sha256 of a TOOL.md text -> its parsed manifest (to_dict()), None when it does not parse.
_parsed: dict[str, dict | None] = {}
MAX_PARSED = 4096


def derived_problems(version: ToolVersion, files: Mapping[str, bytes]) -> list[str]:
    """The columns saved beside the files, derived from TOOL.md then, against the signed
    TOOL.md: a run parses `toolmd` (runs/setup.manifest_of: network, integrations, an http
    tool's request), pages and MCP read `manifest` (annotations, title). Checked once the
    files verify, so `files["TOOL.md"]` is the signed one."""
    signed = files.get("TOOL.md")
    if signed is None:
        return []
    text = signed.decode("utf-8-sig")
    problems = []
    if version.toolmd != text:
        problems.append("the stored TOOL.md text does not match the signed TOOL.md")
    parsed = _parsed_manifest(text)
    # A TOOL.md that the parser of today refuses (stored under older rules) keeps its
    # stored manifest, as runs/setup.manifest_of does.
    if parsed is not None and toolmd.Manifest.from_dict(version.manifest).to_dict() != parsed:
        problems.append("the stored manifest does not match the signed TOOL.md")
    return problems


def _parsed_manifest(text: str) -> dict | None:
    key = hashlib.sha256(text.encode()).hexdigest()
    if key not in _parsed:
        manifest = toolmd.parse_toolmd(text).manifest
        if len(_parsed) >= MAX_PARSED:
            _parsed.clear()
        _parsed[key] = manifest.to_dict() if manifest is not None else None
    return _parsed[key]


def digest(version: ToolVersion) -> str | None:
    """The pin value of `version`'s signature (not verified: verify() does that)."""
    if not version.signature:
        return None
    try:
        return statement.digest(_payload(version.signature))
    except (KeyError, TypeError, ValueError):
        return None


def _payload(envelope: Mapping) -> dict:
    """The payload as signed, unverified."""
    return json.loads(base64.b64decode(envelope["payload"]))


def _identity_problems(signed: Mapping, version: ToolVersion) -> list[str]:
    problems = []
    name, number = version.tool.name, version.number
    if signed.get("name") != name or signed.get("version") != number:
        problems.append(
            f"signed for {signed.get('name')} v{signed.get('version')}, not {name} v{number}"
        )
    kind = version.manifest.get("kind", "code")
    language = None if kind == "http" else version.manifest.get("language")
    if (signed.get("kind"), signed.get("language")) != (kind, language):
        problems.append("kind or language does not match the signed manifest")
    return problems


@dataclass(frozen=True)
class Resigned:
    name: str
    version: int
    key_id: str


def _published_versions():
    return ToolVersion.objects.filter(
        pk__in=Tool.objects.filter(published_version__isnull=False).values("published_version")
    ).select_related("tool")


def sign_published(
    *, actor: Actor, only_unsigned: bool, signed_by: str | None = None
) -> list[Resigned]:
    """Sign the published versions: those without a signature (`only_unsigned`), those
    signed by key `signed_by`, or all of them (the upgrade step, docs/operations.md). Each
    in its own transaction under its tool's lock. SigningKeyMissing when there is no key."""
    keyring.signer()  # no key: say so, even with nothing to sign
    versions = _published_versions().order_by("tool__name")
    if only_unsigned:
        versions = versions.filter(signature__isnull=True)
    if signed_by is not None:
        versions = versions.filter(signing_key_id=signed_by)
    done = []
    for version in versions:
        with transaction.atomic():
            tool = Tool.objects.select_for_update().get(pk=version.tool_id)
            if tool.published_version_id != version.pk:
                continue  # published another version meanwhile (and signed it)
            signed = _old_statement(version)
            publisher = signed.get("publisher") if signed else publisher_of(actor)
            sign(version, publisher=str(publisher), published=version.published_at, tool=tool)
            done.append(Resigned(tool.name, version.number, version.signing_key_id))
    if done:
        record(
            actor,
            "signing.sign",
            summary=f"signed {len(done)} published version(s)",
            data={"versions": [f"{r.name} v{r.version}" for r in done]},
        )
    return done


def _old_statement(version: ToolVersion) -> dict | None:
    try:
        return _payload(version.signature) if version.signature else None
    except (KeyError, TypeError, ValueError):
        return None


def refresh_generated() -> list[Resigned]:
    """Re-sign published versions whose only difference from their signature is a file the
    console generates (the shim's index.js, changed by a console upgrade); every other
    difference stays a verification problem for someone to look at. Called by sync_tools;
    does nothing when the console cannot sign."""
    try:
        keys = keyring.keyset()
        keyring.signer()
    except (SignatureRefused, keyring.SigningKeyMissing):
        return []
    done = []
    for version in _published_versions().filter(signature__isnull=False):
        try:
            signed = keys.open_manifest(version.signature)
        except SignatureRefused:
            continue
        delivered = delivered_files(version)
        if not _only_generated_differs(signed, version, delivered):
            continue
        with transaction.atomic():
            tool = Tool.objects.select_for_update().get(pk=version.tool_id)
            if tool.published_version_id != version.pk:
                continue
            sign(
                version,
                publisher=str(signed.get("publisher") or "system"),
                published=version.published_at,
                files=delivered,
                tool=tool,
            )
        done.append(Resigned(tool.name, version.number, version.signing_key_id))
        logger.info("re-signed %s v%s: its generated shim changed", tool.name, version.number)
    return done


def _only_generated_differs(
    signed: Mapping, version: ToolVersion, delivered: Mapping[str, bytes]
) -> bool:
    if _identity_problems(signed, version) or not statement.file_problems(signed, delivered):
        return False
    if statement.model_problems(signed, statement.model_view(version.manifest)):
        return False
    if not shim.needs_shim(version.file_bytes(), version.manifest):
        return False  # nothing of it is generated
    own = {path: data for path, data in delivered.items() if path != shim.SHIM_PATH}
    listed = [entry for entry in signed["files"] if entry.get("path") != shim.SHIM_PATH]
    return statement.file_entries(own) == listed
