"""The env bridge (scope `secrets:read`): the variables a set of published tools would
receive, for an agent that runs those tools itself (outside the console's sandbox).

Off unless CONSOLE_ENV_BRIDGE=on: it hands secret values to whoever holds such a token.
Only published versions count (what an admin approved), under the same secret policy as a
run; every answer is audited with the token, the tools and the variable names, never the
values, and is never cached."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from ninja import Router, Schema

from tools_app.api.auth import TokenAuth
from tools_app.api.common import visible_tool
from tools_app.api.errors import ApiError
from tools_app.api.schemas import ErrorOut
from tools_app.audit import Actor, record
from tools_app.integrations import vault
from tools_app.integrations.environment import environment_for
from tools_app.integrations.errors import IntegrationError
from tools_app.integrations.policy import secret_access
from tools_app.models.runs import RunVia
from tools_app.models.tokens import Scope
from tools_app.runs import setup

router = Router(tags=["env"], auth=TokenAuth(Scope.SECRETS_READ))

MAX_TOOLS = 50


class EnvOut(Schema):
    tools: list[str]
    integrations: list[str]
    env: dict[str, str]


@router.get(
    "/env",
    response={200: EnvOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut},
    url_name="env",
    summary="The environment variables of the integrations some published tools declare",
    openapi_extra={
        "parameters": [
            {
                "in": "query",
                "name": "tools",
                "required": True,
                "description": "Comma-separated tool names (published, enabled)",
                "schema": {"type": "string"},
            }
        ]
    },
)
def env(request: HttpRequest) -> JsonResponse:
    """Off (403) unless the console runs with `CONSOLE_ENV_BRIDGE=on`."""
    if not settings.CONSOLE_ENV_BRIDGE:
        raise ApiError(
            403,
            "env bridge off",
            "this console does not hand out integration variables; an operator can turn "
            "it on with CONSOLE_ENV_BRIDGE=on",
        )
    names = [n.strip() for n in request.GET.get("tools", "").split(",") if n.strip()]
    names = list(dict.fromkeys(names))
    if not names or len(names) > MAX_TOOLS:
        raise ApiError(422, "invalid request", [f"tools: give 1..{MAX_TOOLS} tool names"])
    slugs: list[str] = []
    for name in names:
        version = visible_tool(name).published_version
        manifest = setup.manifest_of(version)
        access = secret_access(version, manifest.integrations, user=None, via=RunVia.API)
        slugs += [s for s in access.granted if s not in slugs]
    try:
        values, _labels = environment_for(slugs) if slugs else ({}, {})
    except (IntegrationError, vault.VaultError) as exc:
        raise ApiError(409, "integration unavailable", str(exc)) from None
    record(
        Actor.from_request(request, token=request.auth),
        "env.read",
        summary=f"read the environment of {', '.join(names)}"[:200],
        data={"tools": names, "integrations": slugs, "variables": sorted(values)},
    )
    response = JsonResponse({"tools": names, "integrations": slugs, "env": values})
    response["Cache-Control"] = "no-store"
    return response


__all__: list[Any] = ["router"]
