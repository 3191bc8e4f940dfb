"""The console host's own networks are private for the egress policy (tools_app/egress/policy.py
HostNetworks): every subnet of its interfaces and every gateway of its routes, unless
CONSOLE_TOOL_NETWORK_ALLOW names them. The "console host" is a network namespace of our
own (`lan` below) whose LAN is a second namespace holding a neighbour, the gateway and a
"public" host behind the gateway; the policy code, the console's HTTP client and a real
sandboxed tool run inside the first one (nsenter), where the kernel shows them
that namespace's interfaces and routes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.egress.test_egress_sandbox import PROBE_PY
from tests.support import egress as support
from tests.support import require
from tools_app.runner import isolation_level

REPO = Path(__file__).resolve().parents[2]
# The console host's address and subnet (documentation ranges, as the issue found them),
# its gateway outside that subnet, and a public host behind the gateway.
OWN, NEIGHBOUR = "192.0.2.1", "192.0.2.2"
GATEWAY, PUBLIC = "203.0.113.1", "198.51.100.7"
OWN6, NEIGHBOUR6, GATEWAY6 = "2001:db8:7::1", "2001:db8:7::2", "2001:db8:ffff::1"
TARGETS = [f"{NEIGHBOUR}:80", f"{GATEWAY}:80", f"{PUBLIC}:80"]

# Runs inside the console host's namespace: what the policy, the console's own client and
# a tool run make of each target. argv: the allow list, the tool's folder, the targets to
# judge and the targets to connect to (JSON).
INSIDE = """
import json, sys
from pathlib import Path
from tools_app.egress import policy as egress_policy
from tools_app.egress import client as http_client
from tools_app.runner import SUCCEEDED, RunRequest, run

allow, tool = sys.argv[1], Path(sys.argv[2])
judge, connect = json.loads(sys.argv[3]), json.loads(sys.argv[4])
policy = egress_policy.build(allow)
out = {"summary": policy.summary(), "decide": {}, "console": {}}
for host, port in judge:
    out["decide"][f"{host}:{port}"] = policy.decide(host, port).reason
for target in connect:
    try:
        result = http_client.request("GET", f"http://{target}/", policy=policy, timeout=5)
        out["console"][target] = "ok " + result.text()
    except http_client.HttpError as exc:
        out["console"][target] = f"refused {exc}"
outcome = run(RunRequest(tool_dir=tool, language="python", entry="index.py",
    params={"targets": connect}, tool_call_id="lan", env={}, secrets={}, network=True,
    egress=policy, work_root=tool.parent / "runs" / "r"))
