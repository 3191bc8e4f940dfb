"""The egress policy from the console's settings and integrations (tools_app/egress.py is
the Django-free core): what a tool run gets, what a console-side request gets, and the
warnings when tools' egress is not filtered on this host."""

from __future__ import annotations

import os
from collections.abc import Iterable

from django.conf import settings

from tools_app import egress
from tools_app.checks import warning_source


def integration_url_allows(slugs: Iterable[str]) -> tuple[egress.Allow, ...]:
    """The exact host and port of the URL fields of the declared, enabled integrations
    (e.g. a SearXNG at http://127.0.0.1:8888): only the tool declaring them reaches them."""
    from tools_app.integrations.fields import fields_of
    from tools_app.models import Integration

    allows: list[egress.Allow] = []
    for integration in Integration.objects.enabled().filter(slug__in=list(slugs)):
        for spec in fields_of(integration):
            value = (integration.values or {}).get(spec.name) or spec.default
            if spec.kind == "url" and not spec.secret and value:
                allows += egress.url_allows(value, f"integration {integration.slug}")
    return tuple(allows)


def admin_entries() -> list[str]:
    """The exceptions admins added on the System page, as stored (one query)."""
    from tools_app.models import EgressException

    return EgressException.objects.entries()


def admin_allows(entries: list[str] | None = None) -> tuple[egress.Allow, ...]:
    """The System page's exceptions (`entries`, or read now) as allow entries. A row that
    no longer parses (it was checked when added) is skipped rather than failing runs."""
    from tools_app.models.egress import SOURCE

    allows: list[egress.Allow] = []
    for entry in admin_entries() if entries is None else entries:
        try:
            allows += egress.parse_allow(entry, source=SOURCE)
        except egress.PolicyError:
            continue
    return tuple(allows)


def tool_policy(slugs: Iterable[str], admin: list[str] | None = None) -> egress.Policy:
    """A run's policy; `admin`: the System page's exceptions as the run recorded them
    (None reads them). Raises egress.PolicyError for a malformed setting."""
    extra = integration_url_allows(slugs) if slugs else ()
    allows = (*admin_allows(admin), *extra)
    return egress.build(settings.TOOL_NETWORK_ALLOW, allows, settings.TOOL_DNS)


def console_policy(saved_integration=None) -> egress.Policy:
    """For requests the console makes on a user's behalf (a connection test): the allow
    lists, plus the saved URLs of the integration being tested (what its tools reach
    anyway), never a URL only typed into a form."""
    slugs = [saved_integration.slug] if saved_integration is not None else []
    extra = integration_url_allows(slugs) if slugs else ()
    return egress.build(settings.TOOL_NETWORK_ALLOW, (*admin_allows(), *extra), settings.TOOL_DNS)


@warning_source
def egress_warnings() -> list[str]:
    from tools_app.runner import isolation_level, network, sandbox

    try:
        egress.build(settings.TOOL_NETWORK_ALLOW, (), settings.TOOL_DNS)
    except egress.PolicyError as exc:
        return [f"The egress policy is invalid, so tools with network: true fail: {exc}"]
    if isolation_level()[0] != "bwrap":
        return [
            "Tools with network: true share this host's network unfiltered (no bubblewrap): "
            "they reach its loopback services and private networks."
        ]
    if os.geteuid() != 0 and (why := sandbox.rootless_problem()):
        return [
            "Tools with network: true share this host's network unfiltered, and a run's "
            "disk quota covers only /tmp and each file: the worker does not run as root and "
            f"cannot give runs a user namespace of their own ({why})."
        ]
    if absent := network.missing():
        return [
            f"Tools with network: true fail: {', '.join(absent)} is not installed "
            "(Debian packages slirp4netns, nftables, util-linux)."
        ]
    return []
