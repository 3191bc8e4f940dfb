"""Agent tokens (admins only): list, create (the token is shown once), revoke, and a
pinned token's pins with re-approval (catalog/pins.py)."""

from __future__ import annotations

from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_safe

from tools_app.audit import Actor, record
from tools_app.catalog import pins
from tools_app.forms.tokens import TokenForm
from tools_app.models import AgentToken
from tools_app.models.tokens import Scope
from tools_app.roles import ADMIN, role_required


@require_safe
@role_required(ADMIN)
def token_list(request: HttpRequest) -> HttpResponse:
    tokens = list(AgentToken.objects.select_related("created_by").order_by("-created_at", "-id"))
    for token in tokens:
        # How many tools wait for approval (changed or new), for a pinned token's line.
        token.pins_waiting = sum(
            line.state in ("changed", "unpinned") for line in pins.states(token)
        )
    return render(request, "tokens/list.html", {"tokens": tokens})


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def token_pins(request: HttpRequest, pk: int) -> HttpResponse:
    """A pinned token's pins and where each tool stands. The page is the confirm page of
    its one form: approve `?tool=NAME` at its current digest, or without it every
    published tool (re-approve all)."""
    token = get_object_or_404(AgentToken, pk=pk)
    name = request.GET.get("tool", "")[:100] or None
    if request.method == "POST":
        try:
            approved = pins.approve(
                token, [name] if name else None, actor=Actor.from_request(request)
            )
        except pins.PinError as exc:
            messages.error(request, str(exc))
        else:
            what = name or f"{len(approved)} tools"
            messages.success(request, f"Approved {what} for “{token.name}” at the current digest.")
        return redirect("token_pins", pk=token.pk)
    context = {"token": token, "lines": pins.states(token), "tool": name}
    return render(request, "tokens/pins.html", context)


CREATED_KEY = "tokens.created"


@never_cache  # the answer to a successful POST holds the raw token: never keep it anywhere
@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def token_create(request: HttpRequest) -> HttpResponse:
    # POST-redirect-GET: the new token waits in the session for exactly one GET, so a
    # reload neither posts the form again (a second token) nor shows the token again.
    created = request.session.pop(CREATED_KEY, None) if request.method == "GET" else None
    if created is not None:
        token = AgentToken.objects.filter(pk=created["pk"]).first()
        if token is not None:
            context = {"token": token, "raw_token": created["raw"], **mcp_setup(request, token)}
            return render(request, "tokens/created.html", context)
    form = TokenForm(request.POST if request.method == "POST" else None)
    if not form.is_valid():
        return render(request, "tokens/form.html", {"form": form})
    token, raw = AgentToken.issue(
        form.cleaned_data["name"],
        form.cleaned_data["scopes"],
        created_by=request.user,
        expires_at=form.expires_at(),
    )
    expires = token.expires_at.isoformat() if token.expires_at else None
    record(
        Actor.from_request(request),
        "token.create",
        token,
        f"{token.name} ({', '.join(token.scopes)}), expires {expires or 'never'}",
        {"prefix": token.prefix, "scopes": token.scopes, "expires_at": expires},
    )
    # Only the hash is stored; the raw token lives in the session until the next GET
    # shows it, once (then it is gone from the session too).
    request.session[CREATED_KEY] = {"pk": token.pk, "raw": raw}
    return redirect("token_create")


def mcp_setup(request: HttpRequest, token: AgentToken) -> dict:
    """The MCP endpoint of this console as the browser reached it, for the client
    configurations the page shows (a token that may list and call tools only)."""
    if not (token.has_scope(Scope.REGISTRY_READ) and token.has_scope(Scope.TOOLS_INVOKE)):
        return {}
    return {"mcp_url": request.build_absolute_uri("/mcp")}


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(AgentToken, pk=pk)
    if request.method == "GET":
        return render(request, "tokens/revoke.html", {"token": token})
    with transaction.atomic():
        # Locked, so two admins revoking at once give one revocation and one audit event.
        token = AgentToken.objects.select_for_update().get(pk=pk)
        revoked = token.is_active
        if revoked:
            token.revoke()
            record(Actor.from_request(request), "token.revoke", token, f"{token.name} revoked")
    if revoked:
        messages.success(request, f"Token “{token.name}” is revoked; agents using it get 401.")
    else:
        messages.info(request, f"Token “{token.name}” was already revoked.")
    return redirect("tokens")
