"""The network of a `network: true` run: its own namespace, user-mode networking, and the
egress policy (tools_app/egress/policy.py) as nftables rules inside that namespace.

The gate shell (gate.py) is started by `unshare --net`, so the sandbox is born in a fresh,
empty network namespace owned by the host's initial user namespace. While the shell waits
for "go" (before any tool code exists in it), the runner, outside the sandbox and its
seccomp filter:

- pins the namespace (an fd on /proc/<pid>/ns/net, after checking it is not the runner's
  own: `unshare` may not have unshared yet when Popen returns);
- starts slirp4netns on it (tap0 10.0.2.100, gateway 10.0.2.2, DNS 10.0.2.3), with its own
  sandbox and seccomp filter, an exit fd (it ends when we close our end, or when the worker
  dies) and a ready fd; host loopback (10.0.2.2) only when the policy allows a loopback
  destination;
- writes the nftables rules with `nsenter --net`: an output chain with policy drop that
  accepts the sandbox's own loopback, DNS to the resolver, the allowed exceptions, refuses
  (TCP reset / ICMP admin-prohibited, so tools fail fast) every refused range and the
  console host's own addresses, subnets and gateways, and accepts the rest (public
  addresses), or refuses it too when an integration confines the run. Allowed
  127.0.0.1:port destinations are DNATed to 10.0.2.2:port (slirp's alias of the host's
  loopback), which needs route_localnet in this namespace.

A worker that is not root does the same in a user namespace of the run's own (see
sandbox.rootless()): the gate shell's namespaces are made by `unshare --user --map-root-user
--mount --net`, the runner enters that user namespace (it owns it) to write the rules
(`nsenter --user --net --preserve-credentials`: the worker's uid is that namespace's root)
and starts slirp4netns inside it (its sandbox needs a user namespace where it holds
CAP_SYS_ADMIN). bwrap makes a nested user namespace for the tool, which therefore holds no
capability over the network namespace either.

IPv6 is not routed: slirp4netns runs without --enable-ipv6, so tap0 has a link-local
address only and no IPv6 route; an IPv6 connect fails at once (network unreachable), and
the rules refuse the IPv6 loopback, ULA, link-local and IPv4-mapped ranges anyway.

The tool runs without capabilities in a namespace it does not own, so it cannot change the
rules; its only way out is slirp, and everything reaching slirp passed the filter. If any
step fails the run fails ("tool network setup failed"): it never falls back to the host's
network.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
import select
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tools_app.egress import policy as egress_policy

from . import sandbox

TAP = "tap0"
GATEWAY = "10.0.2.2"  # slirp: the host's 127.0.0.1 (unless --disable-host-loopback)
RESOLVER = "10.0.2.3"  # slirp: forwards DNS to the host's resolver
SLIRP_NET = "10.0.2.0/24"
SETUP_SECONDS = 10.0
RESOLV_CONF = Path(__file__).resolve().parent / "resolv.conf"  # nameserver 10.0.2.3 (slirp)
LOOPBACK4 = ipaddress.ip_network("127.0.0.0/8")
LOOPBACK_ALL = (LOOPBACK4, ipaddress.ip_network("::1/128"))
TOOLS = ("slirp4netns", "nft", "nsenter", "unshare", "ip")  # ip: egress_policy.own_addresses
UNFILTERED_NOT_ROOT = (
    "Unfiltered: the worker does not run as root and this host does not let it give the "
    "run a user namespace of its own, so the run shared the host's network (no egress "
    "policy). Run the worker as root, or allow unprivileged user namespaces, for filtered "
    "egress."
)
IPV6 = "IPv6: not routed (a tool's IPv6 connections fail at once: network unreachable)."
UNFILTERED_PROCESS = (
    "Unfiltered: plain-process isolation (no bubblewrap) shares the host's network; "
    "no egress policy applies."
)
NO_NETWORK = "No network: the run had its own empty network namespace (network: false)."


@functools.cache
def _executables() -> dict[str, str | None]:
    found = {}
    for name in TOOLS:
        path = shutil.which(name)
        if path is None:
            for folder in ("/usr/bin", "/usr/sbin", "/bin", "/sbin"):
                if os.access(f"{folder}/{name}", os.X_OK):
                    path = f"{folder}/{name}"
                    break
        found[name] = path
    return found


def missing() -> list[str]:
    """Programs filtered egress needs that are not installed."""
    return [name for name, path in _executables().items() if path is None]


def _exe(name: str) -> str:
    path = _executables()[name]
    if path is None:
        raise OSError(f"tool network setup failed: {name} is not installed")
    return path


@dataclass(frozen=True)
class Plan:
    """What a run's network will be: `policy` None means no filtering to set up (no
    network, or unfiltered); `error` means the run must fail before it starts."""

    policy: egress_policy.Policy | None
    summary: str
    error: str = ""


def plan(network: bool, isolation: str, policy: egress_policy.Policy | None) -> Plan:
    if not network:
        return Plan(None, NO_NETWORK)
    if isolation != "bwrap":
        return Plan(None, UNFILTERED_PROCESS)
    if os.geteuid() != 0 and not sandbox.rootless():
        return Plan(None, UNFILTERED_NOT_ROOT)
    if absent := missing():
        return Plan(
            None,
            "",
            "The tool's network could not be set up: "
            + ", ".join(absent)
            + " is not installed (Debian packages slirp4netns, nftables, util-linux, iproute2). "
            "Tools with network: true do not run without their egress filter.",
        )
    if policy is None:
        try:
            policy = egress_policy.from_environment()
        except egress_policy.PolicyError as exc:
            return Plan(None, "", f"The egress policy is invalid: {exc}")
    return Plan(policy, f"{policy.summary()}\n{IPV6}")


def gate_prefix(root: Path, disk_bytes: int, *, filtered: bool) -> list[str] | None:
    """Prepended to the gate shell's command: a root worker's filtered run starts in a new
    network namespace; a rootless run in its own user and mount namespaces with its disk
    quota (and network namespace when filtered). None: nothing to prepend."""
    if sandbox.rootless():
        return sandbox.rootless_prefix(root, disk_bytes, net=filtered)
    return [_exe("unshare"), "--net", "--"] if filtered else None


def _loopback_allows(policy: egress_policy.Policy) -> list[egress_policy.Allow]:
    return [a for a in policy.allows if a.network.version == 4 and a.network.overlaps(LOOPBACK4)]


def _elements(networks) -> str:
    return ", ".join(str(n) for n in networks)


def ruleset(policy: egress_policy.Policy) -> str:
    """The nftables rules for one run's namespace (see the module docstring)."""
    accept: list[str] = ['oif "lo" accept']
    nat: list[str] = []
    if policy.dns is None:
        accept.append(f"ip daddr {RESOLVER} meta l4proto {{ tcp, udp }} th dport 53 accept")
    else:
        family = "ip" if policy.dns.version == 4 else "ip6"
        accept.append(f"{family} daddr {policy.dns} meta l4proto {{ tcp, udp }} th dport 53 accept")
        if policy.dns.version == 4:
            nat.append(
                f"ip daddr {RESOLVER} meta l4proto {{ tcp, udp }} th dport 53 dnat to {policy.dns}"
            )
    others = []
    for allow in policy.allows:
        family = "ip" if allow.network.version == 4 else "ip6"
        port = f" meta l4proto {{ tcp, udp }} th dport {allow.port}" if allow.port else ""
        if allow.network.version == 4 and allow.network.overlaps(LOOPBACK4):
            # The host's loopback is slirp's 10.0.2.2 (127.0.0.1 only); the tool keeps
            # using the 127.0.0.1 URL it was given.
            accept.append(f"ip daddr {GATEWAY}{port} accept")
            nat.append(f"ip daddr {allow.network}{port} dnat to {GATEWAY}")
        else:
            others.append(f"{family} daddr {allow.network}{port} accept")
    # Nothing else of slirp's network, whatever an allowed CIDR (10.0.0.0/8) covers: its
    # gateway is the host's loopback.
    accept.append(f"ip daddr {SLIRP_NET} meta l4proto tcp reject with tcp reset")
    accept.append(f"ip daddr {SLIRP_NET} reject with icmpx type admin-prohibited")
    accept += others
    refused4 = [n for n, _ in egress_policy.REFUSED if n.version == 4]
    refused6 = [n for n, _ in egress_policy.REFUSED if n.version == 6]
    # The console host's own addresses, subnets and gateways (its LAN), after the allowed
    # exceptions above, so CONSOLE_TOOL_NETWORK_ALLOW can still name one of them.
    host = [
        *(ipaddress.ip_network(ip) for ip in (*policy.own, *policy.gateways)),
        *policy.subnets,
    ]
    refused4 += [n for n in host if n.version == 4]
    refused6 += [n for n in host if n.version == 6]
    refused6.append(ipaddress.ip_network("::ffff:0:0/96"))  # mapped: judged as IPv4 above
    refused6.append(egress_policy.NAT64)
    lines = ["table inet tool_egress {", "  chain output {"]
    lines.append("    type filter hook output priority 0; policy drop;")
    lines += [f"    {rule}" for rule in accept]
    for family, nets in (("ip", refused4), ("ip6", refused6)):
        refused = f"    {family} daddr {{ {_elements(nets)} }}"
        lines.append(f"{refused} meta l4proto tcp reject with tcp reset")
        lines.append(f"{refused} reject with icmpx type admin-prohibited")
    if policy.confined_by:  # public addresses too: the exceptions above are all there is
        lines.append("    meta l4proto tcp reject with tcp reset")
        lines.append("    reject with icmpx type admin-prohibited")
    else:
        lines.append("    accept")
    lines += ["  }", "}"]
    if nat:
        lines += ["table ip tool_egress_nat {", "  chain output {"]
        lines.append("    type nat hook output priority -100;")
        lines += [f"    {rule}" for rule in nat]
        lines += ["  }", "  chain postrouting {", "    type nat hook postrouting priority 100;"]
        lines += [f'    oifname "{TAP}" ip saddr 127.0.0.0/8 masquerade', "  }", "}"]
    return "\n".join(lines) + "\n"


