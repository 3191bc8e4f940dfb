from __future__ import annotations

from django.conf import settings
from django.db import models


class EgressExceptionQuerySet(models.QuerySet):
    def entries(self) -> list[str]:
        return list(self.order_by("entry").values_list("entry", flat=True))


class EgressException(models.Model):
    """One egress exception an admin added on the System page: a destination tools and
    console-side requests may reach although the policy refuses it by default (a SearXNG
    on 127.0.0.1:8888). Read at every run and request, so no restart is needed."""

    # CIDR, host:port or CIDR:port, as CONSOLE_TOOL_NETWORK_ALLOW takes it (one entry).
    entry = models.CharField(max_length=100, unique=True)
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = EgressExceptionQuerySet.as_manager()

    class Meta:
        ordering = ["entry"]

    def __str__(self) -> str:
        return self.entry
