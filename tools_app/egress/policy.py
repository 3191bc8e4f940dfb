"""The egress policy (docs/egress.md): where a tool run, and any request the console
makes on a user's behalf, may connect.

Public addresses are allowed. Refused: the host's loopback, private networks (RFC 1918,
100.64/10, fc00::/7), link-local (169.254/16 with cloud metadata, fe80::/10), unspecified,
multicast and reserved addresses, and the console host's own networks: every address of
every interface with its subnet (the address and its prefix, a point-to-point peer's too)
and the gateway of every route of the main table (the default one included), read from
the kernel. IPv6 forms that embed an IPv4 address (::ffff:127.0.0.1, 64:ff9b::/96) are
judged by that IPv4 address. Exceptions, checked first: CONSOLE_TOOL_NETWORK_ALLOW
(comma-separated `CIDR`, `host:port` or `CIDR:port`) and, for one tool only, the exact host
and port of the URL fields of the integrations it declares. A run granted an integration
whose type confines egress (`egress: confined`, the browser's CDP endpoint) reaches those
exceptions and nothing else: public addresses are refused too.

Pure Python, no Django: the runner's network setup (runner/network.py turns a Policy into
nftables rules) and the egress-aware HTTP client (egress/transport.py) both decide here.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ALLOW_SETTING = "CONSOLE_TOOL_NETWORK_ALLOW"
# The source an exception of the System page (models.EgressException) names in decisions.
ADMIN_SOURCE = "the System page"
# What a refusal tells the person who sees it.
ALLOW_HINT = f"an admin adds it under Network egress on the System page, or to {ALLOW_SETTING}"

# (network, why it is refused); the first match names the reason.
REFUSED: tuple[tuple[IPNetwork, str], ...] = tuple(
    (ipaddress.ip_network(net), why)
    for net, why in (
        ("0.0.0.0/8", "an unspecified address"),
        ("127.0.0.0/8", "the host's loopback"),
        ("10.0.0.0/8", "a private address (RFC 1918)"),
        ("172.16.0.0/12", "a private address (RFC 1918)"),
        ("192.168.0.0/16", "a private address (RFC 1918)"),
        ("100.64.0.0/10", "a shared (carrier-grade NAT) address"),
        ("169.254.169.254/32", "the cloud metadata service"),
        ("169.254.0.0/16", "a link-local address"),
        ("192.0.0.0/24", "an IETF protocol address"),
        ("198.18.0.0/15", "a benchmarking address"),
        ("224.0.0.0/4", "a multicast address"),
        ("240.0.0.0/4", "a reserved address"),
        ("::/128", "an unspecified address"),
        ("::1/128", "the host's loopback"),
        ("fc00::/7", "a private address (unique local)"),
        ("fe80::/10", "a link-local address"),
        ("ff00::/8", "a multicast address"),
        ("fec0::/10", "a site-local address"),
    )
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")


class PolicyError(ValueError):
    """A malformed allow entry; the message names it."""


def embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, NAT64), if any."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip in NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def refusal(
    ip: IPAddress,
    own: Iterable[IPAddress] = (),
    subnets: Iterable[IPNetwork] = (),
    gateways: Iterable[IPAddress] = (),
) -> str | None:
    """Why `ip` is refused by default, or None for a public address."""
    ip = embedded_ipv4(ip) or ip
    for network, why in REFUSED:
        if ip.version == network.version and ip in network:
            return why
    if ip in set(own):
        return "an address of the console's own host"
    if ip in set(gateways):
        return "a gateway of the console's host"
    for network in subnets:
        if ip.version == network.version and ip in network:
            return f"in the console host's own subnet {network}"
    return None


@dataclass(frozen=True, order=True)
class Allow:
    """One exception: a network, optionally one TCP/UDP port, and where it came from."""

    network: IPNetwork
    port: int | None = None
    source: str = ALLOW_SETTING

    def matches(self, ip: IPAddress, port: int | None) -> bool:
        ip = embedded_ipv4(ip) or ip
        return (
            ip.version == self.network.version
            and ip in self.network
            and (self.port is None or self.port == port)
        )

    def __str__(self) -> str:
        net = self.network
        text = str(net.network_address) if net.num_addresses == 1 else str(net)
        if self.port is not None:
            text = f"[{text}]:{self.port}" if net.version == 6 else f"{text}:{self.port}"
        return text


def resolve(host: str) -> list[IPAddress]:
    """Every address `host` (a literal or a name) resolves to; [] if it does not."""
    host = host.strip("[]")
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    found = dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos)
    return list(found)


def _port(text: str, entry: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise PolicyError(f"{entry!r}: the port must be a number from 1 to 65535")
    return int(text)


def parse_allow(text: str, *, source: str = ALLOW_SETTING) -> tuple[Allow, ...]:
    """`CIDR`, `host:port` or `CIDR:port`, comma-separated (IPv6 with a port in brackets:
    `[fd00::1]:8080`). Host names are resolved now. Raises PolicyError."""
    allows: list[Allow] = []
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        host, port = entry, None
        if entry.startswith("["):
            host, _, rest = entry[1:].partition("]")
            if rest:
                if not rest.startswith(":"):
                    raise PolicyError(f"{entry!r}: expected [IPv6]:port")
                port = _port(rest[1:], entry)
        elif entry.count(":") == 1:
            host, port_text = entry.split(":")
            port = _port(port_text, entry)
        try:
            networks = [ipaddress.ip_network(host, strict=False)]
        except ValueError:
            networks = []
        if not networks:
            if port is None:
                raise PolicyError(
                    f"{entry!r}: a host name needs a port (host:port); "
                    "otherwise give a CIDR such as 203.0.113.0/24"
                )
            if "/" in host or not host:
                raise PolicyError(f"{entry!r}: not a CIDR, host:port or CIDR:port")
            networks = [ipaddress.ip_network(ip) for ip in resolve(host)]
            if not networks:
                raise PolicyError(f"{entry!r}: the host name {host!r} does not resolve")
        allows += [Allow(net, port, source) for net in networks]
    return tuple(allows)


DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def url_allows(url: str, source: str) -> tuple[Allow, ...]:
    """The exact host and port of an http(s) or ws(s) URL (an integration's URL field),
    resolved."""
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError:
        return ()
    if not parts.hostname or port is None:
        return ()
    return tuple(Allow(ipaddress.ip_network(ip), port, source) for ip in resolve(parts.hostname))


def admin_allows(entries: Iterable[str]) -> tuple[Allow, ...]:
    """The System page's exceptions as allow entries. A row that no longer parses (it was
    checked when added) is skipped rather than failing runs."""
    allows: list[Allow] = []
    for entry in entries:
        try:
            allows += parse_allow(entry, source=ADMIN_SOURCE)
        except PolicyError:
            continue
    return tuple(allows)


def integration_allows(urls: Mapping[str, Iterable[str]]) -> tuple[Allow, ...]:
    """The exact host and port of integrations' URL values ({slug: URLs}), resolved."""
    return tuple(
        allow
        for slug, values in urls.items()
        for url in values
        for allow in url_allows(url, f"integration {slug}")
    )


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""  # why it is refused, or which exception allowed it


