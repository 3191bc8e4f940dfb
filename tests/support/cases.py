"""Cases (docs/cases.md) for tests: a small TypeScript tool with cases, saved as versions,
and a check's runs executed in the test process."""

from __future__ import annotations

import uuid

from tests.support import tool_files
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.models import CaseCheck, ToolVersion
from tools_app.runs import execute, replay

GREET_TS = """
export async function execute(toolCallId: string, params: any, signal: AbortSignal,
                              onUpdate: (u: any) => void) {
  const keyed = params.key ? "with a key" : "without a key";
  return {
    content: [{ type: "text", text: `hello ${params.name} ${keyed}` }],
    structuredContent: { greeting: `hello ${params.name}`, keyed: Boolean(params.key) },
  };
}
"""

INPUTS = {
    "name": {"type": "string", "description": "Who."},
    "key": {"type": "string", "description": "A key.", "sensitive": True, "optional": True},
}

CASES = """\
cases:
  - name: greets_ada
    inputs: {name: Ada}
    expect:
      - is_error: false
      - contains: hello Ada
  - name: greets_bob
    inputs: {name: Bob}
    expect:
      - regex: "hello B.b"
"""


def greet_files(cases: str | None = CASES, source: str = GREET_TS) -> dict[str, bytes]:
    files = tool_files("greet", source=source, inputs=INPUTS)
    if cases is not None:
        files["cases.yaml"] = cases.encode()
    return files


def save(files, *, publish: bool = False) -> ToolVersion:
    return save_version("greet", files, actor=Actor.system(), publish=publish).version


def rewrite(version: ToolVersion, cases: str) -> ToolVersion:
    """Put a cases.yaml no save would accept (duplicates, unknown inputs) into a version."""
    files = {**version.files, "cases.yaml": cases}
    ToolVersion.objects.filter(pk=version.pk).update(files=files, sha256=uuid.uuid4().hex)
    replay._PARSED.clear()
    version.refresh_from_db()
    return version


def run_in_process(check: CaseCheck) -> CaseCheck:
    """Execute the check's queued runs here (as `test_tools` does), then refresh."""
    for run_id in check.case_runs.exclude(run=None).values_list("run_id", flat=True):
        execute.execute_run(run_id)
    check.refresh_from_db()
    return replay.refresh(check)
