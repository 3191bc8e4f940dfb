"""Test hosts for the egress tests: a network namespace of our own, joined to the host by
a veth pair, with a "public" address (documentation range) and a private one (10.x), an
HTTP server answering on both and a DNS server answering every A query with the public
address. Addresses are random per fixture so parallel test runs do not clash. Run as a
script (inside the namespace) it is those servers."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support import REPO
from tests.support.stand_in import Reply, Request, StandIn


@dataclass
class EgressHosts:
    public: str  # in 198.51.100.0/24 or 203.0.113.0/24 (documentation, "public")
    private: str  # in 10.0.0.0/8
    netns: str  # where the test hosts live (the PID holding the namespace)
    host_public: str  # the host's own end of the link: an address of the console's host

    @property
    def netns_path(self) -> str:
        """The namespace as a file: StandIn(netns=...) serves this process's answers there."""
        return f"/proc/{self.netns.removeprefix('pid ')}/ns/net"


def _ready(address: str, port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((address, port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"test server {address}:{port} did not start")


@contextlib.contextmanager
def net_namespace() -> Iterator[list[str]]:
    """A new network namespace, held by a sleeping process rather than named under
    /run/netns: named ones were seen to vanish here while other checkouts' tests ran
    (their bind mounts lost; `ip -n` then fails). Yields the command prefix that runs a
    program inside it (nsenter); holder_pid(prefix) is for `ip link set DEV netns PID`."""
    holder = subprocess.Popen(["unshare", "--net", "--", "sleep", "infinity"])
    try:
        own = os.stat("/proc/self/ns/net").st_ino
        deadline = time.monotonic() + 10
        while os.stat(f"/proc/{holder.pid}/ns/net").st_ino == own:  # not unshared yet
            if time.monotonic() > deadline:
                raise RuntimeError("the test network namespace was not made")
            time.sleep(0.005)
        yield ["nsenter", f"--net=/proc/{holder.pid}/ns/net", "--"]
    finally:
        holder.kill()
        holder.wait()


def holder_pid(prefix: list[str]) -> str:
    return prefix[1].removeprefix("--net=/proc/").removesuffix("/ns/net")


@contextlib.contextmanager
def test_hosts() -> Iterator[EgressHosts]:
    from tests.support import require

    require(os.geteuid() != 0, "egress tests create network namespaces: they need root")
    for tool in ("ip", "slirp4netns", "nft", "nsenter", "unshare"):
        require(
            subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode != 0,
            f"{tool} is missing (apt-get install iproute2 slirp4netns nftables)",
        )
    tag = uuid.uuid4().hex[:8]
    host_if, ns_if = f"egh{tag}", f"egn{tag}"
    block = random.randrange(1, 63)
    public_net = random.choice(["198.51.100.0", "203.0.113.0"])
    pub = ipaddress.ip_address(public_net) + 4 * block
    priv = ipaddress.ip_address(f"10.213.{random.randrange(256)}.0") + 4 * block
    server = None
    with net_namespace() as inside:
        ip_in = [*inside, "ip"]
        commands = [
            ["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if],
            ["ip", "link", "set", ns_if, "netns", holder_pid(inside)],
            # The "public" host is no neighbour in the host's own subnet (the policy
            # refuses those): /32 addresses at both ends, joined by a route.
            ["ip", "addr", "add", f"{pub + 1}/32", "dev", host_if],
            ["ip", "addr", "add", f"{priv + 1}/30", "dev", host_if],
            ["ip", "link", "set", host_if, "up"],
            ["ip", "route", "replace", f"{pub + 2}/32", "dev", host_if],
            [*ip_in, "addr", "add", f"{pub + 2}/32", "dev", ns_if],
            [*ip_in, "addr", "add", f"{priv + 2}/30", "dev", ns_if],
            [*ip_in, "link", "set", ns_if, "up"],
            [*ip_in, "link", "set", "lo", "up"],
            [*ip_in, "route", "replace", f"{pub + 1}/32", "dev", ns_if],
        ]
        try:
            for command in commands:
                subprocess.run(command, check=True, capture_output=True)
            server = subprocess.Popen(
                [*inside, *serve_command(str(pub + 2))], stdin=subprocess.DEVNULL, cwd=REPO
            )
            deadline = time.monotonic() + 10
            _ready(str(pub + 2), 80, deadline)
            yield EgressHosts(
                str(pub + 2), str(priv + 2), f"pid {holder_pid(inside)}", str(pub + 1)
            )
        finally:
            if server is not None:
                server.kill()
                server.wait()
            subprocess.run(["ip", "link", "del", host_if], capture_output=True)


def with_file_at(target: str, source: Path) -> list[str]:
    """The command prefix that runs a program in a mount namespace of its own where the
    file `target` (/etc/hosts, /etc/resolv.conf) is `source`: the program and the sandboxes
    it starts see it, nothing else on the host does. Needs root."""
    script = 'mount --bind "$0" "$1" && shift && exec "$@"'
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        str(source),
        target,
    ]


def hello(request: Request) -> Reply:
    """The answer of every test host: which of its addresses was reached (a stand_in
    answer for servers on the console's host too). Only GET is answered."""
    if request.method != "GET":
        return Reply(501, b"GET only")
    return Reply(200, f"hello from {request.local_address}".encode())


def _dns(answer: str) -> None:
    """Answers every query with one A record: `answer`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", 53))  # noqa: S104 - inside the test namespace only
    while True:
        data, peer = sock.recvfrom(512)
        if len(data) < 12:
            continue
        end = data.index(b"\0", 12) + 5  # the question: name, type, class
        header = data[:2] + struct.pack(">HHHHH", 0x8180, 1, 1, 0, 0)
        record = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton(answer)
        sock.sendto(header + data[12:end] + record, peer)


def serve_command(public: str) -> list[str]:
    """The command (run from REPO) of a test host's servers: HTTP on port 80 of every
    address, DNS answering `public` for every name."""
    return [sys.executable, "-m", "tests.support.egress", public]


def serve(public: str) -> None:
    threading.Thread(target=_dns, args=(public,), daemon=True).start()
    StandIn(hello, host="0.0.0.0", port=80).serve_forever()  # noqa: S104 - test netns


def slirp_children(settle: float = 5.0) -> list[int]:
    """slirp4netns processes this test process started that are still there once killed
    ones had `settle` seconds to be reaped (the runner reaps them on a thread)."""
    deadline = time.monotonic() + settle
    while (found := _slirp_children()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def _slirp_children() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if fields.get("Name", "").strip() == "slirp4netns" and int(fields["PPid"]) == os.getpid():
            found.append(int(entry.name))
    return found


if __name__ == "__main__":
    serve(sys.argv[1])
