"""A starting point for a Python tool.

It takes `steps` steps, reports progress after each through on_update, and stops as soon
as the run is cancelled (signal.aborted becomes true)."""

from __future__ import annotations

import time
from typing import Any

STEP_SECONDS = 0.5
POLL_SECONDS = 0.05  # how often a step looks at signal.aborted


def _result(text: str, is_error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def _wait(seconds: float, signal: Any) -> bool:
    """Sleep in short slices; False as soon as the run is cancelled."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if getattr(signal, "aborted", False):
            return False
        time.sleep(POLL_SECONDS)
    return not getattr(signal, "aborted", False)


def execute(tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any) -> dict:
    message = str(params.get("message") or "").strip()
    if not message:
        return _result("Error: message is required", True)
    steps = params.get("steps", 3)
    if steps is None:
        steps = 3
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 10:
        return _result("Error: steps must be an integer from 1 to 10", True)

    for step in range(1, steps + 1):
        if not _wait(STEP_SECONDS, signal):
            return _result("cancelled", True)
        if on_update is not None:
            on_update({"content": [{"type": "text", "text": f"step {step} of {steps}"}]})
    return _result(f"{message} (after {steps} steps)")
