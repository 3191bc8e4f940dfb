"""The sandboxed tool runner: every tool execution goes through `run()`.

Pure Python, no Django: a Django-side wrapper turns a tool version, its integrations and
the settings into a `RunRequest` and stores the `RunOutcome`.
"""

from __future__ import annotations

from .core import run
from .limits import Limits
from .records import (
    CANCELLED,
    FAILED,
    LANGUAGES,
    SUCCEEDED,
    TIMED_OUT,
    Artifact,
    RunOutcome,
    RunRequest,
)
from .redact import Redactor
from .sandbox import isolation_level, node_executable

__all__ = [
    "CANCELLED",
    "FAILED",
    "LANGUAGES",
    "SUCCEEDED",
    "TIMED_OUT",
    "Artifact",
    "Limits",
    "RunOutcome",
    "RunRequest",
    "Redactor",
    "isolation_level",
    "node_executable",
    "run",
]
