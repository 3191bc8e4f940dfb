from __future__ import annotations

import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import Q

from tools_app.models.fields import StoredJSONField
from tools_app.runs.progress import Progress


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    LOST = "lost"


FINISHED = (
    RunStatus.SUCCEEDED,
    RunStatus.FAILED,
    RunStatus.CANCELLED,
    RunStatus.TIMED_OUT,
    RunStatus.LOST,
)


class RunVia(models.TextChoices):
    BROWSER = "browser"
    API = "api", "API"
    COMMAND = "command"
    MCP = "mcp", "MCP"


class RunQuerySet(models.QuerySet):
    def active(self) -> RunQuerySet:
        return self.filter(status__in=(RunStatus.QUEUED, RunStatus.RUNNING))

    def stale(self, cutoff: datetime) -> RunQuerySet:
        """Running runs whose worker last beat (or, never having beaten, started) before
        `cutoff`: their worker died (tools_app/runs/reaper.py reaps them)."""
        return self.filter(
            Q(status=RunStatus.RUNNING)
            & (Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff))
        )

    def unclaimed(self, cutoff: datetime) -> RunQuerySet:
        """Queued runs whose message went unanswered for the timeout: never re-sent and
        created before `cutoff`, or re-sent before it."""
        return self.filter(
            Q(status=RunStatus.QUEUED)
            & (Q(resent_at__isnull=True, created_at__lt=cutoff) | Q(resent_at__lt=cutoff))
        )


