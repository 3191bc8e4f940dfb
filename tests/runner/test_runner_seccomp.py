"""The seccomp filter's io_uring and socket-family rules (runner/seccomp.py), attacked from
inside a real sandbox: io_uring is refused with EPERM, socket() and socketpair() of any
family but AF_UNIX, AF_INET, AF_INET6 and netlink's NETLINK_ROUTE with EAFNOSUPPORT, and
tools that use the allowed ones (Node's DNS lookup and network interfaces included) still
work. The older system-call denials are in test_runner_privilege.py."""

from __future__ import annotations

import json
import os
import textwrap
import uuid
from pathlib import Path

import pytest

from tests.support import prerequisite, require, unprivileged
from tools_app.runner import SUCCEEDED, Limits, RunOutcome, RunRequest, isolation_level, run

FAST = Limits(timeout=30, grace_seconds=1)
ENTRY = {"python": "index.py", "javascript": "index.js", "typescript": "index.ts"}

# Each attempt: "ok" or the errno's name.
ATTEMPTS_PY = """
    import ctypes, errno, json, socket

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long

    def call(nr, *args):
        result = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
        return "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]

    def open_socket(family, kind, proto=0):
        try:
            socket.socket(family, kind, proto).close()
            return "ok"
        except OSError as exc:
            return errno.errorcode[exc.errno]

    def open_pair(family, kind):
        try:
            for end in socket.socketpair(family, kind):
                end.close()
            return "ok"
        except OSError as exc:
            return errno.errorcode[exc.errno]

    def execute(tool_call_id, params, signal, on_update):
        params_buf = ctypes.create_string_buffer(120)  # struct io_uring_params
        report = {
            "io_uring_setup": call(425, 1, ctypes.addressof(params_buf)),
            "io_uring_enter": call(426, -1, 0, 0, 0, 0, 0),
            "io_uring_register": call(427, -1, 0, 0, 0),
            "vsock": open_socket(40, socket.SOCK_STREAM),  # AF_VSOCK
            "packet": open_socket(17, socket.SOCK_RAW),  # AF_PACKET: EPERM unfiltered
            "alg": open_socket(38, socket.SOCK_SEQPACKET),  # AF_ALG
            "xdp": open_socket(44, socket.SOCK_RAW),  # AF_XDP
            "unspec": open_socket(0, socket.SOCK_STREAM),
            "netlink_netfilter": open_socket(16, socket.SOCK_RAW, 12),
            "netlink_uevent": open_socket(16, socket.SOCK_DGRAM, 15),
            "netlink_audit": open_socket(16, socket.SOCK_RAW, 9),
            # An allowed family with high bits set: the kernel would truncate it to AF_INET.
            "inet_high_bits": call(41, (1 << 32) | 2, 1, 0),
            "vsock_pair": open_pair(40, socket.SOCK_STREAM),
            # Still allowed:
            "unix": open_socket(socket.AF_UNIX, socket.SOCK_STREAM),
            "inet_tcp": open_socket(socket.AF_INET, socket.SOCK_STREAM),
            "inet_udp": open_socket(socket.AF_INET, socket.SOCK_DGRAM),
            "inet6": open_socket(socket.AF_INET6, socket.SOCK_STREAM),
            "netlink_route": open_socket(16, socket.SOCK_RAW, 0),
            "unix_pair": open_pair(socket.AF_UNIX, socket.SOCK_STREAM),
            "interfaces": [name for _, name in socket.if_nameindex()],
            "localhost": sorted({a[4][0] for a in socket.getaddrinfo("localhost", 80)}),
        }
        return {"content": [{"type": "text", "text": json.dumps(report)}]}
    """
