"""The egress policy module (tools_app/egress/policy.py) and the console's egress-aware HTTP
client (tools_app/egress/transport.py via tools_app/egress/client.py): what is refused,
what the allow list means, and that console-side requests (connection tests) obey the same rules."""

from __future__ import annotations

import ipaddress
import os
import socket

import httpcore
import pytest
from django.urls import reverse

from tests.support import integrations as support
from tests.support import require, unprivileged
from tests.support.forms import submit
from tests.support.stand_in import Reply, Request, redirect
from tools_app.egress import client as http_client
from tools_app.egress import policy as egress_policy
from tools_app.runner import network

fast_passwords = support.fast_passwords


def policy(allow: str = "", own: tuple[str, ...] = ()) -> egress_policy.Policy:
    return egress_policy.Policy(
        allows=egress_policy.parse_allow(allow), own=tuple(ipaddress.ip_address(a) for a in own)
    )


@pytest.mark.parametrize(
    "address, why",
    [
        ("127.0.0.1", "the host's loopback"),
        ("127.8.9.10", "the host's loopback"),
        ("::1", "the host's loopback"),
        ("::ffff:127.0.0.1", "the host's loopback"),
        ("64:ff9b::7f00:1", "the host's loopback"),
        ("0.0.0.0", "an unspecified address"),  # noqa: S104 - a destination here
        ("::", "an unspecified address"),
        ("10.1.2.3", "a private address (RFC 1918)"),
        ("172.31.255.1", "a private address (RFC 1918)"),
        ("192.168.1.1", "a private address (RFC 1918)"),
        ("::ffff:192.168.1.1", "a private address (RFC 1918)"),
        ("100.64.0.1", "a shared (carrier-grade NAT) address"),
        ("169.254.169.254", "the cloud metadata service"),
        ("169.254.1.1", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("fd00::2", "a private address (unique local)"),
        ("224.0.0.1", "a multicast address"),
    ],
)
def test_it_refuses_non_public_addresses(address, why):
    decision = policy().decide(address, 80)
    assert not decision.allowed
    assert decision.reason.endswith(f" is {why}")


@pytest.mark.parametrize("address", ["198.51.100.10", "203.0.113.5", "8.8.8.8", "2001:db8::1"])
def test_it_allows_public_addresses(address):
    assert policy().decide(address, 443).allowed


def test_it_refuses_the_console_hosts_own_addresses():
    decision = policy(own=("198.51.100.7",)).decide("198.51.100.7", 8000)
    assert not decision.allowed
    assert "the console's own host" in decision.reason


def test_it_parses_each_allow_form():
    allows = egress_policy.parse_allow(
        " 10.0.0.0/8 , 127.0.0.1:8888,192.168.0.0/16:5432,[fd00::1]:80 "
    )
    assert [str(a) for a in allows] == [
        "10.0.0.0/8",
        "127.0.0.1:8888",
        "192.168.0.0/16:5432",
        "[fd00::1]:80",
    ]
    checked = policy("10.0.0.0/8,127.0.0.1:8888,192.168.0.0/16:5432")
    assert checked.decide("10.9.9.9", 1).allowed
    assert checked.decide("127.0.0.1", 8888).allowed
    assert not checked.decide("127.0.0.1", 8889).allowed
    assert checked.decide("192.168.4.4", 5432).allowed
    assert not checked.decide("192.168.4.4", 6379).allowed
    assert checked.decide("::ffff:127.0.0.1", 8888).allowed  # the same destination
    assert "CONSOLE_TOOL_NETWORK_ALLOW (127.0.0.1:8888)" in checked.decide("127.0.0.1", 8888).reason


def test_it_resolves_host_names_in_the_allow_list():
    allows = egress_policy.parse_allow("localhost:8888")
    assert {str(a.network.network_address) for a in allows} >= {"127.0.0.1"}
    assert all(a.port == 8888 for a in allows)


@pytest.mark.parametrize(
    "text, message",
    [
        ("example.org", "a host name needs a port"),
        ("10.0.0.0/8:http", "the port must be a number"),
        ("127.0.0.1:0", "the port must be a number from 1 to 65535"),
        ("10.0.0.0/33", "a host name needs a port"),
        ("no-such-host.invalid:80", "does not resolve"),
        ("[fd00::1]x", "expected [IPv6]:port"),
    ],
)
def test_it_explains_a_malformed_allow_entry(text, message):
    with pytest.raises(
        egress_policy.PolicyError, match=message.replace("[", r"\[").replace("]", r"\]")
    ):
        egress_policy.parse_allow(text)


def test_it_allows_the_exact_host_and_port_of_an_integration_url():
    allows = egress_policy.url_allows("http://127.0.0.1:8888/searx", "integration searxng")
    checked = egress_policy.Policy(allows=allows)
    assert checked.decide("127.0.0.1", 8888).allowed
    assert not checked.decide("127.0.0.1", 8889).allowed
    assert egress_policy.url_allows("https://[::1]/", "x")[0].port == 443


def test_it_refuses_a_name_when_any_of_its_addresses_is_refused():
    # localhost resolves to loopback only; an allowed port for 127.0.0.1 alone must not
    # let ::1 through, nor the reverse.
    _, decision = policy().decide_host("localhost", 80)
    assert not decision.allowed
    assert "localhost:80 is refused by the egress policy" in decision.reason


def test_it_writes_nftables_rules_that_refuse_by_default_and_dnat_allowed_loopback():
    rules = network.ruleset(policy("127.0.0.1:8888,198.51.100.0/24:443"))
    assert "policy drop;" in rules
    assert "ip daddr 10.0.2.2 meta l4proto { tcp, udp } th dport 8888 accept" in rules
    assert "dnat to 10.0.2.2" in rules
    assert "ip daddr 198.51.100.0/24 meta l4proto { tcp, udp } th dport 443 accept" in rules
    assert "169.254.0.0/16" in rules and "127.0.0.0/8" in rules
    assert rules.index("th dport 8888 accept") < rules.index("reject with tcp reset")


def test_it_refuses_public_addresses_to_a_confined_run():
    confined = egress_policy.Policy(
        allows=egress_policy.url_allows("http://127.0.0.1:9222", "integration browser"),
        confined_by=("browser",),
    )
    assert confined.decide("127.0.0.1", 9222).allowed
    assert not confined.decide("127.0.0.1", 9223).allowed  # that port only
    decision = confined.decide("203.0.113.5", 443)
    assert not decision.allowed
    assert decision.reason == (
        "203.0.113.5 is no allowed endpoint: the integration browser confines this run's "
        "network to its endpoints"
    )
    assert "Public addresses: refused: the integration browser confines" in confined.summary()
    rules = network.ruleset(confined)
    assert "th dport 9222 accept" in rules
    # Past the exceptions and refused ranges, the rest is refused, not accepted.
    tail = rules.split("table ip tool_egress_nat")[0].rstrip().splitlines()[-4:]
    assert [line.strip() for line in tail] == [
        "meta l4proto tcp reject with tcp reset",
        "reject with icmpx type admin-prohibited",
        "}",
        "}",
    ]
    assert "    accept\n" in network.ruleset(egress_policy.Policy(allows=confined.allows))


# --- the console's own requests --------------------------------------------------------


class Redirecting:
    """The answer of two servers: /go... redirects to `target` (once set), anything else
    is a console page. `seen` holds the headers of every request either server got."""

    def __init__(self) -> None:
        self.target = ""
        self.seen: list[dict[str, str]] = []

    def answer(self, request: Request) -> Reply:
        self.seen.append(request.headers)
        if request.path.startswith("/go") and self.target:
            return redirect(self.target)
        return Reply(200, b"secret console page")


@pytest.fixture
def servers(stand_in) -> tuple[int, int, Redirecting]:
    handler = Redirecting()
    first, second = (stand_in(handler.answer, methods=("GET",)) for _ in range(2))
    return first.port, second.port, handler


def test_it_refuses_a_console_request_to_the_hosts_loopback(servers):
    port, _, handler = servers
    with pytest.raises(
        http_client.HttpError, match="refused by the egress policy: 127.0.0.1 is the"
    ):
        http_client.request("GET", f"http://127.0.0.1:{port}/", policy=policy())
    assert handler.seen == []
    allowed = http_client.request(
        "GET", f"http://127.0.0.1:{port}/", policy=policy(f"127.0.0.1:{port}")
    )
    assert allowed.status == 200


@pytest.mark.parametrize("host", ["0.0.0.0", "[::ffff:127.0.0.1]", "[::]"])  # noqa: S104
def test_it_refuses_console_requests_to_this_host_in_any_spelling(servers, host):
    port, _, handler = servers
    with pytest.raises(http_client.HttpError, match="refused by the egress policy"):
        http_client.request("GET", f"http://{host}:{port}/", policy=policy())
    assert handler.seen == []


def test_it_rechecks_every_redirect_hop(servers):
    port, other, handler = servers
    handler.target = f"http://127.0.0.1:{other}/admin/"
    with pytest.raises(http_client.HttpError, match=f"127.0.0.1:{other} is refused by the egress"):
        http_client.request(
            "GET", f"http://127.0.0.1:{port}/go", policy=policy(f"127.0.0.1:{port}")
        )
    assert len(handler.seen) == 1  # the allowed first hop only


def test_it_drops_authorization_on_a_cross_origin_redirect(servers):
    port, other, handler = servers
    handler.target = f"http://127.0.0.1:{other}/next"
    result = http_client.request(
        "GET",
        f"http://127.0.0.1:{port}/go",
        headers={"Authorization": "Bearer tok"},
        policy=policy(f"127.0.0.1:{port},127.0.0.1:{other}"),
    )
    assert result.status == 200
    first, second = handler.seen
    assert first["Authorization"] == "Bearer tok"
    assert "Authorization" not in second


def test_it_connects_to_the_address_it_checked(monkeypatch, servers):
    """A name re-resolved between the check and the connect (DNS rebinding) cannot move
    the connection: the backend connects to the address it judged."""
    port, _, _ = servers
    answers = iter(["198.51.100.99", "127.0.0.1"])
    real = socket.getaddrinfo

    def rebinding(host, *args, **kwargs):
        if host == "rebind.example":
            ip = next(answers, "127.0.0.1")
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, 0))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    connected = []

    def record(self, host, port, *args, **kwargs):
        connected.append(host)
        raise httpcore.ConnectError("test stops here")

    monkeypatch.setattr(httpcore.SyncBackend, "connect_tcp", record)
    with pytest.raises(http_client.HttpError):
        http_client.request("GET", f"http://rebind.example:{port}/", policy=policy(), timeout=2)
    assert connected == ["198.51.100.99"]