@dataclass(frozen=True)
class Policy:
    """Hashable, so a spare sandbox's shape can include it (runner/standby.py)."""

    allows: tuple[Allow, ...] = ()
    own: tuple[IPAddress, ...] = field(default_factory=tuple)
    dns: IPAddress | None = None  # the resolver tools use; None: the host's (via slirp)
    # The host's LAN: its interfaces' subnets and its routes' gateways (HostNetworks).
    subnets: tuple[IPNetwork, ...] = field(default_factory=tuple)
    gateways: tuple[IPAddress, ...] = field(default_factory=tuple)
    # The integrations (slugs) that confine this run to the exceptions: public addresses
    # are refused too. Empty: public addresses are allowed.
    confined_by: tuple[str, ...] = ()

    def decide(self, ip: IPAddress | str, port: int | None) -> Decision:
        ip = ipaddress.ip_address(ip) if isinstance(ip, str) else ip
        for allow in self.allows:
            if allow.matches(ip, port):
                return Decision(True, f"allowed by {allow.source} ({allow})")
        why = refusal(ip, self.own, self.subnets, self.gateways)
        if why is not None:
            return Decision(False, f"{ip} is {why}")
        if self.confined_by:
            return Decision(False, f"{ip} is no allowed endpoint: {self.confinement}")
        return Decision(True, "a public address")

    @property
    def confinement(self) -> str:
        """Who confines the run, in words (when `confined_by` names anyone)."""
        names = ", ".join(self.confined_by)
        if len(self.confined_by) > 1:
            return f"the integrations {names} confine this run's network to their endpoints"
        return f"the integration {names} confines this run's network to its endpoints"

    def decide_host(self, host: str, port: int) -> tuple[list[IPAddress], Decision]:
        """Resolve `host` once and judge EVERY address: one refused address refuses the
        host (a name that also resolves to a private address is no public destination,
        and connecting to its other addresses only would let a rebinding name pick its
        moment). The list is the addresses judged and allowed, built by the same loop that
        judged them: the only ones a connection for this host may use (egress/transport.py),
        empty when refused."""
        judged: list[IPAddress] = []
        resolved = resolve(host)
        if not resolved:
            return [], Decision(False, f"{host} does not resolve")
        for ip in resolved:
            decision = self.decide(ip, port)
            if not decision.allowed:
                return [], Decision(
                    False,
                    f"{host}:{port} is refused by the egress policy: {decision.reason} "
                    f"(to allow it: {ALLOW_HINT})",
                )
            judged.append(ip)
        return judged, Decision(True)

    def summary(self) -> str:
        """What the run page shows."""

        def listed(items: tuple) -> str:
            return f" ({', '.join(map(str, items))})" if items else ""

        public = "allowed (DNS included)."
        if self.confined_by:
            public = f"refused: {self.confinement} (the exceptions below; DNS allowed)."
        lines = [
            f"Public addresses: {public}",
            "Refused: the host's loopback, private, shared, link-local (cloud metadata "
            "included), multicast and reserved addresses, and the console host's own "
            f"addresses{listed(self.own)}, subnets{listed(self.subnets)} and "
            f"gateways{listed(self.gateways)}.",
        ]
        if self.dns is not None:
            lines.append(f"DNS: {self.dns} port 53 only.")
        if self.allows:
            lines.append("Allowed exceptions:")
            lines += [f"- {allow} ({allow.source})" for allow in self.allows]
        else:
            lines.append("No exceptions.")
        return "\n".join(lines)


