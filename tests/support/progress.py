"""The count_progress test tool (tests/data/tools/count_progress): progress 1..N of total N."""

from __future__ import annotations

from pathlib import Path

from tools_app.audit import Actor
from tools_app.models import Tool

COUNT_PROGRESS = Path(__file__).resolve().parents[1] / "data" / "tools" / "count_progress"


def add_count_progress() -> Tool:
    """The tool published, from its folder as a seed tool would be synced."""
    from tools_app.catalog.versions import save_version

    files = {path.name: path.read_bytes() for path in COUNT_PROGRESS.iterdir()}
    save_version("count_progress", files, actor=Actor.system(), publish=True)
    return Tool.objects.get(name="count_progress")
