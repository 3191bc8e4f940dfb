"""The egress policy in real tool runs (bubblewrap, slirp4netns, nftables, as root): a
network: true tool reaches public addresses and nothing of the host or private networks,
except what the policy allows. The "public" and private hosts are network namespaces of
our own (tests/support/egress.py); nothing else is a traffic target."""

from __future__ import annotations

import ipaddress
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import egress as support
from tests.support import require
from tools_app.egress import config
from tools_app.egress import policy as egress_policy
from tools_app.runner import FAILED, SUCCEEDED, RunRequest, isolation_level, network, run, standby

# Connects to each "host:port" in params.targets: "ok <answer>" or "refused <error>".
PROBE_PY = textwrap.dedent(
    """
    import socket

    def probe(target):
        host, port = target.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=3) as sock:
                sock.sendall(b"GET / HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n")
                data = b""
                while chunk := sock.recv(4096):
                    data += chunk
            return "ok " + data.decode(errors="replace").split("\\r\\n\\r\\n", 1)[-1][:80]
        except OSError as exc:
            return f"refused {type(exc).__name__}"

    def execute(tool_call_id, params, signal, on_update):
        results = {t: probe(t) for t in params["targets"]}
        return {"content": [{"type": "text", "text": __import__("json").dumps(results)}]}
    """
)
# The same from bash (a cold start through the gate, not a spare).
PROBE_SH = textwrap.dedent(
    """
    for target in $TARGETS; do
      if timeout 3 bash -c "exec 3<>/dev/tcp/${target%:*}/${target##*:}" 2>/dev/null
      then echo "$target ok"; else echo "$target refused"; fi
    done
    """
)


@pytest.fixture(scope="module")
def hosts() -> Iterator[support.EgressHosts]:
    require(isolation_level()[0] != "bwrap", "egress filtering needs bubblewrap")
    with support.test_hosts() as made:
        yield made


@pytest.fixture
def local_http(stand_in) -> int:
    return stand_in(support.hello).port


@pytest.fixture(autouse=True)
def no_spares_left() -> Iterator[None]:
    yield
    standby.discard_spare()
    assert support.slirp_children() == []


def probe(
    tmp_path: Path, targets: list[str], policy: egress_policy.Policy | None, *, network_on=True
) -> dict[str, str]:
    tool = tmp_path / "probe"
    tool.mkdir(exist_ok=True)
    (tool / "index.py").write_text(PROBE_PY)
    outcome = run(
        RunRequest(
            tool_dir=tool,
            language="python",
            entry="index.py",
            params={"targets": targets},
            tool_call_id="egress",
            env={},
            secrets={},
            network=network_on,
            egress=policy,
            work_root=tmp_path / "runs" / "r",
        )
    )
    assert outcome.status == SUCCEEDED, outcome.result
    return json.loads(outcome.result["content"][0]["text"])


def test_it_reaches_public_addresses_and_refuses_the_hosts_loopback_and_private_ones(
    tmp_path, hosts, local_http
):
    targets = [
        f"{hosts.public}:80",
        f"127.0.0.1:{local_http}",
        "127.0.0.1:5432",
        "127.0.0.1:6379",
        f"10.0.2.2:{local_http}",  # slirp's alias of the host's loopback
        f"0.0.0.0:{local_http}",  # noqa: S104 - "this host" as a destination
        f"::ffff:127.0.0.1:{local_http}",
        f"::1:{local_http}",
        f"{hosts.private}:80",
    ]
    results = probe(tmp_path, targets, egress_policy.build(""))
    assert results.pop(f"{hosts.public}:80") == f"ok hello from {hosts.public}"
    assert all(r.startswith("refused") for r in results.values()), results


def test_it_refuses_the_console_hosts_own_addresses(tmp_path, hosts, stand_in):
    # The host's end of the test link has a public address: a console host with a public
    # address serves its pages there (not only on loopback).
    egress_policy._host_networks.cache_clear()  # the link is new
    assert egress_policy.refusal(ipaddress.ip_address(hosts.host_public)) is None
    port = stand_in(support.hello, host=hosts.host_public).port
    results = probe(
        tmp_path, [f"{hosts.host_public}:{port}", f"{hosts.public}:80"], egress_policy.build("")
    )
    assert results[f"{hosts.public}:80"].startswith("ok")
    assert results[f"{hosts.host_public}:{port}"].startswith("refused"), results


@pytest.mark.parametrize("form", ["cidr", "host_port", "cidr_port"])
def test_it_allows_what_console_tool_network_allow_names(tmp_path, hosts, local_http, form):
    allow = {
        "cidr": f"{hosts.private}/32",
        "host_port": f"{hosts.private}:80,127.0.0.1:{local_http}",
        "cidr_port": f"{hosts.private.rsplit('.', 1)[0]}.0/24:80,127.0.0.0/8:{local_http}",
    }[form]
    results = probe(
        tmp_path,
        [f"{hosts.private}:80", f"{hosts.private}:81", f"127.0.0.1:{local_http}", "127.0.0.1:6379"],
        egress_policy.build(allow),
    )
    assert results[f"{hosts.private}:80"] == f"ok hello from {hosts.private}"
    assert results[f"{hosts.private}:81"].startswith("refused")  # nothing listens or refused
    assert results["127.0.0.1:6379"].startswith("refused")
    if form == "cidr":
        assert results[f"127.0.0.1:{local_http}"].startswith("refused")
    else:
        assert results[f"127.0.0.1:{local_http}"].startswith("ok hello from 127.0.0.1")


