"""OAuth2 integrations (docs/integrations.md#oauth2): connect, refresh, revoke, and the
access token a run receives. No HTTP views here: they pass what the browser brought.

The protocol is Authlib's (`authlib.oauth2.client.OAuth2Client`: the authorization URL
with PKCE S256, the code exchange, the client credentials grant, refresh and RFC 7009
revocation). Its requests go through `_EgressSession`, a thin adapter onto the console's
own outbound client (tools_app/egress/client.py) and so through the egress policy.

Refresh is serialized by the database: the connection's row is taken with
select_for_update (SQLite's IMMEDIATE transactions serialize writers the same way) and
read again under the lock, so of several workers that find the token due only the first
refreshes; the others find the fresh token. The refresh token never leaves this module.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode, urlsplit

from authlib.common.security import generate_token
from authlib.oauth2.client import OAuth2Client
from authlib.oauth2.rfc6749.errors import OAuth2Error
from django.conf import settings
from django.core import checks
from django.db import DatabaseError, transaction
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables
from joserfc import jws
from joserfc.errors import JoseError

from tools_app.audit import Actor, record
from tools_app.egress import client as http_client
from tools_app.egress import policy as egress_policy
from tools_app.integrations import vault
from tools_app.integrations.errors import IntegrationUnavailable
from tools_app.integrations.oauth_spec import (
    CLIENT_ID_FIELD,
    CLIENT_SECRET_FIELD,
    OAuthSpec,
    resolve,
)
from tools_app.integrations.types import IntegrationType, integration_types
from tools_app.models import EgressException, Integration, OAuthConnection, OAuthState

# How long an authorization started on the integration page may take to come back.
PENDING_SECONDS = 600
TOKEN_TIMEOUT = 15.0
# Errors after which only a new consent helps (RFC 6749 5.2): a revoked or replayed
# refresh token, or a client the provider no longer accepts.
RECONNECT_ERRORS = frozenset({"invalid_grant", "invalid_client", "unauthorized_client"})
# What the provider's error codes mean, for the page (RFC 6749 4.1.2.1 and 5.2).
ERROR_WORDS = {
    "access_denied": "The account owner declined the consent (access_denied).",
    "invalid_scope": "The provider does not accept the requested scopes (invalid_scope).",
    "invalid_client": (
        "The provider refused the client: check the client ID and secret (invalid_client)."
    ),
    "unauthorized_client": "This client may not use this grant (unauthorized_client).",
    "invalid_grant": (
        "The provider refused the grant: it expired, was revoked or was already used "
        "(invalid_grant)."
    ),
    "invalid_request": "The provider rejected the request as malformed (invalid_request).",
    "unsupported_response_type": "The provider does not offer this flow.",
    "server_error": "The provider had an internal error (server_error); try again.",
    "temporarily_unavailable": "The provider is temporarily unavailable; try again.",
}


class OAuthFailure(Exception):
    """Connecting, refreshing or revoking failed; the message is safe to show."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


def margin() -> timedelta:
    """A token this close to its expiry is refreshed before a run gets it."""
    return timedelta(seconds=getattr(settings, "OAUTH_REFRESH_MARGIN", 300))


def words(code: str, description: str = "") -> str:
    text = ERROR_WORDS.get(code) or f"The provider answered {code or 'an error'}."
    if description:
        text += f" It said: {description[:300]}"
    return text


def redirect_uri() -> str:
    """The one callback every OAuth integration uses; empty without CONSOLE_PUBLIC_URL."""
    base = settings.PUBLIC_URL
    return f"{base}/integrations/oauth/callback/" if base else ""


def spec_of(integration: Integration) -> OAuthSpec | None:
    itype = integration_types().get(integration.type_slug)
    return itype.oauth if itype is not None else None


def is_oauth(itype: IntegrationType | None) -> bool:
    return itype is not None and itype.oauth is not None


# ----------------------------------------------------------------------------------------
# Authlib over the console's egress client


class _Response:
    """What Authlib reads of a response: status, JSON, raise_for_status."""

    def __init__(self, result: http_client.HttpResult) -> None:
        self.status_code = result.status
        self.text = result.text()

    def json(self) -> Any:
        return json.loads(self.text)

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise OAuthFailure(f"the provider answered HTTP {self.status_code}")


