"""The `oauth:` block of an integration type file (docs/integrations.md#oauth2): parsed and
validated here, without settings or the database, so types.py can call it while it reads
a file and report every problem with its line, like the rest of the file.

    oauth:
      grant: authorization_code        # or client_credentials (no browser step)
      authorize_url: https://...       # or "{field}": a url field of the type
      token_url: https://...           # same
      revocation_url: https://...      # optional (RFC 7009)
      userinfo_url: https://...        # optional: where the account identity is read
      scopes: [openid, email, ...]     # or "{field}": a field holding them, space-separated
      authorize_params: {access_type: offline}
      pkce: true                       # S256; default true
      env: GOOGLE_ACCESS_TOKEN         # the variable tools receive the access token in
      api_hosts: [gmail.googleapis.com]   # host[:port] or "{field}" (a url field)
      account: email                   # userinfo field / id_token claim naming the account
      warning: ...                     # shown on the integration's page

An OAuth type's fields configure the console (client id and secret, URLs), they are
never passed to tools: `env` is optional for them, and tools get only the access token.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tools_app.integrations.validation import env_problem, url_problem
from tools_app.lib import strictyaml

OAUTH_KEYS = (
    "grant",
    "authorize_url",
    "token_url",
    "revocation_url",
    "userinfo_url",
    "scopes",
    "authorize_params",
    "pkce",
    "env",
    "api_hosts",
    "account",
    "warning",
)
GRANTS = ("authorization_code", "client_credentials")
# The fields every OAuth type has: what the admin copies from the provider's console.
CLIENT_ID_FIELD = "client_id"
CLIENT_SECRET_FIELD = "client_secret"
# A field reference: the whole value is one {field}.
_REF_RE = re.compile(r"\{([a-z][a-z0-9_]{0,63})\}")
_HOST_RE = re.compile(r"[A-Za-z0-9.-]{1,253}(:[0-9]{1,5})?")
_SCOPE_RE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,200}")  # RFC 6749 scope-token
_PARAM_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
# Authorize parameters the console sets itself: a type cannot override them.
_OWN_PARAMS = frozenset(
    {"client_id", "redirect_uri", "state", "response_type", "code_challenge", "scope"}
    | {"code_challenge_method"}
)

Report = Callable[[int, str, str], None]


@dataclass(frozen=True)
class OAuthSpec:
    grant: str
    token_url: str
    env: str
    authorize_url: str = ""
    revocation_url: str = ""
    userinfo_url: str = ""
    scopes: tuple[str, ...] = ()  # or one "{field}"
    authorize_params: tuple[tuple[str, str], ...] = ()
    pkce: bool = True
    api_hosts: tuple[str, ...] = ()
    account: str = ""
    warning: str = ""

    @property
    def browser(self) -> bool:
        """Whether connecting takes the admin through the provider's consent page."""
        return self.grant == "authorization_code"


def field_ref(value: str) -> str | None:
    """The field name when `value` is exactly one "{field}", else None."""
    match = _REF_RE.fullmatch(value)
    return match.group(1) if match else None


def resolve(value: str, values: Mapping[str, str]) -> str:
    """A URL (or scopes) as written in the type, or the named field's value."""
    name = field_ref(value)
    return (values.get(name) or "").strip() if name else value