def test_it_keeps_the_hosts_loopback_closed_whatever_an_allowed_cidr_covers(
    tmp_path, hosts, local_http
):
    # 10.0.0.0/8 covers slirp's gateway 10.0.2.2, which is the host's loopback once a
    # loopback destination is allowed: only that port may pass.
    results = probe(
        tmp_path,
        [f"{hosts.private}:80", f"127.0.0.1:{local_http}", "10.0.2.2:6379", "10.0.2.2:5432"],
        egress_policy.build(f"10.0.0.0/8,127.0.0.1:{local_http}"),
    )
    assert results[f"{hosts.private}:80"].startswith("ok")
    assert results[f"127.0.0.1:{local_http}"].startswith("ok")
    assert results["10.0.2.2:6379"].startswith("refused")
    assert results["10.0.2.2:5432"].startswith("refused")


def test_it_allows_an_integration_url_only_to_the_tool_that_declares_it(
    tmp_path, hosts, local_http, db
):
    from tests.support import integrations as integrations_support

    integrations_support.create("searxng", values={"url": f"http://127.0.0.1:{local_http}"})
    target = [f"127.0.0.1:{local_http}", "127.0.0.1:6379"]
    declares = probe(tmp_path, target, config.tool_policy(["searxng"]))
    assert declares[f"127.0.0.1:{local_http}"].startswith("ok hello")
    assert declares["127.0.0.1:6379"].startswith("refused")
    other = probe(tmp_path, target, config.tool_policy([]))
    assert other[f"127.0.0.1:{local_http}"].startswith("refused")


def test_it_confines_a_run_granted_a_confining_integration_to_its_endpoint(
    tmp_path, hosts, local_http, stand_in, db
):
    from tests.support import integrations as integrations_support

    other = stand_in(support.hello).port  # the same host, a port the integration does not name
    integrations_support.create("browser", values={"endpoint": f"http://127.0.0.1:{local_http}"})
    targets = [f"127.0.0.1:{local_http}", f"127.0.0.1:{other}", f"{hosts.public}:80"]
    confined = probe(tmp_path, targets, config.tool_policy(["browser"]))
    assert confined[f"127.0.0.1:{local_http}"].startswith("ok hello from 127.0.0.1")
    assert confined[f"127.0.0.1:{other}"].startswith("refused"), confined
    assert confined[f"{hosts.public}:80"].startswith("refused"), confined
    # A run without it reaches the public host: the refusal above is the confinement.
    open_run = probe(tmp_path, targets, config.tool_policy([]))
    assert open_run[f"{hosts.public}:80"] == f"ok hello from {hosts.public}"


def test_it_resolves_names_through_the_configured_dns(tmp_path, hosts):
    tool = tmp_path / "dns"
    tool.mkdir()
    (tool / "index.py").write_text(
        "import socket\n"
        "def execute(tool_call_id, params, signal, on_update):\n"
        "    ip = socket.gethostbyname('public.egress.test')\n"
        "    return {'content': [{'type': 'text', 'text': ip}]}\n"
    )
    outcome = run(
        RunRequest(
            tool_dir=tool,
            language="python",
            entry="index.py",
            params={},
            tool_call_id="dns",
            env={},
            secrets={},
            egress=egress_policy.build("", dns=hosts.public),
        )
    )
    assert outcome.status == SUCCEEDED, outcome.result
    assert outcome.result["content"][0]["text"] == hosts.public


def test_it_gives_network_false_no_network_at_all(tmp_path, hosts):
    results = probe(tmp_path, [f"{hosts.public}:80"], egress_policy.build(""), network_on=False)
    assert results[f"{hosts.public}:80"].startswith("refused")


def test_it_filters_a_cold_bash_run_and_leaves_no_slirp_behind(tmp_path, hosts, local_http):
    tool = tmp_path / "sh"
    tool.mkdir()
    (tool / "index.sh").write_text(PROBE_SH)
    outcome = run(
        RunRequest(
            tool_dir=tool,
            language="bash",
            entry="index.sh",
            params={},
            tool_call_id="sh",
            env={"TARGETS": f"{hosts.public}:80 127.0.0.1:{local_http} {hosts.private}:80"},
            secrets={},
            egress=egress_policy.build(""),
        )
    )
    assert outcome.status == SUCCEEDED, outcome.result
    text = outcome.result["content"][0]["text"]
    assert f"{hosts.public}:80 ok" in text
    assert f"127.0.0.1:{local_http} refused" in text
    assert f"{hosts.private}:80 refused" in text
    assert "Public addresses: allowed" in outcome.network_policy
    assert support.slirp_children() == []