class _EgressSession:
    """The `session` Authlib's framework-free client posts with: each request is
    prepared by Authlib's auth object (client authentication, bearer token) and made by
    tools_app.egress.client under the console's egress policy, redirects not followed."""

    def __init__(self, policy: egress_policy.Policy) -> None:
        self.policy = policy

    def request(
        self,
        method: str,
        url: str,
        *,
        data: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        auth: Any = None,
        **_ignored: Any,
    ) -> _Response:
        body = urlencode(dict(data)) if data is not None else ""
        send = dict(headers or {})
        if auth is not None and hasattr(auth, "prepare"):
            try:  # ClientAuth(method, uri, headers, body); TokenAuth(uri, headers, body)
                url, send, body = auth.prepare(method, url, send, body)
            except TypeError:
                url, send, body = auth.prepare(url, send, body)
        try:
            result = http_client.request(
                method,
                url,
                headers=send,
                content=body or None,
                timeout=TOKEN_TIMEOUT,
                max_body=256 * 1024,
                follow_redirects=False,
                policy=self.policy,
            )
        except http_client.HttpError as exc:
            raise OAuthFailure(f"could not reach {_host(url)}: {exc}") from None
        return _Response(result)

    def post(self, url: str, **kwargs: Any) -> _Response:
        return self.request("POST", url, **kwargs)

    def get(self, url: str, **kwargs: Any) -> _Response:
        return self.request("GET", url, **kwargs)


def _host(url: str) -> str:
    return urlsplit(url).netloc or url


@dataclass(frozen=True)
class _Endpoints:
    authorize: str
    token: str
    revocation: str
    userinfo: str
    scope: str


def _endpoints(integration: Integration, spec: OAuthSpec) -> _Endpoints:
    values = integration.values or {}
    scopes = " ".join(resolve(s, values) for s in spec.scopes).strip()
    return _Endpoints(
        authorize=resolve(spec.authorize_url, values),
        token=resolve(spec.token_url, values),
        revocation=resolve(spec.revocation_url, values),
        userinfo=resolve(spec.userinfo_url, values),
        scope=scopes,
    )


def _policy(integration: Integration, ends: _Endpoints) -> egress_policy.Policy:
    """The console's policy plus the type's OAuth endpoints: the console reaches them,
    its tools do not (they get the API hosts only)."""
    urls = [u for u in (ends.token, ends.revocation, ends.userinfo) if u]
    extra = egress_policy.integration_allows({integration.slug: urls})
    try:
        return egress_policy.build(
            settings.TOOL_NETWORK_ALLOW,
            (*egress_policy.admin_allows(EgressException.objects.entries()), *extra),
            settings.TOOL_DNS,
        )
    except egress_policy.PolicyError as exc:
        raise OAuthFailure(f"the egress policy is invalid: {exc}") from None


@sensitive_variables()
def _client(integration: Integration, spec: OAuthSpec, ends: _Endpoints) -> OAuth2Client:
    client_id = (integration.values or {}).get(CLIENT_ID_FIELD, "")
    if not client_id:
        raise OAuthFailure(f"integration {integration.slug!r} has no client ID: set it first")
    stored = integration.secrets.filter(field=CLIENT_SECRET_FIELD).first()
    client_secret = None
    if stored is not None:
        try:
            client_secret = vault.decrypt(stored.ciphertext, what=f"{integration.slug} secret")
        except vault.VaultError as exc:
            raise OAuthFailure(str(exc)) from None
    return OAuth2Client(
        _EgressSession(_policy(integration, ends)),
        client_id=client_id,
        client_secret=client_secret,
        scope=ends.scope or None,
        redirect_uri=redirect_uri() or None,
        code_challenge_method="S256" if spec.pkce else None,
        token_endpoint=ends.token,
        grant_type=spec.grant,
    )


def _failure(exc: Exception) -> OAuthFailure:
    if isinstance(exc, OAuthFailure):
        return exc
    if isinstance(exc, OAuth2Error):
        code = exc.error or ""
        return OAuthFailure(words(code, exc.description or ""), code)
    return OAuthFailure(f"the provider's answer could not be read ({type(exc).__name__})")


