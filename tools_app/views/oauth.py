"""OAuth2 connect, callback and disconnect on an integration's page (admins only). The
protocol is in tools_app/integrations/oauth.py; here: the admin's session, which binds
`state` (and the PKCE verifier) to the browser that started the authorization."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from tools_app.audit import Actor
from tools_app.integrations import oauth
from tools_app.models import Integration
from tools_app.roles import ADMIN, role_required
from tools_app.views.htmx import HtmxHttpRequest

SESSION_KEY = "oauth_pending"
MAX_PENDING = 5  # authorizations one admin may have open at once


def _pending(request: HtmxHttpRequest) -> dict[str, dict]:
    data = request.session.get(SESSION_KEY)
    return data if isinstance(data, dict) else {}


def _refused(request: HtmxHttpRequest, message: str, slug: str = "") -> HttpResponse:
    return render(
        request, "integrations/oauth_error.html", {"message": message, "slug": slug}, status=400
    )


@require_POST
@role_required(ADMIN)
@never_cache
def integration_oauth_connect(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Connect or reconnect: to the provider's consent page, or (client credentials) get
    the token right here."""
    integration = get_object_or_404(Integration, slug=slug)
    spec = oauth.spec_of(integration)
    if spec is None:
        messages.error(request, f"{slug} is not an OAuth integration.")
        return redirect("integration", slug)
    try:
        if not spec.browser:
            messages.success(
                request,
                oauth.connect_client_credentials(integration, actor=Actor.from_request(request)),
            )
            return redirect("integration", slug)
        url, pending = oauth.begin(integration, request.user.pk)
    except oauth.OAuthFailure as exc:
        messages.error(request, f"Could not connect {slug}: {exc}")
        return redirect("integration", slug)
    started = {k: v for k, v in _pending(request).items() if not oauth.Pending.from_dict(v).expired}
    started = dict(list(started.items())[-(MAX_PENDING - 1) :])
    started[pending.state] = pending.as_dict()
    request.session[SESSION_KEY] = started
    return redirect(url)


@require_GET
@role_required(ADMIN)
@never_cache
def integration_oauth_callback(request: HtmxHttpRequest) -> HttpResponse:
    """Where the provider sends the admin back: the state must be one this session
    started, not expired, by this user; then the code is exchanged with the verifier."""
    state = request.GET.get("state", "")
    started = _pending(request)
    record = started.pop(state, None) if state else None
    request.session[SESSION_KEY] = started  # a state is used once, whatever happens
    if record is None:
        return _refused(
            request,
            "This authorization was not started from this session (or was already used): "
            "start it again with Connect on the integration's page.",
        )
    try:
        pending = oauth.Pending.from_dict(record)
    except (KeyError, TypeError, ValueError):
        return _refused(request, "This authorization's record is unreadable: connect again.")
    if pending.expired or pending.user_id != request.user.pk:
        return _refused(
            request,
            f"This authorization expired (after {oauth.PENDING_SECONDS // 60} minutes): "
            "connect again.",
            pending.slug,
        )
    integration = Integration.objects.filter(slug=pending.slug).first()
    if integration is None:
        return _refused(request, f"Integration {pending.slug} no longer exists.")
    error = request.GET.get("error", "")
    if error:
        message = oauth.words(error[:100], request.GET.get("error_description", "")[:300])
        messages.error(request, f"{pending.slug} was not connected. {message}")
        return redirect("integration", pending.slug)
    code = request.GET.get("code", "")
    if not code:
        return _refused(request, "The provider sent no authorization code.", pending.slug)
    try:
        target, message = oauth.complete(
            integration, pending, code=code, actor=Actor.from_request(request)
        )
    except oauth.OAuthFailure as exc:
        messages.error(request, f"{pending.slug} was not connected. {exc}")
        return redirect("integration", pending.slug)
    messages.success(request, message)
    return redirect("integration", target.slug)


@require_POST
@role_required(ADMIN)
@never_cache
def integration_oauth_disconnect(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    integration = get_object_or_404(Integration, slug=slug)
    if oauth.spec_of(integration) is None:
        return redirect("integration", slug)
    outcome = oauth.revoke(integration, actor=Actor.from_request(request))
    level = messages.warning if "failed" in outcome else messages.success
    level(request, f"Disconnected {slug}. {outcome}")
    return redirect("integration", slug)