def press_test(client, page: str, **changes: str) -> str:
    """Fill in searxng's new or edit page and press its Test connection button."""
    url = reverse(page, args=["searxng"])
    response = submit(client, url, changes, form_id="integration-form", button="Test connection")
    return response.content.decode()


def test_it_refuses_a_connection_test_to_the_hosts_loopback(console_admin_client, servers):
    port, _, handler = servers
    page = press_test(
        console_admin_client,
        "integration_create",
        field_url=f"http://127.0.0.1:{port}/admin/login/?",
    )
    assert f"127.0.0.1:{port} is refused by the egress policy" in page
    assert "secret console page" not in page
    assert handler.seen == []


def test_it_lets_a_connection_test_reach_an_allowed_destination(
    console_admin_client, servers, settings
):
    port, other, handler = servers
    settings.TOOL_NETWORK_ALLOW = f"127.0.0.1:{port}"
    page = press_test(
        console_admin_client, "integration_create", field_url=f"http://127.0.0.1:{port}"
    )
    assert "Connection works" in page
    handler.target = f"http://127.0.0.1:{other}/"
    handler.seen.clear()
    page = press_test(
        console_admin_client, "integration_create", field_url=f"http://127.0.0.1:{port}/go"
    )
    assert f"127.0.0.1:{other} is refused by the egress policy" in page