def _connect_failed(integration: Integration, actor: Actor, exc: Exception) -> OAuthFailure:
    """The failure in words, recorded in the audit log."""
    failure = _failure(exc)
    record(
        actor,
        "integration.oauth_connect_failed",
        integration,
        summary=f"connecting {integration.slug} failed: {failure}",
        data={"error": failure.code},
    )
    return failure


def _spec(integration: Integration) -> OAuthSpec:
    spec = spec_of(integration)
    if spec is None:
        raise OAuthFailure(f"integration {integration.slug!r} is not of an OAuth type")
    return spec


# ----------------------------------------------------------------------------------------
# Connecting


@dataclass(frozen=True)
class Pending:
    """An authorization the admin started: kept in their session until it comes back."""

    state: str
    slug: str
    verifier: str
    started: float
    user_id: int | None

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Pending:
        return cls(
            state=str(data["state"]),
            slug=str(data["slug"]),
            verifier=str(data.get("verifier", "")),
            started=float(data["started"]),
            user_id=data.get("user_id"),
        )

    @property
    def expired(self) -> bool:
        return time.time() - self.started > PENDING_SECONDS


@sensitive_variables()
def begin(integration: Integration, user_id: int | None) -> tuple[str, Pending]:
    """The provider's consent URL, and what the callback must match."""
    spec = _spec(integration)
    if not spec.browser:
        raise OAuthFailure("this type gets its tokens without a browser step")
    if not redirect_uri():
        raise OAuthFailure("set CONSOLE_PUBLIC_URL first: the redirect URI is built from it")
    ends = _endpoints(integration, spec)
    if not ends.authorize or not ends.token:
        raise OAuthFailure("set the authorization and token endpoints first")
    client = _client(integration, spec, ends)
    state = secrets.token_urlsafe(32)
    verifier = generate_token(64) if spec.pkce else ""
    url, _state = client.create_authorization_url(
        ends.authorize,
        state=state,
        code_verifier=verifier or None,
        **dict(spec.authorize_params),
    )
    return url, Pending(state, integration.slug, verifier, time.time(), user_id)


def _account(client: OAuth2Client, spec: OAuthSpec, ends: _Endpoints, token: Mapping) -> str:
    """The provider's name for the account (userinfo, else the id_token's claim)."""
    claim = spec.account
    if not claim:
        return ""
    if ends.userinfo:
        response = client.session.get(
            ends.userinfo, headers={"Authorization": f"Bearer {token['access_token']}"}
        )
        if response.status_code == 200:
            with contextlib.suppress(ValueError):
                info = response.json()
                if isinstance(info, dict) and info.get(claim):
                    return str(info[claim])[:320]
    id_token = token.get("id_token")
    if isinstance(id_token, str):
        # Straight from the token endpoint over TLS: OIDC Core 3.1.3.7 lets the client
        # trust it without checking the signature, which is all this reads it for.
        try:
            claims = json.loads(jws.extract_compact(id_token.encode("ascii")).payload)
        except (JoseError, ValueError, UnicodeError):
            claims = {}
        if isinstance(claims, dict) and claims.get(claim):
            return str(claims[claim])[:320]
    return ""


@sensitive_variables()
def complete(
    integration: Integration, pending: Pending, *, code: str, actor: Actor
) -> tuple[Integration, str]:
    """Exchange the code (with the PKCE verifier) and store the tokens. Returns the
    integration that holds them (another one when the same account was connected there
    before: it is updated, not duplicated) and what to tell the admin."""
    spec = _spec(integration)
    ends = _endpoints(integration, spec)
    client = _client(integration, spec, ends)
    try:
        token = client.fetch_token(
            ends.token,
            code=code,
            code_verifier=pending.verifier or None,
            redirect_uri=redirect_uri(),
        )
        account = _account(client, spec, ends, token)
    except Exception as exc:  # Authlib's and the adapter's errors: shown in words
        raise _connect_failed(integration, actor, exc) from None
    target = integration
    if account:
        twin = (
            OAuthConnection.objects.filter(
                integration__type_slug=integration.type_slug, account=account
            )
            .exclude(integration=integration)
            .select_related("integration")
            .first()
        )
        if twin is not None:
            target = twin.integration
    reconnect = OAuthConnection.objects.filter(integration=target).exists()
    _store(target, spec, token, account=account, user=actor.user, connected=True)
    action = "integration.oauth_reconnect" if reconnect else "integration.oauth_connect"
    verb = "reconnected" if reconnect else "connected"
    record(
        actor,
        action,
        target,
        summary=f"{verb} {target.slug}" + (f" as {account}" if account else ""),
        data={"account": account, "scope": token.get("scope", "")},
    )
    if target != integration:
        message = (
            f"{account} was already connected as {target.slug}: its tokens were renewed "
            f"there instead of connecting it twice."
        )
    else:
        message = f"Connected {target.slug}" + (f" as {account}." if account else ".")
    return target, message