REFUSED = {
    "io_uring_setup": "EPERM",
    "io_uring_enter": "EPERM",
    "io_uring_register": "EPERM",
    "vsock": "EAFNOSUPPORT",
    "packet": "EAFNOSUPPORT",
    "alg": "EAFNOSUPPORT",
    "xdp": "EAFNOSUPPORT",
    "unspec": "EAFNOSUPPORT",
    "netlink_netfilter": "EAFNOSUPPORT",
    "netlink_uevent": "EAFNOSUPPORT",
    "netlink_audit": "EAFNOSUPPORT",
    "inet_high_bits": "EAFNOSUPPORT",
    "vsock_pair": "EAFNOSUPPORT",
}
ALLOWED = ("unix", "inet_tcp", "inet_udp", "inet6", "netlink_route", "unix_pair")

# Node over the allowed families: a TCP round trip on loopback, a DNS lookup with
# ADDRCONFIG (glibc asks netlink which families the host has) and the interface list.
NODE_JS = """
    const net = require("node:net");
    const os = require("node:os");
    const dns = require("node:dns/promises");
    const fs = require("node:fs/promises");

    async function execute() {
      const server = net.createServer((sock) => sock.end("pong"));
      await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
      const answer = await new Promise((ok, fail) => {
        const sock = net.connect(server.address().port, "127.0.0.1");
        let data = "";
        sock.on("data", (chunk) => (data += chunk));
        sock.on("end", () => ok(data));
        sock.on("error", fail);
      });
      server.close();
      const looked = await dns.lookup("localhost", { hints: dns.ADDRCONFIG, all: true });
      await fs.writeFile(`${process.env.HOME}/f`, "x");  // libuv file I/O without io_uring
      const read = await fs.readFile(`${process.env.HOME}/f`, "utf8");
      const text = JSON.stringify({
        answer, read, looked: looked.length > 0, interfaces: Object.keys(os.networkInterfaces()),
      });
      return { content: [{ type: "text", text }] };
    }
    module.exports = { execute };
    """


def make_tool(tmp_path: Path, language: str, source: str) -> Path:
    folder = tmp_path / "tools" / uuid.uuid4().hex[:8]
    folder.mkdir(parents=True)
    (folder / ENTRY[language]).write_text(textwrap.dedent(source))
    return folder


def run_tool(tmp_path: Path, language: str, source: str, *, network: bool = False) -> RunOutcome:
    require(isolation_level()[0] != "bwrap", "the seccomp filter needs bubblewrap")
    request = RunRequest(
        tool_dir=make_tool(tmp_path, language, source),
        language=language,
        entry=ENTRY[language],
        params={},
        tool_call_id="c",
        env={},
        secrets={},
        limits=FAST,
        work_root=tmp_path / "runs" / uuid.uuid4().hex[:8],
        network=network,
    )
    return run(request)


def report_of(outcome: RunOutcome) -> dict:
    assert outcome.status == SUCCEEDED, outcome
    return json.loads(outcome.result["content"][0]["text"])


@prerequisite(os.uname().machine != "x86_64", "system call numbers of x86-64")
@pytest.mark.parametrize("network", [False, True], ids=["no-network", "network"])
def test_it_refuses_io_uring_and_other_socket_families(tmp_path: Path, network: bool) -> None:
    report = report_of(run_tool(tmp_path, "python", ATTEMPTS_PY, network=network))

    assert {name: report[name] for name in REFUSED} == REFUSED
    assert {name: report[name] for name in ALLOWED} == dict.fromkeys(ALLOWED, "ok")
    assert "lo" in report["interfaces"]  # if_nameindex reads them over NETLINK_ROUTE
    assert "127.0.0.1" in report["localhost"]


def test_node_tools_work_over_the_allowed_families(tmp_path: Path) -> None:
    report = report_of(run_tool(tmp_path, "javascript", NODE_JS))

    assert report == {"answer": "pong", "read": "x", "looked": True, "interfaces": ["lo"]}


@unprivileged.when_root
def test_the_rules_hold_for_an_unprivileged_worker(tmp_path: Path) -> None:
    assert os.geteuid() != 0  # as root, this runs in a child as uid 65534
    if os.uname().machine == "x86_64":
        test_it_refuses_io_uring_and_other_socket_families(tmp_path, False)
    test_node_tools_work_over_the_allowed_families(tmp_path)