# The console host's own networks change rarely; reading them costs a subprocess.
OWN_ADDRESSES_TTL = 60.0


@dataclass(frozen=True)
class HostNetworks:
    """The console host's place on its networks, as the kernel of the caller's network
    namespace sees it: what a tool must not reach by default (its LAN)."""

    addresses: tuple[IPAddress, ...] = ()
    subnets: tuple[IPNetwork, ...] = ()  # not already refused (loopback, RFC 1918, ...)
    gateways: tuple[IPAddress, ...] = ()


def host_networks() -> HostNetworks:
    return _host_networks(int(time.monotonic() // OWN_ADDRESSES_TTL))


def own_addresses() -> tuple[IPAddress, ...]:
    return host_networks().addresses


def _sorted(items: Iterable) -> tuple:
    return tuple(sorted(set(items), key=lambda x: (x.version, str(x))))


def _already_refused(network: IPNetwork) -> bool:
    return any(network.version == n.version and network.subnet_of(n) for n, _ in REFUSED)


@functools.lru_cache(maxsize=1)
def _host_networks(_epoch: int) -> HostNetworks:
    """Every address on the host's interfaces with its subnet (a point-to-point peer's
    subnet too: the peer is as much a neighbour), and every route's gateway. Loopback
    addresses and subnets inside a refused range add nothing (refused anyway)."""
    try:
        done = subprocess.run(
            ["ip", "-j", "addr", "show"], capture_output=True, timeout=10, check=True
        )
        links = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        links = []
    addresses: list[IPAddress] = []
    subnets: list[IPNetwork] = []
    for link in links:
        for info in link.get("addr_info", []):
            try:
                ip = ipaddress.ip_address(info.get("local", ""))
                prefix = int(info.get("prefixlen", ip.max_prefixlen))
                ends = {ip, ipaddress.ip_address(info.get("address") or ip)}
                nets = [ipaddress.ip_network(f"{end}/{prefix}", strict=False) for end in ends]
            except (ValueError, TypeError):
                continue
            if ip.is_loopback:
                continue
            addresses.append(ip)
            # A /32 (/128) of the address itself says nothing `addresses` does not.
            nets = [net for net in nets if net.num_addresses > 1 or net.network_address != ip]
            subnets += [net for net in nets if not _already_refused(net)]
    gateways = [ip for ip in _gateways() if refusal(ip) is None]
    return HostNetworks(_sorted(addresses), _sorted(subnets), _sorted(gateways))


def _gateways() -> list[IPAddress]:
    """The next hops of the main routing table (/proc/net/route, /proc/net/ipv6_route:
    the caller's network namespace), the default route's included."""
    found: list[IPAddress] = []
    try:
        lines = Path("/proc/net/route").read_text().splitlines()[1:]
    except OSError:
        lines = []
    for line in lines:
        cols = line.split()
        if len(cols) > 3 and int(cols[3], 16) & 0x2:  # RTF_GATEWAY
            # Little-endian hex: 010200C0 is 192.0.2.1.
            found.append(ipaddress.IPv4Address(bytes.fromhex(cols[2])[::-1]))
    try:
        lines = Path("/proc/net/ipv6_route").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        cols = line.split()
        if len(cols) == 10 and int(cols[4], 16) != 0:
            found.append(ipaddress.IPv6Address(bytes.fromhex(cols[4])))
    return found


def build(
    allow_text: str = "",
    extra: Iterable[Allow] = (),
    dns: str = "",
    confined_by: Iterable[str] = (),
) -> Policy:
    """The policy for the settings' allow list plus `extra` (a tool's integration URLs),
    confined to them when `confined_by` names integrations. Raises PolicyError for a
    malformed allow list or DNS server."""
    allows = tuple(dict.fromkeys([*parse_allow(allow_text), *extra]))
    resolver = None
    if dns.strip():
        try:
            resolver = ipaddress.IPv4Address(dns.strip())
        except ValueError:
            raise PolicyError(f"CONSOLE_TOOL_DNS: {dns.strip()!r} is not an IPv4 address") from None
    host = host_networks()
    return Policy(
        allows=allows,
        own=host.addresses,
        dns=resolver,
        subnets=host.subnets,
        gateways=host.gateways,
        confined_by=tuple(sorted(set(confined_by))),
    )


def from_environment(extra: Iterable[Allow] = ()) -> Policy:
    """For callers without Django settings (the runner's default)."""
    return build(os.environ.get(ALLOW_SETTING, ""), extra, os.environ.get("CONSOLE_TOOL_DNS", ""))