@sensitive_variables()
def connect_client_credentials(integration: Integration, *, actor: Actor) -> str:
    """Machine-to-machine types: get a token with the client credentials grant."""
    spec = _spec(integration)
    if spec.browser:
        raise OAuthFailure("this type connects through the provider's consent page")
    ends = _endpoints(integration, spec)
    client = _client(integration, spec, ends)
    try:
        token = client.fetch_token(ends.token, grant_type="client_credentials")
    except Exception as exc:
        raise _connect_failed(integration, actor, exc) from None
    reconnect = OAuthConnection.objects.filter(integration=integration).exists()
    _store(integration, spec, token, account="", user=actor.user, connected=True)
    record(
        actor,
        "integration.oauth_reconnect" if reconnect else "integration.oauth_connect",
        integration,
        summary=f"{'reconnected' if reconnect else 'connected'} {integration.slug} "
        "(client credentials)",
        data={"scope": token.get("scope", "")},
    )
    return f"Connected {integration.slug} with its client credentials."


def _expiry(token: Mapping[str, Any]) -> datetime | None:
    expires_at = token.get("expires_at")
    if isinstance(expires_at, int | float) and not isinstance(expires_at, bool):
        return datetime.fromtimestamp(expires_at, tz=timezone.get_current_timezone())
    expires_in = token.get("expires_in")
    with contextlib.suppress(TypeError, ValueError):
        return timezone.now() + timedelta(seconds=int(expires_in))
    return None


@sensitive_variables()
def _store(
    integration: Integration,
    spec: OAuthSpec,
    token: Mapping[str, Any],
    *,
    account: str | None,
    user: Any = None,
    connected: bool = False,
    previous: OAuthConnection | None = None,
) -> OAuthConnection:
    access = token.get("access_token")
    if not isinstance(access, str) or not access:
        raise OAuthFailure("the provider's answer holds no access token")
    refresh = token.get("refresh_token") or ""
    if not refresh and previous is not None and previous.refresh_ciphertext:
        refresh_ciphertext = previous.refresh_ciphertext  # the provider kept the old one
        refresh_kid = previous.key_id
    else:
        refresh_ciphertext, refresh_kid = vault.encrypt(refresh) if refresh else ("", "")
    access_ciphertext, kid = vault.encrypt(access)
    if refresh_kid and refresh_kid != kid:  # one key_id for both: re-seal under the first
        refresh_ciphertext, _kid = vault.rotate(refresh_ciphertext, what="a refresh token")
    has_refresh = bool(refresh_ciphertext)
    state = (
        OAuthState.CONNECTED
        if has_refresh or not spec.browser or _expiry(token) is None
        else OAuthState.EXPIRING
    )
    now = timezone.now()
    values: dict[str, Any] = {
        "state": state,
        "error": "",
        "access_ciphertext": access_ciphertext,
        "refresh_ciphertext": refresh_ciphertext,
        "key_id": kid,
        "expires_at": _expiry(token),
        "scope": str(token.get("scope") or "")[:2000],
        "refreshed_at": now,
    }
    if account is not None and (account or connected):
        values["account"] = account
    if connected:
        values |= {"connected_at": now, "connected_by": user}
    with transaction.atomic():
        conn, _created = OAuthConnection.objects.update_or_create(
            integration=integration,
            defaults=values,
            create_defaults={**values, "connected_at": now},
        )
    return conn


