"""The analytics' hourly rollups (tools_app/analytics/rollup.py, docs/runs.md "Analytics"):
what the Analytics tab reads instead of every run of its window."""

from __future__ import annotations

from django.db import models


class RunHour(models.Model):
    """One version's runs queued in one hour (UTC): their counts by outcome and their
    durations and queue waits, each list sorted, so a window's exact percentiles are a
    merge of its hours' lists. `stale`: the hour is read from the runs instead (one of
    them was still going when it was rolled up, or a lost run finished since)."""

    tool = models.ForeignKey("tools_app.Tool", on_delete=models.CASCADE, related_name="+")
    version = models.ForeignKey("tools_app.ToolVersion", on_delete=models.CASCADE, related_name="+")
    hour = models.DateTimeField()
    runs = models.PositiveIntegerField(default=0)
    succeeded = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0)
    cancelled = models.PositiveIntegerField(default=0)
    lost = models.PositiveIntegerField(default=0)
    in_progress = models.PositiveIntegerField(default=0)
    # Seconds, sorted, as 8-byte doubles (tools_app/analytics/rollup.py pack).
    durations = models.BinaryField(default=b"")
    waits = models.BinaryField(default=b"")
    stale = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tool", "hour", "version"], name="run_hour_unique")
        ]

    def __str__(self) -> str:
        return f"{self.tool_id} v{self.version_id} {self.hour:%Y-%m-%d %H:00}"


class RunHourMark(models.Model):
    """Which of a tool's hours are rolled up: every hour from `since` to `through`
    (exclusive) has a RunHour per version that ran in it, and no row means no run."""

    tool = models.OneToOneField("tools_app.Tool", on_delete=models.CASCADE, related_name="+")
    since = models.DateTimeField()
    through = models.DateTimeField()
    # A new random value whenever the tool's rows change (rolled up, or an hour made
    # stale), so a reader that kept what it read under one stamp knows it still holds.
    stamp = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.tool_id} {self.since:%Y-%m-%d %H:00} – {self.through:%Y-%m-%d %H:00}"
