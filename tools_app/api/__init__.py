"""The agent API (docs/agent-api.md), built with django-ninja.

One router per area, each with the token scope it needs:

- registry.py: registry, tool and version endpoints (`registry:read`);
- sync.py: the sync manifest and version bundles (`sync:read`);
- runs.py: invoke, run status, cancel and artifacts (`tools:invoke`);
- checks.py: replaying a version's cases for CI (`tools:invoke`);
- health.py: readiness (any token, or an admin's session).
- env.py: the env bridge, off unless CONSOLE_ENV_BRIDGE=on (`secrets:read`).
- signing.py: keys.json and the root public key (public: no token).

A new area is a module with its own `Router(auth=TokenAuth(<scope>))`, added below.

OpenAPI is served at /api/openapi.json and the Swagger page at /api/docs, from the static
files django-ninja ships (no CDN). Errors are JSON everywhere: see errors.py."""

from __future__ import annotations

from ninja import NinjaAPI, Swagger

from tools_app.api import checks, env, errors, health, registry, runs, signing, sync
from tools_app.api.limits import NestingParser

api = NinjaAPI(
    title="Tool Console agent API",
    version="1",
    description=(
        "Agents list tools, download exact versions, mirror DATA_PATH/tools and invoke "
        "tools through the console. "
        "Authenticate with `Authorization: Bearer <agent token>`; each endpoint names the "
        "scope it needs (`registry:read`, `sync:read`, `tools:invoke`); `GET /api/v1/health` "
        "takes any token. Errors are "
        '`{"error": "...", "detail": ...}`.\n\n'
        # Swagger UI renders this as Markdown: the way back for people who came from it.
        "[← Back to the Tool Console](/)"
    ),
    urls_namespace="api",
    parser=NestingParser(),
    # Ninja is in INSTALLED_APPS, so Swagger UI comes from its static files, not a CDN;
    # no validatorUrl keeps the page from sending the spec to validator.swagger.io.
    docs=Swagger(settings={"validatorUrl": None}),
)
errors.install(api)
api.add_router("/v1", registry.router)
api.add_router("/v1", sync.router)
api.add_router("/v1", runs.router)
api.add_router("/v1", checks.router)
api.add_router("/v1", health.router)
api.add_router("/v1", env.router)
api.add_router("/v1", signing.router)