# ----------------------------------------------------------------------------------------
# Tokens for runs, refresh


def _fresh(conn: OAuthConnection, *, rejected: str = "") -> bool:
    if conn.state == OAuthState.NEEDS_RECONNECT:
        return False
    if rejected:
        return vault.decrypt(conn.access_ciphertext, what="an access token") != rejected
    return conn.expires_at is None or conn.expires_at - margin() > timezone.now()


@sensitive_variables()
def refresh(integration: Integration, *, rejected: str = "", actor: Actor | None = None) -> str:
    """A valid access token, refreshed first when it is due (or when `rejected`, the
    token an API just answered 401 to, is still the stored one). Serialized by the
    row lock; raises OAuthFailure (and records the state) when it cannot."""
    spec = _spec(integration)
    actor = actor or Actor.system()
    with transaction.atomic():
        conn = OAuthConnection.objects.select_for_update().filter(integration=integration).first()
        if conn is None:
            raise OAuthFailure(f"reconnect integration {integration.slug}: it is not connected")
        if _fresh(conn, rejected=rejected):  # another worker refreshed while we waited
            return vault.decrypt(conn.access_ciphertext, what="an access token")
        if conn.state == OAuthState.NEEDS_RECONNECT:
            raise OAuthFailure(f"reconnect integration {integration.slug}: {conn.error}")
        current = Integration.objects.get(pk=integration.pk)
        ends = _endpoints(current, spec)
        client = _client(current, spec, ends)
        refresh_token = (
            vault.decrypt(conn.refresh_ciphertext, what="a refresh token")
            if conn.refresh_ciphertext
            else ""
        )
        try:
            if spec.browser:
                if not refresh_token:
                    raise OAuthFailure(
                        "the access token expired and the provider issued no refresh token",
                        "invalid_grant",
                    )
                token = client.refresh_token(ends.token, refresh_token=refresh_token)
            else:
                token = client.fetch_token(ends.token, grant_type="client_credentials")
        except Exception as exc:
            failure = _failure(exc)
            reconnect = failure.code in RECONNECT_ERRORS
            conn.state = OAuthState.NEEDS_RECONNECT if reconnect else OAuthState.REFRESH_FAILING
            conn.error = str(failure)[:2000]
            conn.save(update_fields=["state", "error"])
            record(
                actor,
                "integration.oauth_refresh_failed",
                current,
                summary=f"refreshing {current.slug}'s token failed: {failure}",
                data={"error": failure.code, "state": conn.state},
            )
            failed = failure
        else:
            conn = _store(current, spec, token, account=None, previous=conn)
            return vault.decrypt(conn.access_ciphertext, what="an access token")
    # Outside the transaction, so the state written above stays.
    raise OAuthFailure(f"reconnect integration {integration.slug}: {failed}", failed.code)


@sensitive_variables()
def token_for_run(integration: Integration) -> tuple[str, str]:
    """The access token a run gets, and the vault key id it was sealed under (for the
    secret-usage ledger): the stored one while it is fresh (no lock, one query), else
    refreshed under the lock. IntegrationUnavailable says what to do."""
    # Every run's setup comes here: one unordered query of what _fresh reads.
    found = OAuthConnection.objects.filter(integration_id=integration.pk).only(
        "state", "access_ciphertext", "expires_at", "key_id"
    )[:1]
    conn = next(iter(found), None)
    if conn is None:
        raise IntegrationUnavailable(
            f"reconnect integration {integration.slug}: it is not connected yet "
            "(an admin connects it on its page)"
        )
    try:
        if _fresh(conn):
            return vault.decrypt(conn.access_ciphertext, what="an access token"), conn.key_id
        # A refreshed token is sealed under the first key (_store).
        return refresh(integration), vault.primary_key_id()
    except vault.VaultError as exc:
        raise IntegrationUnavailable(str(exc)) from None
    except OAuthFailure as exc:
        raise IntegrationUnavailable(str(exc)) from None


