"""What a caller hands the runner and what it gets back."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools_app.egress.policy import Policy

from .limits import Limits

# Run statuses.
SUCCEEDED = "succeeded"
FAILED = "failed"
CANCELLED = "cancelled"
TIMED_OUT = "timed_out"


@dataclass(frozen=True)
class RunRequest:
    tool_dir: Path  # the materialized tool folder; mounted read-only
    language: str  # typescript | javascript | python | bash
    entry: str  # entry file name inside tool_dir, e.g. "index.ts"
    params: dict[str, Any]
    tool_call_id: str
    env: dict[str, str]  # only the declared integrations' variables, decrypted
    secrets: dict[str, str]  # label -> plaintext, for redaction
    network: bool = True
    limits: Limits = field(default_factory=Limits)
    work_root: Path | None = None  # where the per-run dir is made (a temp dir if None)
    # Host files or folders the tool may read (an integration's database path, a shared
    # input folder); bound read-only at the same path. Never the console's own files.
    ro_binds: tuple[Path, ...] = ()
    # Where a network: true run may connect (tools_app/egress/policy.py); None: the policy of
    # CONSOLE_TOOL_NETWORK_ALLOW alone.
    egress: Policy | None = None
    # `file` inputs (tools_app/manifest/input_files.py): path relative to the work dir -> bytes,
    # written before the tool starts; the params named in file_params hold those relative
    # paths (or lists of them), made absolute as the tool sees its work dir.
    input_files: dict[str, bytes] = field(default_factory=dict)
    file_params: tuple[str, ...] = ()
    # The tool's declared `outputs` (tools_app/manifest/outputs.py): a result that succeeded
    # must carry a structuredContent object matching them.
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Artifact:
    name: str  # path relative to TOOL_OUTPUT_DIR, redacted
    path: Path  # the runner's copy, under <run dir>/artifacts; the caller moves it
    size: int


@dataclass
class RunOutcome:
    status: str  # succeeded | failed | cancelled | timed_out
    # {"content": [{"type": "text", "text": ...}], "isError": bool, "structuredContent"?: {...}}
    result: dict[str, Any]
    stderr_tail: str
    artifacts: list[Artifact]
    isolation: str  # "bwrap" or "process"
    exit_code: int | None  # negative: killed by that signal (subprocess convention)
    duration: float
    notices: list[str] = field(default_factory=list)
    spare: bool = False  # started in a spare sandbox (standby.py) rather than cold
    network_policy: str = ""  # the egress policy the run had, for people (network.py)
    cpu_limit: str = ""  # "1 CPU", or "none" where no cpu cgroup enforced it (cgroups.py)
    response: dict[str, Any] | None = None  # an http tool's redacted JSON response
