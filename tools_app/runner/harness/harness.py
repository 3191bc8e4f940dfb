"""Runs a python tool's execute() inside the sandbox and reports to the runner.

Started as `python -I -B -u harness.py ENTRY CONFIG_JSON` with the params as JSON on stdin,
or as `harness.py --standby` in a sandbox started before its run (standby.py), which says
{"type": "ready"} and then reads {"entry", "config", "env", "params"} as one JSON object on
stdin.
Protocol messages are JSON lines on fd 3, so nothing the tool prints can forge them:
{"type": "update", "content": [...], "truncated": bool, "progress"?, "total"?},
{"type": "update_limit"} once the update limit is passed, and one {"type": "result",
"content": [...], "isError": bool, "truncated": bool, "size": int} before the harness exits.
stdlib only; no console code.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.util
import inspect
import json
import os
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

PROTOCOL_FD = 3
SHAPE = "{'content': [{'type': 'text', 'text': '...'}], 'isError': False}"
MAX_DEPTH = 64  # tools_app/lib/nesting.py's cap, which the runner applies again


class AbortSignal:
    """What the tool gets as `signal`: `aborted` turns True when the run is cancelled."""

    def __init__(self) -> None:
        self._aborted = False

    @property
    def aborted(self) -> bool:
        return self._aborted

    def _abort(self, signum: int, frame: object) -> None:
        self._aborted = True


_send_lock = threading.Lock()  # a tool may call on_update from several threads


def _send(message: dict[str, Any], raw: dict[str, str] | None = None) -> None:
    """Write `message` as one line; `raw` maps more keys to values that are JSON text."""
    text = json.dumps(message, ensure_ascii=False)
    for key, value in (raw or {}).items():
        text = f"{text[:-1]}, {json.dumps(key)}: {value}}}"
    data = (text + "\n").encode("utf-8", "replace")
    with _send_lock:
        while data:
            data = data[os.write(PROTOCOL_FD, data) :]


def _describe(value: object) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 200 else text[:200] + "..."


def _problem(value: object, what: str) -> str | None:
    """Why `value` is not a {"content": [...], "isError": bool} dict, or None."""
    if not isinstance(value, dict):
        return f"{what} must be a dict like {SHAPE}, got {_describe(value)}"
    content = value.get("content")
    if not isinstance(content, list):
        return f"{what}['content'] must be a list, got {_describe(content)}"
    for index, item in enumerate(content):
        if not (
            isinstance(item, dict)
            and item.get("type") == "text"
            and isinstance(item.get("text"), str)
        ):
            expected = "{'type': 'text', 'text': str}"
            return f"{what}['content'][{index}] must be {expected}, got {_describe(item)}"
    if not isinstance(value.get("isError", False), bool):
        return f"{what}['isError'] must be a bool, got {_describe(value.get('isError'))}"
    return None


def _structured(value: dict[str, Any], max_bytes: int) -> tuple[str | None, str | None]:
    """(the result's structuredContent as JSON text, or None; why it cannot be). The runner
    checks it against the tool's outputs (tools_app/manifest/outputs.py)."""
    if "structuredContent" not in value:
        return None, None
    structured = value["structuredContent"]
    if not isinstance(structured, dict):
        return None, f"structuredContent must be a dict, got {_describe(structured)}"
    try:
        text = json.dumps(structured, ensure_ascii=False, allow_nan=False)
    except RecursionError:
        return None, f"structuredContent is nested deeper than {MAX_DEPTH} levels"
    except (TypeError, ValueError) as exc:
        return None, f"structuredContent is not JSON: {exc}"
    if _depth(structured) > MAX_DEPTH:
        return None, f"structuredContent is nested deeper than {MAX_DEPTH} levels"
    size = len(text.encode("utf-8", "replace"))
    if size > max_bytes:
        return None, f"structuredContent is {size} bytes, over the result limit of {max_bytes}"
    return text, None


def _depth(value: object) -> int:
    if isinstance(value, dict):
        value = list(value.values())
    if not isinstance(value, list):
        return 0
    deepest = 0
    for child in value:
        deepest = max(deepest, _depth(child))
        if deepest >= MAX_DEPTH:
            break
    return deepest + 1


def _count(value: object) -> object:
    """A progress or total as it goes on the pipe: a finite number as it is, anything else
    as the name of its kind, which the console names in a notice (tools_app/runs/progress.py).
    Never an error: a bad count must not fail the run."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:
            return "Infinity" if value > 0 else "-Infinity"
        if number != number:
            return "NaN"
        if number in (float("inf"), float("-inf")):
            return "Infinity" if number > 0 else "-Infinity"
        return value if isinstance(value, int) else number
    if value is None:
        return "null"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    return "object"


def _clip(content: list[dict[str, str]], max_bytes: int) -> tuple[list[dict[str, str]], bool, int]:
    """Texts cut to `max_bytes` of UTF-8 in all; returns (content, truncated, full size)."""
    clipped, used, size = [], 0, 0
    for item in content:
        data = item["text"].encode("utf-8", "replace")
        size += len(data)
        room = max_bytes - used
        if room <= 0:
            continue
        if len(data) > room:
            data = data[:room]
        used += len(data)
        clipped.append({"type": "text", "text": data.decode("utf-8", "ignore")})
    return clipped, size > max_bytes, size


class _Runner:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.updates = 0
        self.finished = False

    def on_update(self, update: object) -> None:
        # Progress alone ({"progress", "total"}, like MCP's notifications/progress) needs
        # no content.
        if isinstance(update, dict) and "content" not in update and "progress" in update:
            # Its message, if any, is the update's text (as on a bash tool's fd 3).
            message = update.get("message")
            text = message if isinstance(message, str) else ""
            update = {k: v for k, v in update.items() if k != "message"}
            update["content"] = [{"type": "text", "text": text}] if text else []
        problem = _problem(update, "on_update() argument")
        if problem:
            raise TypeError(problem)
        assert isinstance(update, dict)
        self.updates += 1
        if self.updates > self.config["maxUpdates"]:
            if self.updates == self.config["maxUpdates"] + 1:
                _send({"type": "update_limit"})
            return
        content, truncated, _ = _clip(update["content"], self.config["maxUpdateBytes"])
        message: dict[str, Any] = {"type": "update", "content": content, "truncated": truncated}
        for key in ("progress", "total"):
            if key in update:
                message[key] = _count(update[key])
        _send(message)

    def finish(
        self, content: list[dict[str, str]], is_error: bool, structured: str | None = None
    ) -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # the tool may have closed or replaced it
                stream.flush()
        clipped, truncated, size = _clip(content, self.config["maxResultBytes"])
        message = {
            "type": "result",
            "content": clipped,
            "isError": is_error,
            "truncated": truncated,
            "size": size,
        }
        if structured is None:
            _send(message)
        else:  # already JSON text: spliced in, not encoded twice
            _send(message, {"structuredContent": structured})
        # Exit now, whatever threads or handles the tool left behind.
        os._exit(0)

    def fail(self, message: str) -> None:
        self.finish([{"type": "text", "text": message}], True)


async def _wait(awaitable: Any) -> Any:
    return await awaitable


def _load(entry: Path) -> Any:
    sys.path.insert(0, str(entry.parent))  # so the tool can import its own extra files
    spec = importlib.util.spec_from_file_location(entry.stem, entry)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[entry.stem] = module
    spec.loader.exec_module(module)
    return module


def _arguments() -> tuple[Path, dict[str, Any], Any]:
    """(entry, config, params), from the command line and stdin or, in standby, stdin."""
    if sys.argv[1] == "--standby":
        _send({"type": "ready"})
    raw = sys.stdin.buffer.read()
    if sys.argv[1] == "--standby":
        message = json.loads(raw)
        os.environ.update(message["env"])
        return Path(message["entry"]), message["config"], message["params"]
    return Path(sys.argv[1]), json.loads(sys.argv[2]), json.loads(raw) if raw.strip() else {}


def main() -> None:
    os.set_inheritable(PROTOCOL_FD, False)  # the tool's own subprocesses don't get it
    abort = AbortSignal()
    signal.signal(signal.SIGTERM, abort._abort)
    entry, config, params = _arguments()
    runner = _Runner(config)
    tool_call_id = os.environ.get("TOOL_CALL_ID", "")

    error: str | None = None
    out_of_memory = False
    value: Any = None
    try:
        module = _load(entry)
        execute = getattr(module, "execute", None)
        if not callable(execute):
            error = f"{entry.name} does not define execute(tool_call_id, params, signal, on_update)"
        else:
            value = execute(tool_call_id, params, abort, runner.on_update)
            if inspect.isawaitable(value):
                value = asyncio.run(_wait(value))
    except MemoryError:
        out_of_memory = True
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: report, don't die
        try:
            traceback.print_exc()
            error = f"{type(exc).__name__}: {exc}"
        except MemoryError:
            out_of_memory = True
    if out_of_memory:
        # The traceback that held the tool's frames is gone now; free them before reporting.
        value = None
        gc.collect()
        error = f"MemoryError: the tool ran out of memory (limit {config['memoryMb']} MiB)"
    if error is not None:
        runner.fail(error)
    problem = _problem(value, "execute() result")
    if problem:
        runner.fail(f"The tool returned a malformed result: {problem}")
    structured, problem = _structured(value, config["maxResultBytes"])
    if problem:
        runner.fail(f"The tool returned a malformed result: {problem}")
    runner.finish(value["content"], bool(value.get("isError", False)), structured)


if __name__ == "__main__":
    main()
