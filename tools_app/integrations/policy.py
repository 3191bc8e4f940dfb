"""Who may use a secret (docs/security.md): the one decision every run path takes.

- A run of the tool's published version receives the integrations it declares, whoever
  starts it: an admin approved that code when publishing it.
- A run of any other version (a draft, or an older version an agent pins) receives an
  integration's values only when the integration allows test runs (an admin's switch,
  off by default), or when an admin starts the run. `run_tool` is run by an operator on
  the console's host, who can read the keys anyway: it counts as an admin.
- Otherwise the integration is withheld: the run gets none of its variables or paths and
  its notices say which integration was withheld and why.

The run form and the tool page ask the same function what a run by the current person
would receive, so what they show is what the run gets. Sensitive tool presets follow the
same rule through trusted_basis() (tools_app/catalog/presets.py), with a per-tool switch in place
of the integration's. No HTTP here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db import models

from tools_app.audit import Actor
from tools_app.integrations.service import set_switch
from tools_app.models import Integration, ToolVersion
from tools_app.models.runs import RunVia
from tools_app.roles import ADMIN, has_role


class Basis(models.TextChoices):
    """Why an integration's values go to a run, or that they do not."""

    PUBLISHED = "published", "the published version: an admin approved this code"
    ADMIN = "admin", "started by an admin"
    OPERATOR = "operator", "started on the console's host with run_tool (counts as an admin)"
    TEST_RUNS = "test_runs", "the integration allows test runs"
    WITHHELD = "withheld", "withheld"


@dataclass(frozen=True)
class Decision:
    slug: str
    basis: Basis
    reason: str

    @property
    def granted(self) -> bool:
        return self.basis != Basis.WITHHELD

    @property
    def notice(self) -> str:
        return f"Integration {self.slug!r} was withheld from this run: {self.reason}."


@dataclass(frozen=True)
class SecretAccess:
    decisions: tuple[Decision, ...]

    @property
    def granted(self) -> list[str]:
        return [d.slug for d in self.decisions if d.granted]

    @property
    def withheld(self) -> list[Decision]:
        return [d for d in self.decisions if not d.granted]

    def notices(self) -> list[str]:
        return [d.notice for d in self.withheld]


def is_published(version: ToolVersion) -> bool:
    return version.tool.published_version_id == version.pk


def trusted_basis(version: ToolVersion, *, user=None, via: str) -> Basis | None:
    """Why a run of `version` by `user` through `via` receives every secret it declares
    (published, operator, admin), or None: then each secret's own "allow test runs" switch
    decides. Sensitive tool presets (tools_app/catalog/presets.py) follow the same rule."""
    if is_published(version):
        return Basis.PUBLISHED
    if via == RunVia.COMMAND:
        return Basis.OPERATOR
    if user is not None and has_role(user, ADMIN):
        return Basis.ADMIN
    return None


def secret_access(
    version: ToolVersion, slugs: Iterable[str], *, user=None, via: str
) -> SecretAccess:
    """Which of `slugs` (the integrations `version` declares) a run of `version` started
    by `user` (None: an agent token or the system) through `via` receives."""
    slugs = list(dict.fromkeys(slugs))
    if not slugs:
        return SecretAccess(())
    basis = trusted_basis(version, user=user, via=via)
    if basis is not None:
        return SecretAccess(tuple(Decision(s, basis, basis.label) for s in slugs))
    allowed = set(
        Integration.objects.filter(slug__in=slugs, allow_test_runs=True).values_list(
            "slug", flat=True
        )
    )
    decisions = []
    for slug in slugs:
        if slug in allowed:
            decisions.append(Decision(slug, Basis.TEST_RUNS, Basis.TEST_RUNS.label))
        else:
            decisions.append(
                Decision(
                    slug,
                    Basis.WITHHELD,
                    f"version {version.number} is not the published version, the run is not "
                    f"started by an admin, and {slug!r} does not allow test runs (an admin "
                    "can switch on \u201callow test runs\u201d on the integration, run this "
                    "version, or publish it)",
                )
            )
    return SecretAccess(tuple(decisions))


def set_allow_test_runs(integration: Integration, allowed: bool, *, actor: Actor) -> Integration:
    """Switch an integration's "allow test runs" on or off, audited."""
    return set_switch(
        integration,
        "allow_test_runs",
        allowed,
        actor=actor,
        action="integration.allow_test_runs",
        summary=f"{'allowed' if allowed else 'stopped'} test runs (draft versions) "
        f"to receive {integration.slug}",
        data={"allow_test_runs": allowed},
    )
