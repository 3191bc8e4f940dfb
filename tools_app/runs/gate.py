"""The publish gate: publishing a version replays its cases first (runs/replay.py) and
publishes only when every one passes; an admin may override a failure with a reason."""

from __future__ import annotations

from dataclasses import dataclass

from tools_app.audit import Actor
from tools_app.models import CaseCheck, ToolVersion


@dataclass
class PublishRequest:
    published: bool  # published now (the version has no cases)
    check: CaseCheck | None  # the check that publishes on pass
    no_cases: bool


def request_publish(version: ToolVersion, *, actor: Actor, via: str) -> PublishRequest:
    raise NotImplementedError


def publish_passed(check: CaseCheck) -> None:
    raise NotImplementedError


def override(check: CaseCheck, *, actor: Actor, reason: str) -> None:
    raise NotImplementedError
