"""The publish gate (tools_app/runs/gate.py): a broken draft is blocked, passing cases publish
with no page open (the worker), no cases publish at once, and only an admin overrides,
with a reason, audited and marked on the version."""

from __future__ import annotations

import time

import pytest
from django.core.exceptions import PermissionDenied

from tests.support.agent_api import agent_client, reset_api_caches
from tests.support.cases import GREET_TS, greet_files, run_in_process, save
from tools_app.audit import Actor
from tools_app.models import AuditEvent, CaseCheck, Tool, ToolVersion
from tools_app.models.cases import CheckStatus
from tools_app.models.runs import RunVia
from tools_app.runs import gate, replay

BROKEN_TS = GREET_TS.replace("hello ", "bye ")


@pytest.fixture(autouse=True)
def fresh_parse_cache():
    replay._PARSED.clear()


def published_number() -> int | None:
    tool = Tool.objects.select_related("published_version").get(name="greet")
    return tool.published_version.number if tool.published_version else None


@pytest.mark.django_db
def test_a_version_without_cases_publishes_at_once(console_admin):
    version = save(greet_files(cases=None))
    request = gate.request_publish(version, actor=Actor(user=console_admin), via=RunVia.BROWSER)
    assert request.published and request.no_cases and request.check is None
    assert published_number() == version.number


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_passing_cases_publish_when_the_worker_finishes_them(worker, console_admin):
    version = save(greet_files())
    request = gate.request_publish(version, actor=Actor(user=console_admin), via=RunVia.BROWSER)
    assert not request.published and not request.no_cases
    assert published_number() is None  # not before the cases passed
    deadline = time.monotonic() + 60
    while not CaseCheck.objects.get(pk=request.check.pk).published:
        assert time.monotonic() < deadline, worker.log()
        time.sleep(0.05)
    assert published_number() == version.number
    assert AuditEvent.objects.filter(action="tool.publish").exists()


@pytest.mark.django_db
def test_a_broken_draft_is_blocked_and_an_admin_overrides_with_a_reason(developer, console_admin):
    save(greet_files(), publish=True)
    draft = save(greet_files(source=BROKEN_TS))
    request = gate.request_publish(draft, actor=Actor(user=console_admin), via=RunVia.BROWSER)
    check = run_in_process(request.check)
    assert check.status == CheckStatus.FAILED and not check.published
    assert published_number() == 1  # still the old version

    with pytest.raises(PermissionDenied):
        gate.override(check, actor=Actor(user=developer), reason="ship it")
    with pytest.raises(ValueError):
        gate.override(check, actor=Actor(user=console_admin), reason="   ")
    assert not gate.can_override(check, developer) and gate.can_override(check, console_admin)
    gate.override(check, actor=Actor(user=console_admin), reason="upstream changed its wording")

    assert published_number() == draft.number
    assert ToolVersion.objects.get(pk=draft.pk).published_with_failing_cases
    check.refresh_from_db()
    assert check.published and check.override_by == console_admin
    event = AuditEvent.objects.get(action="tool.publish_override")
    assert "upstream changed its wording" in event.summary
    assert event.data["reason"] == "upstream changed its wording"
    assert event.actor_user == console_admin
    with pytest.raises(ValueError):  # once is enough
        gate.override(check, actor=Actor(user=console_admin), reason="again")


@pytest.mark.django_db
def test_a_running_or_passed_check_cannot_be_overridden(console_admin):
    version = save(greet_files())
    actor = Actor(user=console_admin)
    check = replay.start_check(version, actor=actor, via=RunVia.BROWSER, enqueue=False)
    with pytest.raises(ValueError, match="still running"):
        gate.override(check, actor=actor, reason="impatient")
    check = run_in_process(check)
    assert check.status == CheckStatus.PASSED
    with pytest.raises(ValueError):
        gate.override(check, actor=actor, reason="nothing to override")
    assert not AuditEvent.objects.filter(action="tool.publish_override").exists()


@pytest.mark.django_db
def test_agents_see_the_failing_cases_mark_in_the_registry(console_admin):
    save(greet_files(), publish=True)
    draft = save(greet_files(source=BROKEN_TS))
    check = run_in_process(
        gate.request_publish(draft, actor=Actor(user=console_admin), via=RunVia.BROWSER).check
    )
    gate.override(check, actor=Actor(user=console_admin), reason="upstream changed its wording")
    reset_api_caches()  # another test may have cached an equal version's body
    client = agent_client("registry:read")

    detail = client.get("/api/v1/tools/greet").json()
    one = client.get(f"/api/v1/tools/greet/versions/{draft.number}").json()

    assert detail["published_with_failing_cases"] is True
    assert one["published_with_failing_cases"] is True
    marks = {ref["version"]: ref["published_with_failing_cases"] for ref in detail["versions"]}
    assert marks == {1: False, draft.number: True}