assert outcome.status == SUCCEEDED, outcome.result
out["tool"] = json.loads(outcome.result["content"][0]["text"])
print(json.dumps(out))
"""


@dataclass
class Lan:
    prefix: list[str]  # runs a command in the console host's namespace


@pytest.fixture(scope="module")
def lan() -> Iterator[Lan]:
    require(os.geteuid() != 0, "these tests create network namespaces: they need root")
    require(isolation_level()[0] != "bwrap", "a tool run's egress filter needs bubblewrap")
    with support.net_namespace() as host, support.net_namespace() as other:
        server = None

        def ip(prefix: list[str], *args: str) -> None:
            subprocess.run([*prefix, "ip", *args], check=True, capture_output=True)

        try:
            ip(host, "link", "add", "a0", "type", "veth", "peer", "name", "b0")
            ip(host, "link", "set", "b0", "netns", support.holder_pid(other))
            for prefix, dev in ((host, "a0"), (other, "b0")):
                ip(prefix, "link", "set", "lo", "up")
                ip(prefix, "link", "set", dev, "up")
            ip(host, "addr", "add", f"{OWN}/24", "dev", "a0")
            ip(host, "-6", "addr", "add", f"{OWN6}/64", "dev", "a0", "nodad")
            ip(host, "route", "add", "default", "via", GATEWAY, "dev", "a0", "onlink")
            ip(host, "-6", "route", "add", "default", "via", GATEWAY6, "dev", "a0", "onlink")
            for address in (f"{NEIGHBOUR}/24", f"{GATEWAY}/32", f"{PUBLIC}/32"):
                ip(other, "addr", "add", address, "dev", "b0")
            ip(other, "-6", "addr", "add", f"{NEIGHBOUR6}/64", "dev", "b0", "nodad")
            # One HTTP server on port 80 of every address of the LAN namespace.
            server = subprocess.Popen(
                [*other, *support.serve_command(PUBLIC)], stdin=subprocess.DEVNULL, cwd=REPO
            )
            deadline = time.monotonic() + 10
            while True:
                probe = subprocess.run(
                    [*host, "bash", "-c", f"exec 3<>/dev/tcp/{PUBLIC}/80"], capture_output=True
                )
                if probe.returncode == 0:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("the LAN's test server did not start")
                time.sleep(0.1)
            yield Lan(host)
        finally:
            if server is not None:
                server.kill()
                server.wait()


def inside(lan: Lan, tmp_path: Path, allow: str = "") -> dict:
    """The policy's reasons, the console client's and a tool run's results, from inside
    the console host's namespace."""
    tool = tmp_path / "probe"
    tool.mkdir(exist_ok=True)
    (tool / "index.py").write_text(PROBE_PY)
    judge = [[h, 80] for h in (NEIGHBOUR, GATEWAY, PUBLIC, NEIGHBOUR6, GATEWAY6, OWN)]
    done = subprocess.run(
        [*lan.prefix, sys.executable, "-c", INSIDE, allow, str(tool)]
        + [json.dumps(judge), json.dumps(TARGETS)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_it_judges_the_hosts_subnet_and_gateways_private_and_what_lies_beyond_public(lan, tmp_path):
    decide = inside(lan, tmp_path)["decide"]
    assert decide[f"{NEIGHBOUR}:80"] == (
        f"{NEIGHBOUR} is in the console host's own subnet 192.0.2.0/24"
    )
    assert decide[f"{GATEWAY}:80"] == f"{GATEWAY} is a gateway of the console's host"
    assert decide[f"{NEIGHBOUR6}:80"] == (
        f"{NEIGHBOUR6} is in the console host's own subnet 2001:db8:7::/64"
    )
    assert decide[f"{GATEWAY6}:80"] == f"{GATEWAY6} is a gateway of the console's host"
    assert decide[f"{OWN}:80"] == f"{OWN} is an address of the console's own host"
    assert decide[f"{PUBLIC}:80"] == "a public address"


def test_it_keeps_the_consoles_own_requests_and_a_tools_run_off_the_hosts_lan(lan, tmp_path):
    """The console's client (connection tests, http tools, OpenAPI fetches) and a real
    sandboxed run: the neighbour and the gateway answer on port 80, yet neither is
    reached, while the public host behind the gateway is."""
    seen = inside(lan, tmp_path)
    console, tool = seen["console"], seen["tool"]
    assert console[f"{PUBLIC}:80"] == f"ok hello from {PUBLIC}"
    assert tool[f"{PUBLIC}:80"] == f"ok hello from {PUBLIC}"
    for target in (f"{NEIGHBOUR}:80", f"{GATEWAY}:80"):
        assert console[target].startswith("refused ") and "egress policy" in console[target]
        assert tool[target].startswith("refused"), tool
    assert "subnets (192.0.2.0/24, 2001:db8:7::/64)" in seen["summary"]
    assert f"gateways ({GATEWAY}, {GATEWAY6})" in seen["summary"]


def test_it_lets_console_tool_network_allow_name_a_neighbour_or_the_gateway(lan, tmp_path):
    seen = inside(lan, tmp_path, allow=f"{NEIGHBOUR}:80,{GATEWAY}/32")
    for target in (f"{NEIGHBOUR}:80", f"{GATEWAY}:80"):
        assert seen["decide"][target].startswith("allowed by CONSOLE_TOOL_NETWORK_ALLOW")
        assert seen["console"][target].startswith("ok hello from")
        assert seen["tool"][target].startswith("ok hello from"), seen["tool"]