def refresh_due() -> dict[str, str]:
    """The beat task: refresh every connected integration whose token is due, before a
    run waits for it. Returns {slug: outcome}."""
    soon = timezone.now() + margin() * 2
    due = OAuthConnection.objects.refreshable().filter(expires_at__lte=soon)
    outcomes = {}
    for conn in due.select_related("integration"):
        try:
            refresh(conn.integration)
            outcomes[conn.integration.slug] = "refreshed"
        except (OAuthFailure, vault.VaultError) as exc:
            outcomes[conn.integration.slug] = str(exc)
    return outcomes


# ----------------------------------------------------------------------------------------
# Disconnecting


def authorize_origin(integration: Integration) -> str:
    """The provider's origin Connect sends the browser to ("" for none): what the
    integration page's form-action must allow."""
    spec = spec_of(integration)
    if spec is None or not spec.browser:
        return ""
    url = urlsplit(_endpoints(integration, spec).authorize)
    return f"{url.scheme}://{url.netloc}" if url.scheme in ("http", "https") and url.netloc else ""


def revokes(integration: Integration) -> bool:
    """Whether disconnecting it revokes at the provider: its type has a revocation URL."""
    spec = spec_of(integration)
    return spec is not None and bool(_endpoints(integration, spec).revocation)


@sensitive_variables()
def revoke(integration: Integration, *, actor: Actor) -> str:
    """Revoke the tokens at the provider (RFC 7009) when the type has a revocation URL,
    then forget them. Returns what happened, in words, failure included: the tokens are
    forgotten either way."""
    spec = _spec(integration)
    conn = OAuthConnection.objects.filter(integration=integration).first()
    if conn is None:
        return "Not connected: nothing to revoke."
    ends = _endpoints(integration, spec)
    outcome = "The type has no revocation endpoint: the tokens were forgotten here only."
    ok = True
    if ends.revocation:
        try:
            client = _client(integration, spec, ends)
            tokens = []
            if conn.refresh_ciphertext:
                tokens.append((vault.decrypt(conn.refresh_ciphertext), "refresh_token"))
            tokens.append((vault.decrypt(conn.access_ciphertext), "access_token"))
            for value, hint in tokens:
                response = client.revoke_token(ends.revocation, token=value, token_type_hint=hint)
                if response.status_code != 200:
                    raise OAuthFailure(
                        f"the provider answered HTTP {response.status_code} to the revocation"
                    )
            outcome = "Revoked at the provider."
        except (OAuthFailure, OAuth2Error, vault.VaultError) as exc:
            ok = False
            outcome = (
                f"Revocation at the provider failed ({_failure(exc)}): the tokens were "
                "forgotten here; revoke the console's access in the account's settings."
            )
    conn.delete()
    record(
        actor,
        "integration.oauth_revoke",
        integration,
        summary=f"disconnected {integration.slug}: {outcome}",
        data={"revoked": ok and bool(ends.revocation), "account": conn.account},
    )
    return outcome


# ----------------------------------------------------------------------------------------
# What runs and pages see


def label(slug: str) -> str:
    """What an access token is redacted to."""
    return "{{" + f"{slug}.access_token" + "}}"


def environment(
    integration: Integration, spec: OAuthSpec | None = None
) -> tuple[dict[str, str], dict[str, str], str]:
    """(env, redaction labels, the token's vault key id) for a run: the access token
    only, in the type's env."""
    spec = spec or _spec(integration)
    token, kid = token_for_run(integration)
    return {spec.env: token}, {label(integration.slug): token}, kid


def template_values(integration: Integration, env: Mapping[str, str]) -> dict[str, str]:
    """The names an HTTP tool's template or hidden input reaches the access token by:
    the type's env (GOOGLE_ACCESS_TOKEN), lower-cased, and `access_token`. {} if not OAuth."""
    spec = spec_of(integration)
    if spec is None or spec.env not in env:
        return {}
    token = env[spec.env]
    return {spec.env: token, spec.env.lower(): token, "access_token": token}


