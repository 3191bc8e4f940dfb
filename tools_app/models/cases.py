"""Replaying a version's cases (cases.yaml, docs/cases.md): one CaseCheck per "run all
cases", one CaseRun per case with the Run that replayed it. The cases themselves live in the
version's files, so they are versioned and diffed with the tool; these rows only hold what a
replay found (tools_app/runs/replay.py) and whether the publish gate acted on it
(tools_app/runs/gate.py)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from tools_app.models.fields import StoredJSONField
from tools_app.models.runs import Run, RunVia
from tools_app.models.tokens import AgentToken
from tools_app.models.tools import Tool, ToolVersion


class CheckStatus(models.TextChoices):
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    # The version has no cases: nothing to replay.
    EMPTY = "empty"


class CaseCheckQuerySet(models.QuerySet):
    def for_version(self, version: ToolVersion) -> CaseCheckQuerySet:
        return self.filter(version=version).order_by("-created_at")

    def latest_per_tool(self) -> CaseCheckQuerySet:
        """Each tool's newest check (the tool list's last case result), in one query:
        narrow it first, e.g. CaseCheck.objects.filter(tool__in=page).latest_per_tool()."""
        newest = CaseCheck.objects.filter(tool=models.OuterRef("tool")).order_by("-created_at")
        return self.filter(pk=models.Subquery(newest.values("pk")[:1]))


class CaseCheck(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="case_checks")
    version = models.ForeignKey(ToolVersion, on_delete=models.CASCADE, related_name="case_checks")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    token = models.ForeignKey(
        AgentToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    via = models.CharField(max_length=16, choices=RunVia.choices)
    status = models.CharField(
        max_length=16, choices=CheckStatus.choices, default=CheckStatus.RUNNING, db_index=True
    )
    total = models.PositiveIntegerField(default=0)
    passed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    errored = models.PositiveIntegerField(default=0)
    # Publish gate: publish this version when every case passes (runs/gate.py).
    publish_requested = models.BooleanField(default=False)
    # The gate published it (on pass, or an admin's override).
    published = models.BooleanField(default=False)
    override_reason = models.TextField(blank=True)
    override_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = CaseCheckQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tool", "-created_at"], name="casecheck_tool_created")]

    def __str__(self) -> str:
        return f"{self.tool_id} check {self.id}"

    @property
    def is_finished(self) -> bool:
        return self.status != CheckStatus.RUNNING


class CaseOutcome(models.TextChoices):
    PENDING = "pending"
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"


class CaseRun(models.Model):
    # Not `check`: that name is Model.check(), Django's system checks.
    case_check = models.ForeignKey(CaseCheck, on_delete=models.CASCADE, related_name="case_runs")
    # The case's place in cases.yaml (0-based), the key of a case within its check.
    position = models.PositiveIntegerField()
    name = models.CharField(max_length=64)
    run = models.OneToOneField(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="case_run"
    )
    outcome = models.CharField(
        max_length=16, choices=CaseOutcome.choices, default=CaseOutcome.PENDING
    )
    # [tools_app.cases.evaluate.Check.to_json()], once the run finished.
    checks = StoredJSONField(default=list, blank=True)
    # Why the case could not run (bad params, a sealed input this console cannot open).
    message = models.TextField(blank=True)

    class Meta:
        ordering = ["case_check", "position"]
        constraints = [
            models.UniqueConstraint(fields=["case_check", "position"], name="unique_case_run"),
        ]

    def __str__(self) -> str:
        return f"{self.case_check_id} #{self.position} {self.name}"