class Run(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tool = models.ForeignKey("tools_app.Tool", on_delete=models.CASCADE, related_name="runs")
    version = models.ForeignKey(
        "tools_app.ToolVersion", on_delete=models.CASCADE, related_name="runs"
    )
    status = models.CharField(
        max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True
    )
    via = models.CharField(max_length=16, choices=RunVia.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    token = models.ForeignKey(
        "tools_app.AgentToken", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Params as shown and stored: sensitive inputs replaced by a mask.
    params = StoredJSONField(default=dict)
    # Sensitive input values, encrypted, kept only until the run starts.
    sealed_params = models.TextField(blank=True, default="")
    result = StoredJSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    stderr_tail = models.TextField(blank=True)
    notices = models.JSONField(default=list, blank=True)
    isolation = models.CharField(max_length=16, blank=True)
    # Why the run had the plain-process fallback instead of bubblewrap (on its worker).
    isolation_reason = models.CharField(max_length=500, blank=True)
    # Started in a sandbox prepared before the run (tools_app/runner/standby.py).
    spare = models.BooleanField(default=False)
    # The egress policy the run had (tools_app/egress/policy.py), as shown on the run page.
    network_policy = models.TextField(blank=True, default="")
    # The System page's egress exceptions when the run was started: the worker applies
    # these (no query of its own), and a later change applies to runs started after it.
    egress_allows = models.JSONField(default=list, blank=True)
    # The CPU limit the run had ("1 CPU"; "none" where no cpu cgroup enforced it).
    cpu_limit = models.CharField(max_length=40, blank=True, default="")
    exit_code = models.IntegerField(null=True, blank=True)
    # An http tool's JSON response, redacted ({"status", "body"}), so a developer can keep
    # it as a sample (docs/http-tools.md); null for code tools and other responses.
    response = models.JSONField(null=True, blank=True)
    # Wall-time limit in seconds when the caller lowered or raised the tool's own
    # (`run_tool --timeout`); null means the manifest's `timeout`.
    timeout = models.FloatField(null=True, blank=True)
    # An http tool's case replayed offline (docs/cases.md `sample:`): the console answers
    # from the version's samples/<name>.json instead of the network; empty: a real run.
    replay_sample = models.CharField(max_length=64, blank=True, default="")
    # How long the tool process ran, as the runner measured it.
    duration = models.FloatField(null=True, blank=True)
    # The latest valid progress the tool sent (tools_app/runs/progress.py), so the run page and
    # the API show it without reading the updates; progress_total null: no bar.
    progress = models.FloatField(null=True, blank=True)
    progress_total = models.FloatField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    worker = models.CharField(max_length=200, blank=True)
    # The id of the web request that started the run (tools_app/ops/logcontext.py): the
    # worker's log lines of the run carry it too; empty when no request started it.
    request_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # When the reaper sent the task again because no worker had claimed the run.
    resent_at = models.DateTimeField(null=True, blank=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # Run history: per tool and per person, newest first.
            models.Index(fields=["tool", "-created_at"], name="run_tool_created"),
            models.Index(fields=["user", "-created_at"], name="run_user_created"),
            # Analytics (tools_app/analytics/figures.py): a tool's runs over a window with
            # every column the figures read, so both databases answer from the index
            # alone, without a heap read per run (bench/analytics.py).
            models.Index(
                fields=["tool", "created_at", "version", "status", "duration", "started_at"],
                name="run_figures",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool_id} {self.id}"

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED

    @property
    def progress_info(self) -> Progress | None:
        return None if self.progress is None else Progress(self.progress, self.progress_total)

    def can_download(self, actor) -> bool:
        """May `actor` (anything with `.user` and `.token`, e.g. tools_app.audit.Actor)
        download this run's artifacts? Artifacts can hold the starter's sensitive inputs
        and whatever the tool fetched with its credentials, so only the run's own starter
        (the same person, or the same agent token) and admins may; viewers and other
        developers see the names only."""
        from tools_app.roles import ADMIN, has_role

        user = getattr(actor, "user", None)
        token = getattr(actor, "token", None)
        if user is not None and user.is_authenticated:
            if has_role(user, ADMIN):
                return True
            if self.user_id is not None and self.user_id == user.pk:
                return True
        return token is not None and self.token_id is not None and self.token_id == token.pk


class RunUpdate(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="updates")
    seq = models.PositiveIntegerField()
    content = StoredJSONField()
    # The update's own progress/total when the tool sent valid ones (tools_app/runs/progress.py).
    progress = models.FloatField(null=True, blank=True)
    total = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="unique_run_update")]

    def __str__(self) -> str:
        return f"{self.run_id} #{self.seq}"

    @property
    def progress_info(self) -> Progress | None:
        return None if self.progress is None else Progress(self.progress, self.total)


class ArtifactStore(models.TextChoices):
    """Where an artifact's bytes are: somewhere every web server and worker can reach
    (the database, or the storage CONSOLE_ARTIFACT_STORAGE names), or, for artifacts kept
    before 0006, a file under the worker's ARTIFACTS_PATH."""

    DATABASE = "database"
    STORAGE = "storage"
    FILE = "file"


class RunArtifactQuerySet(models.QuerySet):
    def content_of(self, pk: int) -> bytes | None:
        row = self.filter(pk=pk).values_list("content", flat=True).first()
        return bytes(row) if row is not None else None


class RunArtifactManager(models.Manager.from_queryset(RunArtifactQuerySet)):
    def get_queryset(self) -> RunArtifactQuerySet:
        # Up to 10 MiB each: lists of artifacts (run pages, the API, admin) never load them.
        return super().get_queryset().defer("content")


class RunArtifact(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="artifacts")
    name = models.CharField(max_length=255)
    size = models.PositiveBigIntegerField()
    store = models.CharField(
        max_length=10, choices=ArtifactStore.choices, default=ArtifactStore.DATABASE
    )
    # The bytes, when store is `database` (within the runner's caps: 10 MiB a file, 50 a run).
    content = models.BinaryField(null=True, editable=False)
    # A name in storages["artifacts"] (store `storage`), or relative to
    # settings.ARTIFACTS_PATH (store `file`); empty for `database`.
    path = models.CharField(max_length=500, blank=True)

    objects = RunArtifactManager()

    class Meta:
        ordering = ["run", "name"]

    def __str__(self) -> str:
        return self.name
