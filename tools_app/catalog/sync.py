"""Seed sync (docs/sync.md, "The console's own mirror"): seed/tools -> database -> DATA_PATH/tools.

A seed tool becomes a new version only when its `version` is above the highest version the
database has for that name, so console edits are never overwritten by an equal or lower
seed. Invalid seed tools are reported and skipped; the rest still sync."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from tools_app.audit import Actor, record
from tools_app.catalog import bundle, datapath
from tools_app.catalog.versions import InvalidTool, save_version
from tools_app.http_tools.checks import ValidationContext
from tools_app.http_tools.context import validation_context
from tools_app.manifest.folder import validate_tool_dir
from tools_app.models import Tool
from tools_app.models.tools import VersionSource
from tools_app.signing import versions as signing
from tools_app.signing.keyring import SigningKeyMissing


@dataclass(frozen=True)
class SyncLine:
    name: str
    # imported | updated | unchanged | invalid | skipped | foreign | blocked (cannot be
    # published now: no signing key) | refused (its published version fails its signature)
    status: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.name}: {self.status}" + (f" ({self.detail})" if self.detail else "")


def sync_tools(
    seed_dir: Path | None = None, data_path: Path | None = None, actor: Actor | None = None
) -> list[SyncLine]:
    actor = actor or Actor.system()
    seed_tools = Path(seed_dir or settings.SEED_PATH / "tools")
    context = validation_context()  # read once for every seed tool
    lines = [import_seed_tool(path, data_path, actor, context) for path in _candidates(seed_tools)]
    # A console upgrade that changed the generated shim re-signs what it changed, first.
    signing.refresh_generated()
    results, foreign = datapath.mirror_all(data_path)
    written = {r.name: r for r in results}
    lines = [_note_written(line, written.get(line.name)) for line in lines]
    lines += [
        SyncLine(name, "foreign", "in DATA_PATH/tools but not written by the console; left alone")
        for name in foreign
    ]
    lines += [
        SyncLine(
            r.name, "refused", f"v{r.version} not written to DATA_PATH: {'; '.join(r.problems)}"
        )
        for r in results
        if r.action == "refused"
    ]
    if any(line.status in ("imported", "updated") for line in lines):
        record(
            actor,
            "tools.sync",
            summary=", ".join(str(line) for line in lines if line.status != "unchanged"),
        )
    return lines


def _candidates(seed_tools: Path) -> list[Path]:
    if not seed_tools.is_dir():
        return []
    return sorted(p for p in seed_tools.iterdir() if not p.name.startswith("."))


def _note_written(line: SyncLine, mirror: datapath.MirrorResult | None) -> SyncLine:
    if mirror is None or line.status != "unchanged" or mirror.action != "written":
        return line
    return SyncLine(line.name, "unchanged", f"rewrote DATA_PATH copy of v{mirror.version}")


def import_seed_tool(
    path: Path, data_path: Path | None, actor: Actor, context: ValidationContext
) -> SyncLine:
    name = path.name
    if not path.is_dir():
        return SyncLine(name, "skipped", "not a folder")
    result = validate_tool_dir(path, context=context)
    if not result.ok:
        return SyncLine(name, "invalid", "; ".join(str(p) for p in result.errors))
    try:
        files = bundle.read_tool_dir(path)
    except bundle.BundleError as exc:
        return SyncLine(name, "invalid", str(exc))

    seed_number = result.manifest.version
    tool = Tool.objects.filter(name=name).first()
    if tool is not None and tool.latest_number >= seed_number:
        detail = f"database has v{tool.latest_number}, seed v{seed_number}"
        return SyncLine(name, "unchanged", detail)
    try:
        saved = save_version(
            name,
            files,
            actor=actor,
            source=VersionSource.SEED,
            note=f"seed v{seed_number}",
            number=seed_number,
            publish=True,
            context=context,
        )
    except InvalidTool as exc:
        return SyncLine(name, "invalid", str(exc))
    except SigningKeyMissing as exc:
        return SyncLine(name, "blocked", f"v{seed_number} not imported: {exc}")
    except ValueError:
        # Another process imported the same or a newer version meanwhile.
        return SyncLine(name, "unchanged", "imported concurrently")
    status = "imported" if tool is None else "updated"
    return SyncLine(name, status, f"v{saved.version.number}")