def _pin_namespace(pid: int, deadline: float) -> int:
    """An fd on the run's network namespace, once it differs from ours."""
    own = os.stat("/proc/self/ns/net").st_ino
    while True:
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise OSError(f"tool network setup failed: the sandbox is gone ({exc})") from None
        if os.fstat(fd).st_ino != own:
            return fd
        os.close(fd)
        if time.monotonic() > deadline:
            raise OSError("tool network setup failed: the sandbox got no network namespace")
        time.sleep(0.0005)


class Network:
    """slirp4netns and the rules of one sandbox's namespace; close() ends slirp.

    attach() starts both (in parallel: nothing leaves the namespace before slirp gives it
    tap0, and no tool code runs before ready()), ready() waits for both. A bash run's gate
    opens after ready(); a standby harness may boot meanwhile (it runs no tool code until
    its run's message, which is written after ready())."""

    def __init__(self) -> None:
        self.slirp: subprocess.Popen[bytes] | None = None
        self.nft: subprocess.Popen[bytes] | None = None
        self.exit_w = self.ready_r = self.log = -1
        self.deadline = 0.0

    @classmethod
    def attach(cls, pid: int, policy: egress_policy.Policy, *, rootless: bool = False) -> Network:
        """Start setting up the namespace of the waiting gate shell `pid` (`rootless`: in
        the user namespace it owns, which must have its id maps written by now). Raises
        OSError (having cleaned up) if that fails at once."""
        net = cls()
        try:
            net._attach(pid, policy, rootless)
        except BaseException:
            net.close()
            raise
        return net

    def _attach(self, pid: int, policy: egress_policy.Policy, rootless: bool) -> None:
        self.deadline = time.monotonic() + SETUP_SECONDS
        ns = _pin_namespace(pid, self.deadline)
        userns = -1
        enter: list[str] = []  # what starts nft and slirp4netns in the run's user namespace
        if rootless:
            try:
                userns = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
            except OSError as exc:
                os.close(ns)
                raise OSError(f"tool network setup failed: the sandbox is gone ({exc})") from None
            enter = [_exe("nsenter"), f"--user=/proc/self/fd/{userns}", "--preserve-credentials"]
        ready_w = exit_r = -1
        self.log = os.memfd_create("slirp-log", os.MFD_CLOEXEC)
        try:
            self.ready_r, ready_w = os.pipe()
            exit_r, self.exit_w = os.pipe()
            nspath = f"/proc/self/fd/{ns}"
            load = [_exe("nft"), "-f", "-"]
            if _loopback_allows(policy):  # a shell only where it has something to do
                script = 'echo 1 >/proc/sys/net/ipv4/conf/all/route_localnet && exec "$@"'
                load = ["/bin/sh", "-c", script, "tool-net", *load]
            nsenter = enter or [_exe("nsenter")]
            self.nft = subprocess.Popen(
                [*nsenter, f"--net={nspath}", "--", *load],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                pass_fds=(ns, *([userns] if rootless else [])),
            )
            assert self.nft.stdin is not None
            self.nft.stdin.write(ruleset(policy).encode())  # a few KiB: fits the pipe
            self.nft.stdin.close()
            slirp = [*([*enter, "--"] if rootless else []), _exe("slirp4netns")]
            slirp += ["--configure", "--mtu=65520"]
            slirp += ["--enable-sandbox", "--enable-seccomp"]
            slirp += [f"--ready-fd={ready_w}", f"--exit-fd={exit_r}", "--netns-type=path"]
            if not _loopback_allows(policy):
                slirp.append("--disable-host-loopback")
            self.slirp = subprocess.Popen(
                [*slirp, nspath, TAP],
                stdin=subprocess.DEVNULL,
                stdout=self.log,
                stderr=self.log,
                pass_fds=(ready_w, exit_r, ns, *([userns] if rootless else [])),
                start_new_session=True,
            )
        finally:
            for fd in (ns, userns, ready_w, exit_r):
                if fd >= 0:
                    os.close(fd)

    def ready(self) -> None:
        """Wait until the rules hold and slirp is up. Raises OSError (having cleaned up)."""
        try:
            self._ready()
        except BaseException:
            self.close()
            raise

    def _ready(self) -> None:
        nft = self.nft
        if nft is not None:
            assert nft.stdout is not None
            try:
                nft.wait(max(0.0, self.deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise OSError("tool network setup failed: nft did not finish") from None
            out = nft.stdout.read()
            nft.stdout.close()
            self.nft = None
            if nft.returncode != 0:
                detail = out.decode(errors="replace").strip()[:500]
                raise OSError(f"tool network setup failed: nft refused the rules: {detail}")
        if self.ready_r >= 0:
            remaining = max(0.0, self.deadline - time.monotonic())
            up = select.select([self.ready_r], [], [], remaining)[0]
            if not up or os.read(self.ready_r, 1) != b"1":
                os.lseek(self.log, 0, os.SEEK_SET)
                detail = os.read(self.log, 2000).decode(errors="replace").strip()
                raise OSError(f"tool network setup failed: slirp4netns did not start: {detail}")
            os.close(self.ready_r)
            self.ready_r = -1

    def close_fd(self) -> None:
        """In a forked child: drop our copies (the parent's exit fd keeps slirp alive)."""
        for name in ("exit_w", "ready_r", "log"):
            fd = getattr(self, name)
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
                setattr(self, name, -1)

    def close(self) -> None:
        """Kill slirp (and nft, if still at work). A process leaving a network namespace
        with a tap device takes ~10-20 ms in the kernel, so it is reaped on a thread
        instead of making the run wait for it."""
        self.close_fd()
        for name in ("nft", "slirp"):
            proc = getattr(self, name)
            setattr(self, name, None)
            if proc is None:
                continue
            with contextlib.suppress(OSError):
                proc.kill()
            for stream in (proc.stdout, proc.stdin):
                if stream is not None:
                    stream.close()
            threading.Thread(target=proc.wait, name="reap-slirp", daemon=True).start()
