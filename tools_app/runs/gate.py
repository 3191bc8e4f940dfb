"""The publish gate (docs/cases.md): publishing a version replays its cases first
(runs/replay.py) and publishes only when every one passes, which replay.refresh() does
when the last run finishes, so the publish happens with no page open. A version without
cases publishes at once (pages and the publish confirm say it has none). An admin may
publish a version whose cases failed, with a written reason: audited, and the version is
marked "published with failing cases". No HTTP here: the editor, the version page, the
import page, the API and `test_tools` all come through these functions."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from tools_app.audit import Actor, record
from tools_app.catalog.versions import publish_version
from tools_app.models import CaseCheck, ToolVersion
from tools_app.models.cases import CheckStatus
from tools_app.roles import ADMIN, has_role
from tools_app.runs import replay

MAX_REASON = 2000


@dataclass
class PublishRequest:
    published: bool  # published now (the version has no cases)
    check: CaseCheck | None  # the check that publishes on pass
    no_cases: bool


def request_publish(
    version: ToolVersion, *, actor: Actor, via: str, enqueue: bool = True
) -> PublishRequest:
    """Publish `version` now when it has no cases; else start a check of all its cases
    that publishes it when every one passes. Who may publish is the caller's to check.
    enqueue=False: the caller executes the check's runs itself (runs/local.py)."""
    if not replay.has_cases(version):
        publish_version(version, actor=actor)
        return PublishRequest(published=True, check=None, no_cases=True)
    check = replay.start_check(version, actor=actor, via=via, publish=True, enqueue=enqueue)
    return PublishRequest(published=check.published, check=check, no_cases=False)


def can_override(check: CaseCheck, user) -> bool:
    """Whether `user` may publish the check's version despite it (pages show the form)."""
    return (
        user is not None
        and has_role(user, ADMIN)
        and check.is_finished
        and check.status not in (CheckStatus.PASSED, CheckStatus.EMPTY)
        and not check.published
    )


def override(check: CaseCheck, *, actor: Actor, reason: str) -> None:
    """An admin publishes the check's version although its cases did not pass. Raises
    PermissionDenied for anyone else, ValueError without a reason or when the check is
    still running, passed, or already published."""
    if actor.user is None or not has_role(actor.user, ADMIN):
        raise PermissionDenied("only an admin may publish a version whose cases failed")
    reason = (reason or "").strip()
    if not reason:
        raise ValueError("say why the version is published although its cases failed")
    if len(reason) > MAX_REASON:
        raise ValueError(f"the reason is longer than {MAX_REASON} characters")
    with transaction.atomic():
        check = CaseCheck.objects.select_for_update().get(pk=check.pk)
        if check.status == CheckStatus.RUNNING:
            raise ValueError("the cases are still running; wait for their result")
        if check.status in (CheckStatus.PASSED, CheckStatus.EMPTY) or check.published:
            raise ValueError("nothing to override: the version's cases did not fail")
        version = ToolVersion.objects.select_related("tool").get(pk=check.version_id)
        publish_version(version, actor=actor)
        ToolVersion.objects.filter(pk=version.pk).update(published_with_failing_cases=True)
        check.published = True
        check.override_reason = reason
        check.override_by = actor.user
        check.finished_at = check.finished_at or timezone.now()
        check.save(update_fields=["published", "override_reason", "override_by", "finished_at"])
        record(
            actor,
            "tool.publish_override",
            version.tool,
            f"{version.tool.name} v{version.number} published with failing cases "
            f"({check.passed}/{check.total} passed): {reason}"[:2000],
            {
                "version": version.number,
                "check": str(check.pk),
                "status": check.status,
                "passed": check.passed,
                "total": check.total,
                "reason": reason,
            },
        )
