"""Saving, publishing and disabling tools: the one place their state changes.

Views, the API, commands, seed sync and imports all call these functions, so every state
change is validated the same way, written atomically and audited."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from tools_app.audit import Actor, record
from tools_app.catalog import bundle, datapath
from tools_app.http_tools.checks import ValidationContext
from tools_app.http_tools.context import validation_context
from tools_app.lib import strictyaml
from tools_app.manifest import toolmd
from tools_app.manifest.folder import validate_files
from tools_app.models import Tool, ToolVersion
from tools_app.models.tools import VersionSource, encode_files
from tools_app.signing import versions as signing


class InvalidTool(Exception):
    def __init__(self, problems: list[strictyaml.Problem]) -> None:
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


class VersionConflict(Exception):
    """Someone saved a newer version since the editor loaded `base`."""

    def __init__(self, tool: Tool, base: int | None, latest: ToolVersion) -> None:
        self.tool = tool
        self.base = base
        self.latest = latest
        super().__init__(f"{tool.name}: version {latest.number} was saved after {base}")


@dataclass
class SaveResult:
    version: ToolVersion
    created: bool


def validate(
    name: str, files: Mapping[str, bytes], context: ValidationContext
) -> toolmd.ParseResult:
    return validate_files(files, f"{name}/TOOL.md", context=context)


def save_version(
    name: str,
    files: Mapping[str, bytes],
    *,
    actor: Actor,
    source: str = VersionSource.CONSOLE,
    note: str = "",
    base: int | None = None,
    number: int | None = None,
    publish: bool = False,
    context: ValidationContext | None = None,
) -> SaveResult:
    """Store `files` as the next version of tool `name` (created if new).

    The version number is the highest so far plus one and is written into the frontmatter,
    unless `number` is given (seed imports keep their own number). Saving content equal to
    the latest version returns it unchanged. With `base`, a newer latest version raises
    VersionConflict instead of silently overwriting someone's work. `context`: what the
    checks know of the console, read now when not given (a caller saving many tools reads
    it once)."""
    context = validation_context() if context is None else context
    files = {bundle.safe_relpath(path): data for path, data in files.items()}
    result = validate(name, files, context)
    if not result.ok:
        raise InvalidTool(result.errors)

    with transaction.atomic():
        tool = Tool.objects.select_for_update().filter(name=name).first()
        if tool is None:
            try:
                with transaction.atomic():
                    tool = Tool.objects.create(name=name, language=result.manifest.language)
            except IntegrityError:
                # Another process created it first; lock theirs.
                tool = Tool.objects.select_for_update().get(name=name)
        latest = tool.versions.order_by("-number").first()
        if base is not None and latest is not None and latest.number != base:
            raise VersionConflict(tool, base, latest)
        if latest is not None and number is None and _same_content(files, latest):
            return SaveResult(latest, created=False)
        if number is None:
            number = (latest.number if latest else 0) + 1
            files = _with_version(files, number)
        elif latest is not None and number <= latest.number:
            raise ValueError(f"{name}: version {number} is not above {latest.number}")

        parsed = validate(name, files, context)
        if not parsed.ok:  # rewriting the version cannot break a valid file, but be sure
            raise InvalidTool(parsed.errors)
        toolmd_text = files["TOOL.md"].decode("utf-8-sig")
        version = ToolVersion.objects.create(
            tool=tool,
            number=number,
            toolmd=toolmd_text,
            manifest=parsed.manifest.to_dict(),
            files=encode_files(files),
            sha256=bundle.canonical_sha256(files),
            size=sum(len(data) for data in files.values()),
            source=source,
            note=note[:500],
            author=actor.user,
        )
        tool.copy_manifest(version.manifest)
        tool.latest_number = number
        if source == VersionSource.SEED:
            tool.seed_version = number
        tool.save()
        record(
            actor,
            "tool.version.create",
            tool,
            f"{name} v{number} ({source})" + (f": {note}" if note else ""),
            {"version": number, "sha256": version.sha256, "source": source},
        )
        if publish:
            publish_version(version, actor=actor, context=context)
    return SaveResult(version, created=True)


def _with_version(files: Mapping[str, bytes], number: int) -> dict[str, bytes]:
    text = files["TOOL.md"].decode("utf-8-sig")
    return {**files, "TOOL.md": toolmd.set_frontmatter_version(text, number).encode("utf-8")}


def _same_content(files: Mapping[str, bytes], latest: ToolVersion) -> bool:
    candidate = _with_version(files, latest.number)
    return bundle.canonical_sha256(candidate) == latest.sha256


def publish_version(
    version: ToolVersion, *, actor: Actor, context: ValidationContext | None = None
) -> None:
    """Make `version` the one agents get, signed (docs/signing.md), and mirror it into
    DATA_PATH/tools.

    An http tool is checked again first (raises InvalidTool): its request boundary depends
    on settings (the allow list, ALLOWED_HOSTS) that may have changed since it was saved.
    Without a signing key it raises SigningKeyMissing and nothing changes."""
    if version.manifest.get("kind") == "http":
        context = validation_context() if context is None else context
        result = validate(version.tool.name, version.file_bytes(), context)
        if not result.ok:
            raise InvalidTool(result.errors)
    with transaction.atomic():
        tool = Tool.objects.select_for_update().get(pk=version.tool_id)
        version.tool = tool
        previous = tool.published_version_id
        delivered = None
        if previous != version.pk or not version.signature:
            # Every publish is a new signature with the tool's next serial; publishing the
            # version that is published already changes nothing.
            now = timezone.now()
            delivered = signing.delivered_files(version)
            publisher = signing.publisher_of(actor, seed=version.source == VersionSource.SEED)
            signing.sign(version, publisher=publisher, published=now, files=delivered, tool=tool)
            if version.published_at is None:
                version.published_at = now
                version.save(update_fields=["published_at"])
        tool.published_version = version
        tool.save(update_fields=["published_version", "updated_at"])
        if previous != version.pk:
            record(actor, "tool.publish", tool, f"{tool.name} v{version.number} published")
        prepared = None if delivered is None else datapath.Prepared(version.pk, delivered)
        transaction.on_commit(lambda: datapath.mirror_tool(tool.name, prepared=prepared))


def unpublish(tool: Tool, *, actor: Actor) -> None:
    with transaction.atomic():
        tool = Tool.objects.select_for_update().get(pk=tool.pk)
        tool.published_version = None
        tool.save(update_fields=["published_version", "updated_at"])
        record(actor, "tool.unpublish", tool, f"{tool.name} unpublished")
        transaction.on_commit(lambda: datapath.mirror_tool(tool.name))


def set_enabled(tool: Tool, enabled: bool, *, actor: Actor) -> None:
    with transaction.atomic():
        tool = Tool.objects.select_for_update().get(pk=tool.pk)
        if tool.enabled == enabled:
            return
        tool.enabled = enabled
        tool.save(update_fields=["enabled", "updated_at"])
        record(actor, "tool.enable" if enabled else "tool.disable", tool, tool.name)
        transaction.on_commit(lambda: datapath.mirror_tool(tool.name))


def rollback(
    tool: Tool, number: int, *, actor: Actor, base: int | None = None, note: str = ""
) -> SaveResult:
    """A new version with the content of version `number` (history is never rewritten).

    `base` is the latest version the person saw, as for save_version: someone's newer
    save raises VersionConflict. Rolling back to content equal to the latest version
    returns the latest version unchanged."""
    old = ToolVersion.objects.get(tool=tool, number=number)
    with transaction.atomic():
        saved = save_version(
            tool.name,
            old.file_bytes(),
            actor=actor,
            source=VersionSource.ROLLBACK,
            note=note or f"roll back to v{number}",
            base=base,
        )
        if saved.created:
            record(
                actor,
                "tool.rollback",
                saved.version.tool,
                f"{tool.name} rolled back to v{number} as v{saved.version.number}",
                {"from": number, "version": saved.version.number},
            )
    return saved


SAMPLE_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def add_sample(
    tool: Tool,
    name: str,
    *,
    source: str,
    status: int,
    body: object,
    actor: Actor,
    base: int | None = None,
) -> SaveResult:
    """A new draft version: the latest one plus `samples/<name>.json` (docs/http-tools.md),
    a documented or recorded response that lets the tool's output paths be verified. Goes
    through save_version, so it is validated, audited and conflict-checked like an edit.
    `body` must already be redacted (a recorded response) or public (a documented one)."""
    if not SAMPLE_NAME_RE.fullmatch(name):
        raise ValueError(f"{name!r} is not a sample name (a-z, 0-9, _ and -)")
    latest = tool.versions.order_by("-number").first()
    if latest is None:
        raise ValueError(f"{tool.name} has no version to add a sample to")
    sample = {"source": source, "status": status, "body": body}
    text = json.dumps(sample, indent=2, ensure_ascii=False) + "\n"
    files = {**latest.file_bytes(), f"samples/{name}.json": text.encode("utf-8")}
    return save_version(
        tool.name,
        files,
        actor=actor,
        note=f"sample {name} from {source}",
        base=latest.number if base is None else base,
    )
