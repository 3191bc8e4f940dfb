"""The home page: what the console is, first steps that tick themselves off from what
exists, the system's state, and what happened lately."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_safe

from tools_app.models import AgentToken, AuditEvent, Integration, Run, ToolVersion
from tools_app.models.runs import RunVia
from tools_app.ops import health
from tools_app.roles import ADMIN, DEVELOPER, VIEWER, has_role

RECENT = 5


@dataclass(frozen=True)
class Step:
    key: str
    title: str
    done: bool
    url: str
    action: str  # the link's text while the step is open
    explanation: str


def first_steps(user) -> list[Step]:
    """The steps this person can take, each done when the data says so (one query each).

    Admins set the console up (integrations, tokens, agents); developers try tools.
    Viewers take none of these steps, so they get none."""
    steps = []
    if has_role(user, ADMIN):
        steps.append(
            Step(
                "integration",
                "Configure an integration",
                Integration.objects.enabled().exists(),
                reverse("integration_new"),
                "Add an integration",
                "Credentials and addresses tools receive as environment variables.",
            )
        )
    if has_role(user, DEVELOPER):
        steps.append(
            Step(
                "run",
                "Try a tool",
                Run.objects.filter(user=user).exists(),
                reverse("tools"),
                "Pick a tool and run it",
                "Run one from its page and watch the result arrive.",
            )
        )
    if has_role(user, ADMIN):
        steps.append(
            Step(
                "token",
                "Create an agent token",
                AgentToken.objects.active().exists(),
                reverse("token_create"),
                "Create a token",
                "Agents authenticate with a bearer token; only its hash is kept.",
            )
        )
        steps.append(
            Step(
                "agent",
                "Connect an agent",
                # A token that has been used, or a run started through the API or MCP.
                AgentToken.objects.filter(last_used_at__isnull=False).exists()
                or Run.objects.filter(via__in=(RunVia.API, RunVia.MCP)).exists(),
                reverse("docs_page", args=["agent-api"]),
                "Read how agents connect",
                "Point an agent at the registry (GET /api/v1/registry) or the MCP endpoint.",
            )
        )
    return steps


def system_status() -> dict:
    """The parts of the System page's report a person needs at a glance, from the same
    checks (tools_app/ops/health.py); the broker's round trip is left to the System page."""
    return {
        "workers": health.workers(),
        "isolation": health.isolation(),
        "encryption": health.encryption(),
    }


def recent_runs() -> list[Run]:
    # Everyone with a role sees every run on the runs list: the same rule here.
    return list(
        Run.objects.select_related("tool", "version", "user", "token")
        .only(
            "id",
            "status",
            "via",
            "created_at",
            "tool__name",
            "version__number",
            "user__username",
            "token__name",
        )
        .order_by("-created_at", "-pk")[:RECENT]
    )


def recent_versions() -> list[ToolVersion]:
    return list(
        ToolVersion.objects.select_related("tool", "author")
        .only(
            "number",
            "source",
            "note",
            "created_at",
            "published_at",
            "tool__name",
            "author__username",
        )
        .order_by("-created_at", "-pk")[:RECENT]
    )


def recent_events() -> list[AuditEvent]:
    # Downloads are reads, not changes: left out so they do not crowd the list.
    return list(
        AuditEvent.objects.exclude(action="tool.export").order_by("-created_at", "-id")[:RECENT]
    )


@require_safe
@login_required
def home(request: HttpRequest) -> HttpResponse:
    user = request.user
    context: dict = {"has_role": has_role(user, VIEWER)}
    if context["has_role"]:
        steps = first_steps(user)
        context |= {
            "steps": steps,
            "steps_done": sum(step.done for step in steps),
            "status": system_status(),
            "runs": recent_runs(),
            "versions": recent_versions(),
            # The audit log names people, tokens and addresses: admins only.
            "events": recent_events() if has_role(user, ADMIN) else [],
        }
    return render(request, "home.html", context)
