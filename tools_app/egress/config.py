"""The egress policy from the console's settings and integrations (tools_app/egress/policy.py is
the Django-free core): what a tool run gets, what a console-side request gets, and the
warnings when tools' egress is not filtered on this host."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.conf import settings

from tools_app.config_warnings import ConsoleWarning, Level, warning_source
from tools_app.egress import policy as egress_policy

if TYPE_CHECKING:
    from tools_app.models import Integration


def integration_urls(integrations: Iterable[Integration]) -> dict[str, tuple[str, ...]]:
    """{slug: the values of its non-secret URL fields} (e.g. a SearXNG at
    http://127.0.0.1:8888), what egress_policy.integration_allows opens for the tools
    declaring it."""
    from tools_app.integrations.fields import fields_of, type_of
    from tools_app.integrations.oauth_spec import api_urls

    urls: dict[str, tuple[str, ...]] = {}
    for integration in integrations:
        itype = type_of(integration)
        if itype is not None and itype.oauth is not None:
            # Tools reach the API hosts only, never the token or revocation endpoints.
            urls[integration.slug] = api_urls(itype.oauth, integration.values or {})
            continue
        values = []
        for spec in fields_of(integration):
            value = (integration.values or {}).get(spec.name) or spec.default
            if spec.kind == "url" and not spec.secret and value:
                values.append(value)
        urls[integration.slug] = tuple(values)
    return urls


def confining(integrations: Iterable[Integration]) -> tuple[str, ...]:
    """The slugs of those whose type says `egress: confined`: a run granted one reaches its
    URLs and the console's exceptions, no public address. The type file (the console's,
    not a tool's) decides, so editing a tool cannot widen it."""
    from tools_app.integrations.fields import type_of

    found = []
    for integration in integrations:
        itype = type_of(integration)
        if itype is not None and itype.confines_egress:
            found.append(integration.slug)
    return tuple(found)


def _enabled(slugs: Iterable[str]) -> list[Integration]:
    from tools_app.models import Integration

    return list(Integration.objects.enabled().filter(slug__in=list(slugs)))


def integration_url_allows(slugs: Iterable[str]) -> tuple[egress_policy.Allow, ...]:
    """The exact host and port of the URL fields of the declared, enabled integrations:
    only the tool declaring them reaches them."""
    return egress_policy.integration_allows(integration_urls(_enabled(slugs)))


def admin_entries() -> list[str]:
    """The exceptions admins added on the System page, as stored (one query)."""
    from tools_app.models import EgressException

    return EgressException.objects.entries()


def admin_allows(entries: list[str] | None = None) -> tuple[egress_policy.Allow, ...]:
    """The System page's exceptions (`entries`, or read now) as allow entries."""
    return egress_policy.admin_allows(admin_entries() if entries is None else entries)


def tool_policy(slugs: Iterable[str], admin: list[str] | None = None) -> egress_policy.Policy:
    """A run's policy; `admin`: the System page's exceptions as the run recorded them
    (None reads them); confined when one of the integrations confines it. Raises
    egress_policy.PolicyError for a malformed setting."""
    enabled = _enabled(slugs) if slugs else []
    extra = egress_policy.integration_allows(integration_urls(enabled))
    allows = (*admin_allows(admin), *extra)
    return egress_policy.build(
        settings.TOOL_NETWORK_ALLOW, allows, settings.TOOL_DNS, confined_by=confining(enabled)
    )


def console_policy(saved_integration=None) -> egress_policy.Policy:
    """For requests the console makes on a user's behalf (a connection test): the allow
    lists, plus the saved URLs of the integration being tested (what its tools reach
    anyway), never a URL only typed into a form."""
    slugs = [saved_integration.slug] if saved_integration is not None else []
    extra = integration_url_allows(slugs) if slugs else ()
    return egress_policy.build(
        settings.TOOL_NETWORK_ALLOW, (*admin_allows(), *extra), settings.TOOL_DNS
    )


@warning_source
def egress_warnings() -> list[ConsoleWarning]:
    from tools_app.runner import isolation_level, network, sandbox

    try:
        egress_policy.build(settings.TOOL_NETWORK_ALLOW, (), settings.TOOL_DNS)
    except egress_policy.PolicyError as exc:
        return [
            ConsoleWarning(
                f"The egress policy is invalid, so tools with network: true fail: {exc}",
                "The egress policy is invalid",
                Level.ERROR,
            )
        ]
    if isolation_level()[0] != "bwrap":
        return [
            ConsoleWarning(
                "Tools with network: true share this host's network unfiltered (no "
                "bubblewrap): they reach its loopback services and private networks.",
                "Tool network access is unfiltered",
            )
        ]
    if os.geteuid() != 0 and (why := sandbox.rootless_problem()):
        return [
            ConsoleWarning(
                "Tools with network: true share this host's network unfiltered, and a run's "
                "disk quota covers only /tmp and each file: the worker does not run as root "
                f"and cannot give runs a user namespace of their own ({why}).",
                "Tool network access is unfiltered",
            )
        ]
    if absent := network.missing():
        return [
            ConsoleWarning(
                f"Tools with network: true fail: {', '.join(absent)} is not installed "
                "(Debian packages slirp4netns, nftables, util-linux).",
                "Tools with network access fail",
                Level.ERROR,
            )
        ]
    return []
