"""What the test-case page tests share: a tool that echoes its inputs (with a sensitive
one), a run of it finished without a worker, and cases.yaml texts."""

from __future__ import annotations

from django.utils import timezone

from tests.support import tool_files
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.models import Run, Tool, ToolVersion
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import start

GREET_TS = """
export async function execute(toolCallId: string, params: any, signal: AbortSignal,
                              onUpdate: (u: any) => void) {
  return { content: [{ type: "text", text: `hello ${params.who}` }] };
}
"""

INPUTS = {
    "who": {"type": "string", "description": "Whom to greet."},
    "api_key": {"type": "string", "description": "A key.", "optional": True,
                "sensitive": True},
}  # fmt: skip

# A case that passes against GREET_TS, and one that fails against it.
PASSING = """cases:
  - name: greets_ann
    description: Ann is greeted
    inputs: {who: Ann}
    expect:
      - is_error: false
      - text: hello Ann
"""
FAILING = """cases:
  - name: greets_bob
    inputs: {who: Bob}
    expect:
      - text: hi Bob
"""


def greet_tool(*, cases: str | None = None, publish: bool = True, name: str = "greet") -> Tool:
    files = tool_files(name, source=GREET_TS, inputs=INPUTS)
    if cases is not None:
        files["cases.yaml"] = cases.encode()
    save_version(name, files, actor=Actor.system(), publish=publish)
    return Tool.objects.get(name=name)


def add_version(tool: Tool, *, cases: str | None) -> ToolVersion:
    """A new draft version of `tool` with `cases` as its cases.yaml (None: without one)."""
    files = tool_files(tool.name, source=GREET_TS, inputs=INPUTS, description="Again.")
    if cases is not None:
        files["cases.yaml"] = cases.encode()
    return save_version(tool.name, files, actor=Actor.system()).version


def finished_run(
    version: ToolVersion, user, params: dict, text: str = "hello Ann", **fields
) -> Run:
    """A browser run of `version` by `user`, marked succeeded with `text` as its result
    (no worker: the pages only read it)."""
    run = start.start_run(
        version, params, actor=Actor(user=user), via=RunVia.BROWSER, enqueue=False
    )
    now = timezone.now()
    values = {
        "status": RunStatus.SUCCEEDED,
        "started_at": now,
        "finished_at": now,
        "heartbeat_at": now,
        "duration": 0.2,
        "exit_code": 0,
        "result": {"content": [{"type": "text", "text": text}], "isError": False},
        **fields,
    }
    Run.objects.filter(pk=run.pk).update(**values)
    run.refresh_from_db()
    return run
