"""Replaying a version's cases (cases.yaml, docs/cases.md): one run per case through
runs.start.start_run, evaluated with tools_app.cases when each run finishes. The page, the
API and `test_tools` all start and read checks here."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from tools_app.audit import Actor
from tools_app.catalog.versions import SaveResult
from tools_app.models import CaseCheck, CaseRun, Run, ToolVersion


def start_check(
    version: ToolVersion,
    *,
    actor: Actor,
    via: str,
    names: Collection[str] | None = None,
    publish: bool = False,
) -> CaseCheck:
    raise NotImplementedError


def refresh(check: CaseCheck) -> CaseCheck:
    raise NotImplementedError


def wait(check: CaseCheck, timeout: float) -> CaseCheck:
    raise NotImplementedError


def check_json(check: CaseCheck) -> dict[str, Any]:
    raise NotImplementedError


def save_case_from_run(
    run: Run,
    *,
    name: str,
    description: str,
    expect: list[dict],
    sealed_values: Mapping[str, Any],
    actor: Actor,
    base: int | None = None,
) -> SaveResult:
    raise NotImplementedError


def accept_output(case_run: CaseRun, *, actor: Actor, base: int | None = None) -> SaveResult:
    raise NotImplementedError
