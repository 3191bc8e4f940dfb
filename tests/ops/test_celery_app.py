"""The Celery app's Django wiring: workers keep their database connection between tasks
and drop it only when it is broken or older than CONN_MAX_AGE, as the web server does."""

from __future__ import annotations

import time

import pytest
from celery import signals
from celery.fixups.django import DjangoWorkerFixup
from django.db import connection

from console.celery import app
from tools_app.tasks import reap_lost_runs


@pytest.mark.django_db(transaction=True)
def test_the_worker_fixup_keeps_the_connection_between_tasks() -> None:
    connection.ensure_connection()
    before = connection.connection
    fixup = DjangoWorkerFixup(app)
    for _ in range(10):  # what the worker does around each task
        fixup.on_task_prerun(sender=reap_lost_runs)
        fixup.on_task_postrun(sender=reap_lost_runs)
    assert connection.connection is before


@pytest.mark.django_db(transaction=True)
def test_it_drops_an_obsolete_connection_before_a_task() -> None:
    connection.ensure_connection()
    connection.close_at = time.monotonic() - 1  # older than CONN_MAX_AGE
    signals.task_prerun.send(sender=reap_lost_runs)
    assert connection.connection is None


@pytest.mark.django_db(transaction=True)
def test_it_keeps_a_fresh_connection_before_a_task() -> None:
    connection.ensure_connection()
    before = connection.connection
    signals.task_prerun.send(sender=reap_lost_runs)
    assert connection.connection is before
