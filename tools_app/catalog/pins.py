"""Agent token pins, against rug pulls (issue 26, docs/agent-api.md#pinned-tokens).

A pinned token (AgentToken.pins: tool name -> digest, not empty) sees and runs only the
tools whose signed digest an admin approved for it: a tool whose files or model view
changed has another digest, so to that token it is a new tool waiting for approval,
never a silent swap. An unpinned token (pins empty) sees every published tool. No HTTP
here: the API, MCP, the commands and the tokens page call these functions."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.db import transaction

from tools_app.audit import Actor, record
from tools_app.catalog import integrity
from tools_app.models import AgentToken, Tool


class PinError(Exception):
    """A tool that cannot be approved (unknown, unpublished, or not verifying)."""


@dataclass(frozen=True)
class NotApproved:
    """Why a pinned token may not see or run `name`."""

    name: str
    pinned: str | None
    current: str

    @property
    def message(self) -> str:
        if self.pinned is None:
            why = f"this token is pinned and has no pin for {self.name}"
        else:
            why = (
                f"{self.name} changed since it was approved for this token: pinned digest "
                f"{self.pinned}, current digest {self.current or '(none)'}"
            )
        fix = f"an admin approves it with `manage.py pin_token PREFIX --approve {self.name}`"
        return f"{why}; {fix}"

    def detail(self) -> dict[str, str | None]:
        return {
            "tool": self.name,
            "pinned": self.pinned,
            "current": self.current or None,
            "message": self.message,
        }


def approved(pins: Mapping[str, str], name: str, digest: str) -> bool:
    """Whether a token with `pins` may see and run the content `digest` of `name`."""
    return not pins or (bool(digest) and pins.get(name) == digest)


def refusal(token: AgentToken | None, name: str, digest: str) -> NotApproved | None:
    """None when `token` may use `digest` of `name`; else why not."""
    pins = token.pins if token is not None else {}
    if approved(pins, name, digest):
        return None
    return NotApproved(name, pins.get(name), digest)


def pins_key(token: AgentToken | None) -> str:
    """A short stand-in for a token's pins in cache keys and ETags ("" unpinned)."""
    pins = token.pins if token is not None else {}
    if not pins:
        return ""
    raw = json.dumps(pins, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def current_digests(names: Iterable[str] | None = None) -> dict[str, str]:
    """name -> digest of the published tools `names` (default: all) whose stored version
    verifies now. A name that is not published, or does not verify, is a PinError."""
    if names is None:
        integrity.forget()  # an approval reads the database, not a memo
        found = {seal.name: seal.digest for seal in integrity.seals().by_name.values() if seal.ok}
        if not found:
            raise PinError("no published tool verifies: nothing to pin")
        return found
    digests = {}
    for name in dict.fromkeys(names):
        tool = Tool.objects.published().select_related("published_version").filter(name=name)
        tool = tool.first()
        if tool is None or tool.published_version is None:
            raise PinError(f"no published tool is named {name!r}")
        version = tool.published_version
        version.tool = tool
        seal = integrity.seal_of(version)
        if not seal.ok:
            raise PinError(f"{name} does not match its signature: {'; '.join(seal.problems)}")
        digests[name] = seal.digest
    return digests


def approve(token: AgentToken, names: Iterable[str] | None, *, actor: Actor) -> dict[str, str]:
    """Pin `token` to the current digests of `names` (default: every published tool
    that verifies), keeping its other pins; returns what was approved."""
    return pin(token, current_digests(names), actor=actor)


def pin(token: AgentToken, digests: Mapping[str, str], *, actor: Actor) -> dict[str, str]:
    """Add `digests` (current_digests()) to the token's pins, audited."""
    digests = dict(digests)
    with transaction.atomic():
        locked = AgentToken.objects.select_for_update().get(pk=token.pk)
        changed = {name: d for name, d in digests.items() if locked.pins.get(name) != d}
        locked.pins = dict(sorted({**locked.pins, **digests}.items()))
        locked.save(update_fields=["pins"])
        if changed:
            record(
                actor,
                "token.pin",
                locked,
                f"{locked.name} approved {', '.join(sorted(changed))}",
                {"prefix": locked.prefix, "approved": changed},
            )
    token.pins = locked.pins
    return digests


def approved_versions(token: AgentToken) -> dict[str, int]:
    """name -> published version number of the tools approved for the pinned `token`
    (their stored signature claims the pinned digest; whether it verifies is checked
    where they are served and run)."""
    rows = (
        Tool.objects.published()
        .filter(name__in=list(token.pins))
        .values_list("name", "published_version__number", "published_version__signature")
    )
    return {
        name: number
        for name, number, signature in rows
        if approved(token.pins, name, integrity.claimed_digest(signature))
    }


@dataclass(frozen=True)
class PinState:
    """One line of a token's pins: `state` is approved, changed (the tool's digest is
    not the pinned one), unpinned (published, no pin) or gone (no longer published, or
    does not verify)."""

    name: str
    pinned: str | None
    current: str | None
    state: str


def states(token: AgentToken) -> list[PinState]:
    """Every pinned or published tool and where it stands for `token` (empty unpinned)."""
    if not token.pins:
        return []
    current = {seal.name: seal.digest for seal in integrity.seals().by_name.values() if seal.ok}
    lines = []
    for name in sorted(set(token.pins) | set(current)):
        pinned, now = token.pins.get(name), current.get(name)
        if now is None:
            state = "gone"
        elif pinned is None:
            state = "unpinned"
        else:
            state = "approved" if pinned == now else "changed"
        lines.append(PinState(name, pinned, now, state))
    return lines