def check_oauth(
    report: Report, m: strictyaml.Map, kinds: Mapping[str, tuple[str, bool]]
) -> OAuthSpec | None:
    """Validate `m["oauth"]`; `kinds` maps the type's field names to (kind, secret).
    Returns an OAuthSpec, or None after reporting why not."""
    block = m["oauth"]
    line = m.key_lines["oauth"]
    if not isinstance(block, strictyaml.Map):
        report(line, "oauth", "must be a mapping with grant, token_url, env, ...")
        return None
    strictyaml.report_unknown_keys(
        report, block, OAUTH_KEYS, "unknown key (allowed: {allowed})", "oauth", label=str
    )

    def at(key: str) -> int:
        return block.key_lines.get(key, line)

    def text(key: str, *, limit: int = 2048) -> str:
        value = block.get(key)
        if value is None or value == "":
            return ""
        if not isinstance(value, str) or len(value) > limit:
            report(at(key), f"oauth.{key}", f"must be a string of at most {limit} characters")
            return ""
        return value.strip()

    def url(key: str, *, required: bool) -> str:
        value = text(key)
        if not value:
            if required:
                report(at(key), f"oauth.{key}", "is required")
            return ""
        name = field_ref(value)
        if name is not None:
            if kinds.get(name, ("", False))[0] != "url":
                report(at(key), f"oauth.{key}", f"{{{name}}} is not a url field of this type")
        elif problem := url_problem(value):
            report(at(key), f"oauth.{key}", problem)
        return value

    grant = text("grant") or "authorization_code"
    if grant not in GRANTS:
        report(at("grant"), "oauth.grant", f"{grant!r} is not one of {', '.join(GRANTS)}")
    browser = grant == "authorization_code"
    authorize_url = url("authorize_url", required=browser)
    if authorize_url and not browser:
        report(at("authorize_url"), "oauth.authorize_url", "a client_credentials type has none")
    token_url = url("token_url", required=True)
    revocation_url = url("revocation_url", required=False)
    userinfo_url = url("userinfo_url", required=False)
    env = text("env", limit=128)
    if not env:
        report(at("env"), "oauth.env", "is required (the variable tools get the token in)")
    elif problem := env_problem(env):
        report(at("env"), "oauth.env", problem)
    scopes: list[str] = []
    raw = block.get("scopes")
    if isinstance(raw, str) and field_ref(raw.strip()):
        name = field_ref(raw.strip()) or ""
        if name not in kinds:
            report(at("scopes"), "oauth.scopes", f"{{{name}}} is not a field of this type")
        scopes = [raw.strip()]
    elif raw is not None:
        items = raw if isinstance(raw, list) else [raw]
        for item in items:
            if not isinstance(item, str) or not _SCOPE_RE.fullmatch(item):
                report(at("scopes"), "oauth.scopes", f"{item!r} is not a scope")
            else:
                scopes.append(item)
    params: list[tuple[str, str]] = []
    raw = block.get("authorize_params")
    if raw is not None:
        if not isinstance(raw, strictyaml.Map):
            report(at("authorize_params"), "oauth.authorize_params", "must be a mapping")
        else:
            for name, value in raw.items():
                where = f"oauth.authorize_params.{name}"
                pline = raw.key_lines[name]
                if not _PARAM_RE.fullmatch(name):
                    report(pline, where, "is not a valid parameter name")
                elif name in _OWN_PARAMS:
                    report(pline, where, "is set by the console")
                elif not isinstance(value, str) or len(value) > 200:
                    report(pline, where, "must be a string of at most 200 characters")
                else:
                    params.append((name, value))
    pkce = block.get("pkce", True)
    if not isinstance(pkce, bool):
        report(at("pkce"), "oauth.pkce", f"must be true or false, not {pkce!r}")
        pkce = True
    hosts: list[str] = []
    raw = block.get("api_hosts")
    if raw is not None:
        items = raw if isinstance(raw, list) else [raw]
        for item in items:
            name = field_ref(item) if isinstance(item, str) else None
            if name is not None:
                if kinds.get(name, ("", False))[0] != "url":
                    report(at("api_hosts"), "oauth.api_hosts", f"{{{name}}} is not a url field")
                    continue
            elif not isinstance(item, str) or not _HOST_RE.fullmatch(item):
                report(at("api_hosts"), "oauth.api_hosts", f"{item!r} is not host or host:port")
                continue
            hosts.append(item)
    account = text("account", limit=64)
    if account and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", account):
        report(at("account"), "oauth.account", "must be a claim name such as sub or email")
    if CLIENT_ID_FIELD not in kinds:
        report(line, "oauth", f"the type needs a field named {CLIENT_ID_FIELD}")
    secret = kinds.get(CLIENT_SECRET_FIELD)
    if secret is not None and not secret[1]:
        report(line, "oauth", f"the field {CLIENT_SECRET_FIELD} must be secret: true")
    return OAuthSpec(
        grant=grant,
        authorize_url=authorize_url,
        token_url=token_url,
        revocation_url=revocation_url,
        userinfo_url=userinfo_url,
        scopes=tuple(scopes),
        authorize_params=tuple(params),
        pkce=pkce,
        env=env,
        api_hosts=tuple(hosts),
        account=account,
        warning=text("warning", limit=2000),
    )


def api_urls(spec: OAuthSpec, values: Mapping[str, str]) -> tuple[str, ...]:
    """What the tools declaring an integration of this type may reach: its API hosts
    (https, or the named url field's scheme, host and port)."""
    urls = []
    for host in spec.api_hosts:
        if field_ref(host):
            if value := resolve(host, values):
                urls.append(value)
        else:
            urls.append(f"https://{host}")
    return tuple(urls)