@sensitive_variables()
def after_401(
    slug: str, values: Mapping[str, str], sent: str
) -> tuple[dict[str, str], dict[str, str]] | None:
    """An API answered 401 to a request that carried `values` (an HTTP tool's template
    values of integration `slug`): refresh its token once, unless another worker already
    did (refresh's re-read under the lock). Returns (the new values, redaction labels,
    the rejected token kept redacted) or None if the request carried no token of it."""
    rejected = values.get("access_token", "")
    if not rejected or rejected not in sent:
        return None
    integration = Integration.objects.filter(slug=slug).first()
    if integration is None or spec_of(integration) is None:
        return None
    try:
        token = refresh(integration, rejected=rejected)
    except vault.VaultError as exc:
        raise OAuthFailure(f"reconnect integration {slug}: {exc}") from None
    fresh = {name: token if value == rejected else value for name, value in values.items()}
    stale = "{{" + f"{slug}.access_token (rejected)" + "}}"
    return fresh, {label(slug): token, stale: rejected}


@dataclass(frozen=True)
class Health:
    state: str  # an OAuthState value, or "not_connected"
    label: str
    message: str
    account: str = ""
    expires_at: datetime | None = None

    @property
    def ok(self) -> bool:
        return self.state == OAuthState.CONNECTED


def health(integration: Integration, conn: OAuthConnection | None = None) -> Health | None:
    """None for a type without OAuth."""
    if spec_of(integration) is None:
        return None
    if conn is None:
        conn = OAuthConnection.objects.filter(integration=integration).first()
    if conn is None:
        return _not_connected()
    message = {
        OAuthState.CONNECTED: "Tokens are refreshed before they expire.",
        OAuthState.EXPIRING: "The provider issued no refresh token: reconnect when it expires.",
        OAuthState.REFRESH_FAILING: f"The last refresh failed: {conn.error}",
        OAuthState.NEEDS_RECONNECT: f"Reconnect it: {conn.error}",
    }[OAuthState(conn.state)]
    return Health(conn.state, OAuthState(conn.state).label, message, conn.account, conn.expires_at)


@dataclass(frozen=True)
class Entry:
    """One OAuth integration's state, for a list of them (System page, run form)."""

    integration: Integration
    health: Health


def healths(slugs: Iterable[str] | None = None) -> list[Entry]:
    """The state of every OAuth integration (or of those named), in slug order; two
    queries whatever their number."""
    types = integration_types()
    oauth_types = [slug for slug, itype in types.items() if itype.oauth is not None]
    found = Integration.objects.filter(type_slug__in=oauth_types).order_by("slug")
    if slugs is not None:
        found = found.filter(slug__in=list(slugs))
    integrations = list(found)
    conns = {
        c.integration_id: c
        for c in OAuthConnection.objects.filter(integration__in=integrations).defer(
            "access_ciphertext", "refresh_ciphertext"
        )
    }
    entries = []
    for integration in integrations:
        conn = conns.get(integration.pk)
        health_now = (health(integration, conn) if conn is not None else None) or _not_connected()
        entries.append(Entry(integration, health_now))
    return entries


def _not_connected() -> Health:
    return Health("not_connected", "Not connected", "An admin must connect it.")


@checks.register("tools_app")
def check_public_url(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """Once an OAuth integration exists. W201: redirect URIs are built from
    CONSOLE_PUBLIC_URL; W202: providers send codes there, so outside DEBUG it is https."""
    browser = [slug for slug, t in integration_types().items() if t.oauth and t.oauth.browser]
    try:  # only once there is one to connect: a fresh install need not set it
        if not Integration.objects.filter(type_slug__in=browser).exists():
            return []
    except DatabaseError:
        return []
    if not settings.PUBLIC_URL:
        return [
            checks.Warning(
                "CONSOLE_PUBLIC_URL is not set: OAuth integrations cannot be connected "
                "(their redirect URI is built from it).",
                hint="Set it to the address admins reach the console at, e.g. "
                "https://console.example.org",
                id="tools_app.W201",
            )
        ]
    if not settings.DEBUG and urlsplit(settings.PUBLIC_URL).scheme != "https":
        return [
            checks.Warning(
                "CONSOLE_PUBLIC_URL is not https: OAuth providers would send authorization "
                "codes to it in clear text (and most refuse such redirect URIs).",
                hint="Serve the console over https and set CONSOLE_PUBLIC_URL to that address.",
                id="tools_app.W202",
            )
        ]
    return []
