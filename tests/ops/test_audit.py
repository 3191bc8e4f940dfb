"""The audit log is append-only: no update, no delete, not even in bulk."""

from __future__ import annotations

import pytest

from tools_app.audit import Actor, record
from tools_app.models import AgentToken, AuditEvent
from tools_app.models.audit import AppendOnlyError


def test_it_records_people_tokens_and_the_system(db, developer):
    token, _ = AgentToken.issue("ci-agent", ["registry:read"])
    record(Actor(user=developer, ip="127.0.0.1"), "x.person")
    record(Actor(token=token), "x.token")
    record(Actor.system(), "x.system")

    rows = {e.action: (e.actor_kind, e.actor) for e in AuditEvent.objects.all()}
    assert rows == {
        "x.person": ("user", "dave"),
        "x.token": ("token", "token:ci-agent"),
        "x.system": ("system", "system"),
    }


def test_it_refuses_changes(db):
    event = record(Actor.system(), "x.test", summary="original")
    event.summary = "rewritten"
    with pytest.raises(AppendOnlyError):
        event.save()
    with pytest.raises(AppendOnlyError):
        event.delete()
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.all().delete()
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.filter(pk=event.pk).update(summary="x")
    assert AuditEvent.objects.get().summary == "original"