@pytest.mark.parametrize("language", ["bash", "python"])
def test_it_fails_closed_when_the_user_mode_network_cannot_start(tmp_path, monkeypatch, language):
    require(isolation_level()[0] != "bwrap", "egress filtering needs bubblewrap")
    require(network.missing() != [], f"missing: {network.missing()}")
    broken = {**network._executables(), "slirp4netns": "/bin/false"}
    monkeypatch.setattr(network, "_executables", lambda: broken)
    tool = tmp_path / "t"
    tool.mkdir()
    entry = {"bash": "index.sh", "python": "index.py"}[language]
    (tool / entry).write_text(
        "echo tool code ran\n"
        if language == "bash"
        else "def execute(tool_call_id, params, signal, on_update):\n"
        "    return {'content': [{'type': 'text', 'text': 'tool code ran'}]}\n"
    )
    outcome = run(
        RunRequest(
            tool_dir=tool,
            language=language,
            entry=entry,
            params={},
            tool_call_id="sh",
            env={},
            secrets={},
            egress=egress_policy.build(""),
        )
    )
    assert outcome.status == FAILED
    text = outcome.result["content"][0]["text"]
    assert "tool network setup failed: slirp4netns did not start" in text
    assert "tool code ran" not in text


PROBE_INPUTS = {"targets": {"type": "string", "description": "space-separated host:port"}}
PROBE_FROM_TEXT_PY = PROBE_PY.replace('params["targets"]', 'params["targets"].split()')


def test_it_records_the_policy_on_the_run_page_and_in_the_api(
    tmp_path, hosts, local_http, make_tool, developer_client
):
    """Through the console: a tool declaring `searxng` reaches its URL, another tool does
    not, and each run shows the policy it had."""
    from django.test import Client
    from django.urls import reverse

    from tests.support import integrations as integrations_support
    from tools_app.audit import Actor
    from tools_app.models import AgentToken
    from tools_app.runs import execute as run_execute
    from tools_app.runs import start

    integrations_support.create("searxng", values={"url": f"http://127.0.0.1:{local_http}"})
    target = f"127.0.0.1:{local_http}"
    declares = make_tool(
        "searcher",
        language="python",
        source=PROBE_FROM_TEXT_PY,
        inputs=PROBE_INPUTS,
        integrations=["searxng"],
    )
    other = make_tool("other", language="python", source=PROBE_FROM_TEXT_PY, inputs=PROBE_INPUTS)
    token, raw = AgentToken.issue("agent", ["tools:invoke"])
    done = {}
    for tool in (declares, other):
        run_row = start.start_run(
            tool.published_version,
            {"targets": f"{target} {hosts.public}:80"},
            actor=Actor(token=token),
            via="api",
            enqueue=False,
        )
        done[tool.name] = run_execute.execute_run(run_row.pk)
    searcher, plain = done["searcher"], done["other"]
    assert json.loads(searcher.result["content"][0]["text"])[target].startswith("ok hello")
    assert json.loads(plain.result["content"][0]["text"])[target].startswith("refused")
    assert f"- 127.0.0.1:{local_http} (integration searxng)" in searcher.network_policy
    assert "No exceptions." in plain.network_policy
    page = developer_client.get(reverse("run", args=[searcher.pk])).content.decode()
    assert f"127.0.0.1:{local_http} (integration searxng)" in page
    agent = Client(headers={"Authorization": f"Bearer {raw}"})
    api = agent.get(f"/api/v1/runs/{plain.pk}").json()
    assert api["network_policy"] == plain.network_policy


RESOLVE_PY = """
import socket

def execute(tool_call_id, params, signal, on_update):
    return {"content": [{"type": "text", "text": socket.gethostbyname("public.egress.test")}]}
"""
# Runs one tool with the default policy and prints its result: started in a mount namespace
# whose /etc/resolv.conf names a private resolver, as many hosts' do.
RUN_ONE = """
import json, sys
from pathlib import Path
from tools_app.egress import policy as egress_policy
from tools_app.runner import RunRequest, run
outcome = run(RunRequest(tool_dir=Path(sys.argv[1]), language="python", entry="index.py",
    params={}, tool_call_id="dns", env={}, secrets={}, egress=egress_policy.build("")))
print(json.dumps(outcome.result))
"""


def test_it_resolves_names_through_a_private_host_resolver_by_default(tmp_path, hosts):
    """Without CONSOLE_TOOL_DNS, DNS goes to slirp's 10.0.2.3, which asks the host's own
    resolver, even one on a private address that tools may not reach themselves."""
    import subprocess
    import sys

    tool = tmp_path / "dns"
    tool.mkdir()
    (tool / "index.py").write_text(RESOLVE_PY)
    resolv = tmp_path / "resolv.conf"
    resolv.write_text(f"nameserver {hosts.private}\n")
    script = 'mount --bind "$0" /etc/resolv.conf && exec "$@"'
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(resolv)]
        + [sys.executable, "-c", RUN_ONE, str(tool)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["content"][0]["text"] == hosts.public, result
