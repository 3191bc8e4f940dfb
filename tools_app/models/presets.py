from __future__ import annotations

import json

from django.conf import settings
from django.db import models

from tools_app.models.tools import Tool


class ToolPresetQuerySet(models.QuerySet):
    def of(self, tool: Tool) -> ToolPresetQuerySet:
        return self.filter(tool=tool).order_by("input")


class ToolPreset(models.Model):
    """An admin's value for one `user-only` input of a tool (docs/tool-format.md). A plain
    preset keeps its value in `value`; a sensitive one only in `ciphertext`
    (tools_app.integrations.vault), write-only like an integration secret: pages say when it
    was set and by whom."""

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="presets")
    input = models.CharField(max_length=64)
    sensitive = models.BooleanField(default=False)
    value = models.JSONField(null=True, blank=True)
    ciphertext = models.TextField(blank=True, default="")
    key_id = models.CharField(max_length=16, blank=True, default="")
    set_at = models.DateTimeField()
    set_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = ToolPresetQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tool", "input"], name="unique_tool_preset"),
        ]

    def __str__(self) -> str:
        return f"{self.tool_id}.{self.input}"

    @property
    def shown(self) -> str:
        """A plain value as JSON, the notation of TOOL.md, the API and the run form's raw
        params (not Python's: ['a'], True, None)."""
        return json.dumps(self.value, ensure_ascii=False)