def test_it_refuses_a_dns_setting_that_is_not_an_ipv4_address():
    with pytest.raises(
        egress_policy.PolicyError, match="CONSOLE_TOOL_DNS: 'dns.example' is not an IPv4"
    ):
        egress_policy.build("", dns="dns.example")


def test_it_warns_when_tools_egress_is_unfiltered_here(monkeypatch, settings):
    """A non-root worker on a host where runs cannot have a user namespace of their own
    (here: no util-linux unshare)."""
    from tools_app.egress import config
    from tools_app.runner import sandbox

    monkeypatch.setattr(config.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(sandbox, "unshare_executable", lambda: None)
    warnings = config.egress_warnings()
    texts = [w.text for w in warnings]
    assert any("share this host's network unfiltered" in t for t in texts), texts
    assert any("(bubblewrap or unshare (util-linux) is not installed)" in t for t in texts)


@unprivileged.when_root
def test_it_does_not_warn_a_non_root_worker_whose_runs_get_their_own_namespaces(settings):
    from tools_app.egress import config
    from tools_app.runner import isolation_level, network

    assert os.geteuid() != 0  # as root, this runs in a child as uid 65534
    require(isolation_level()[0] != "bwrap", "needs bubblewrap")
    require(network.missing() != [], f"missing: {network.missing()}")
    assert config.egress_warnings() == []


def test_it_warns_when_the_allow_list_is_invalid(settings):
    from tools_app.egress import config

    settings.TOOL_NETWORK_ALLOW = "10.0.0.0/8,example.org"
    (warning,) = config.egress_warnings()
    assert "The egress policy is invalid, so tools with network: true fail" in warning.text
    assert "'example.org': a host name needs a port" in warning.text
    assert warning.level == "error"


def test_it_lets_a_saved_integration_test_reach_its_saved_url_only(console_admin_client, servers):
    """A saved URL is what the integration's tools reach anyway; a URL only typed into the
    form is judged like any other destination."""
    port, other, handler = servers
    support.create("searxng", values={"url": f"http://127.0.0.1:{port}"})
    page = press_test(
        console_admin_client, "integration_edit", field_url=f"http://127.0.0.1:{port}"
    )
    assert "Connection works" in page
    page = press_test(
        console_admin_client, "integration_edit", field_url=f"http://127.0.0.1:{other}"
    )
    assert f"127.0.0.1:{other} is refused by the egress policy" in page
    assert len(handler.seen) == 1
