"""The `oauth:` block of integration type files (integrations/oauth_spec.py): the shipped
OAuth types, and every problem reported with its line."""

from __future__ import annotations

import pytest

from tools_app.integrations.types import IntegrationType, get_type, parse_type


def parse(text: str, slug: str = "demo") -> tuple[IntegrationType | None, list[str]]:
    itype, problems = parse_type(text, f"seed/integrations/{slug}.yaml", slug)
    return itype, [str(p) for p in problems]


GOOD = """\
label: Demo
description: A demo OAuth service.
fields:
  - name: client_id
    required: true
  - name: client_secret
    secret: true
  - name: api_url
    kind: url
oauth:
  authorize_url: https://auth.example.org/authorize
  token_url: https://auth.example.org/token
  scopes: [read, write]
  authorize_params: {access_type: offline}
  env: DEMO_ACCESS_TOKEN
  api_hosts: [api.example.org, "{api_url}"]
  account: sub
"""


def test_it_reads_a_good_oauth_block() -> None:
    itype, problems = parse(GOOD)
    assert problems == []
    assert itype is not None and itype.oauth is not None
    spec = itype.oauth
    assert spec.grant == "authorization_code" and spec.browser
    assert spec.pkce is True  # the default
    assert spec.scopes == ("read", "write")
    assert spec.authorize_params == (("access_type", "offline"),)
    assert spec.api_hosts == ("api.example.org", "{api_url}")
    # An OAuth type's fields need no env: they configure the console, not the tools.
    assert [f.env for f in itype.fields] == ["", "", ""]


def test_it_ships_google_with_offline_access_and_the_testing_warning() -> None:
    google = get_type("google")
    assert google.oauth is not None
    assert google.oauth.env == "GOOGLE_ACCESS_TOKEN"
    assert "https://www.googleapis.com/auth/gmail.readonly" in google.oauth.scopes
    assert dict(google.oauth.authorize_params) == {"access_type": "offline", "prompt": "consent"}
    assert google.oauth.api_hosts == ("gmail.googleapis.com",)
    assert google.oauth.account == "email"
    assert "7 days" in google.oauth.warning
    assert google.field("client_secret").secret


def test_it_ships_generic_types_whose_endpoints_are_fields() -> None:
    generic = get_type("generic_oauth2")
    assert generic.oauth is not None and generic.oauth.token_url == "{token_url}"
    machine = get_type("oauth2_client_credentials")
    assert machine.oauth is not None and machine.oauth.grant == "client_credentials"
    assert not machine.oauth.browser


def test_it_reports_each_problem_with_its_line() -> None:
    bad = """\
label: Demo
description: Bad.
fields:
  - name: client_secret
    env: DEMO_SECRET
oauth:
  grant: implicit
  token_url: ftp://example.org/token
  authorize_url: "{nope}"
  scopes: ["a b"]
  authorize_params: {redirect_uri: x}
  pkce: maybe
  env: PATH
  api_hosts: ["http://x/"]
  colour: blue
"""
    itype, problems = parse(bad)
    assert itype is None
    text = "\n".join(problems)
    assert "demo.yaml:15: oauth.colour: unknown key" in text
    assert "demo.yaml:7: oauth.grant: 'implicit' is not one of" in text
    assert "demo.yaml:8: oauth.token_url: must be an http:// or https:// URL" in text
    assert "demo.yaml:9: oauth.authorize_url: {nope} is not a url field of this type" in text
    assert "demo.yaml:10: oauth.scopes: 'a b' is not a scope" in text
    assert "demo.yaml:11: oauth.authorize_params.redirect_uri: is set by the console" in text
    assert "demo.yaml:12: oauth.pkce: must be true or false" in text
    assert "demo.yaml:13: oauth.env: 'PATH' is reserved" in text
    assert "demo.yaml:14: oauth.api_hosts: 'http://x/' is not host or host:port" in text
    assert "demo.yaml:6: oauth: the type needs a field named client_id" in text
    assert "demo.yaml:6: oauth: the field client_secret must be secret: true" in text


def test_it_requires_the_token_url_and_the_env() -> None:
    _itype, problems = parse(
        "label: D\ndescription: D.\nfields:\n  - name: client_id\noauth:\n"
        "  authorize_url: https://a.example/\n"
    )
    assert any("oauth.token_url: is required" in p for p in problems)
    assert any("oauth.env: is required" in p for p in problems)
    assert not any("fields[0].env" in p for p in problems)


def test_it_refuses_oauth_on_a_custom_type() -> None:
    _itype, problems = parse("label: D\ndescription: D.\ncustom: true\noauth: {}\n")
    assert any("a custom type cannot use OAuth" in p for p in problems)


@pytest.mark.django_db
def test_it_checks_the_public_url_redirect_uris_are_built_from(settings) -> None:
    from tools_app.audit import Actor
    from tools_app.integrations.oauth import check_public_url
    from tools_app.integrations.service import create_integration

    settings.PUBLIC_URL = ""
    assert check_public_url() == []  # nothing to connect yet
    create_integration(
        "g",
        "google",
        actor=Actor.system(),
        values={"client_id": "x"},
        secrets={"client_secret": "y"},
    )
    assert [m.id for m in check_public_url()] == ["tools_app.W201"]
    settings.PUBLIC_URL, settings.DEBUG = "http://console.example", False
    assert [m.id for m in check_public_url()] == ["tools_app.W202"]
    settings.PUBLIC_URL = "https://console.example"
    assert check_public_url() == []
