"""A worker that is not root: each run gets a user namespace of its own holding its disk
quota (a tmpfs in its own mount namespace) and, for `network: true`, its own network
namespace behind slirp4netns and the egress rules (runner/sandbox.py, quota.py,
network.py). IPv6 is not routed for any worker: it fails at once and reaches nothing of the
host.

When the suite runs as root, the tests marked `when_root` run in a child pytest as uid
65534 (tests/support/unprivileged.py); the test hosts (tests/support/egress.py, which needs root)
are made by the parent and named to the child in the environment."""

from __future__ import annotations

import errno
import json
import os
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import egress as support
from tests.support import require, unprivileged
from tools_app.egress import policy as egress_policy
from tools_app.runner import (
    FAILED,
    SUCCEEDED,
    Limits,
    RunRequest,
    isolation_level,
    run,
    sandbox,
    standby,
    teardown,
)
from tools_app.runner import network as tool_network

PUBLIC, PRIVATE, HOST = "EGRESS_TEST_PUBLIC", "EGRESS_TEST_PRIVATE", "EGRESS_TEST_HOST_PUBLIC"

# Connects to each "host:port" of params.targets: "ok <answer>" or "refused <errno name>".
PROBE_PY = textwrap.dedent(
    """
    import errno, socket

    def probe(target):
        host, port = target.rsplit(":", 1)
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=5) as sock:
                sock.sendall(b"GET / HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n")
                data = b""
                while chunk := sock.recv(4096):
                    data += chunk
            return "ok " + data.decode(errors="replace").split("\\r\\n\\r\\n", 1)[-1][:80]
        except TimeoutError:
            return "timeout"
        except OSError as exc:
            return f"refused {errno.errorcode.get(exc.errno, exc.errno)}"

    def execute(tool_call_id, params, signal, on_update):
        results = {t: probe(t) for t in params["targets"]}
        return {"content": [{"type": "text", "text": __import__("json").dumps(results)}]}
    """
)
# From bash (a cold start through the gate): tries to change the rules first, then connects.
TAMPER_SH = textwrap.dedent(
    """
    PATH="$PATH:/usr/sbin:/sbin" nft flush ruleset 2>/dev/null && echo "flushed"
    echo 0 > /proc/sys/net/ipv4/conf/all/route_localnet 2>/dev/null && echo "sysctl written"
    for target in $TARGETS; do
      if timeout 5 bash -c "exec 3<>/dev/tcp/${target%:*}/${target##*:}" 2>/dev/null
      then echo "$target ok"; else echo "$target refused"; fi
    done
    """
)


@pytest.fixture(scope="module")
def hosts() -> Iterator[dict[str, str]]:
    """The test hosts: made here when root (the child reads them from the environment)."""
    require(isolation_level()[0] != "bwrap", "egress filtering needs bubblewrap")
    if os.geteuid() != 0:
        require(PUBLIC not in os.environ, "the test hosts need a root parent")
        yield {name: os.environ[name] for name in (PUBLIC, PRIVATE, HOST)}
        return
    with support.test_hosts() as made:
        names = {PUBLIC: made.public, PRIVATE: made.private, HOST: made.host_public}
        os.environ.update(names)
        try:
            yield names
        finally:
            for name in names:
                os.environ.pop(name, None)


@pytest.fixture
def listening(stand_in) -> dict[str, int]:
    """HTTP servers on the host: one the policy allows, one standing in for the console,
    and one on the IPv6 loopback (as Redis listens on ::1 too)."""
    where = {"allowed": "127.0.0.1", "console": "127.0.0.1", "v6": "::1"}
    return {name: stand_in(support.hello, host=host).port for name, host in where.items()}


@pytest.fixture(autouse=True)
def no_spares_left() -> Iterator[None]:
    yield
    standby.discard_spare()


def run_tool(tmp_path: Path, language: str, source: str, **fields: Any):
    folder = tmp_path / "tools" / uuid.uuid4().hex[:8]
    folder.mkdir(parents=True)
    entry = {"bash": "index.sh", "python": "index.py"}[language]
    (folder / entry).write_text(source)
    return run(
        RunRequest(
            tool_dir=folder,
            language=language,
            entry=entry,
            params=fields.pop("params", {}),
            tool_call_id=f"call-{uuid.uuid4().hex[:8]}",
            env=fields.pop("env", {}),
            secrets={},
            work_root=tmp_path / "runs" / uuid.uuid4().hex[:8],
            **fields,
        )
    )


def probe(tmp_path: Path, targets: list[str], policy: egress_policy.Policy) -> dict[str, str]:
    outcome = run_tool(tmp_path, "python", PROBE_PY, params={"targets": targets}, egress=policy)
    assert outcome.status == SUCCEEDED, outcome.result
    return json.loads(outcome.result["content"][0]["text"])


@unprivileged.when_root
@pytest.mark.parametrize("spare", [False, True], ids=["cold", "spare"])
def test_it_filters_a_non_root_workers_egress(
    tmp_path: Path,
    hosts: dict[str, str],
    listening: dict[str, int],
    spare: bool,
    monkeypatch: pytest.MonkeyPatch,
    stand_in,
) -> None:
    assert os.geteuid() != 0  # as root, this runs in a child as uid 65534
    monkeypatch.setenv("TOOL_CONSOLE_SPARE_SANDBOXES", "on" if spare else "off")
    assert sandbox.rootless(), sandbox.rootless_problem()
    console = stand_in(support.hello, host="0.0.0.0")  # noqa: S104 - the console on every address
    allowed = f"127.0.0.1:{listening['allowed']}"
    policy = egress_policy.build(allowed)
    targets = [
        f"{hosts[PUBLIC]}:80",
        allowed,
        "127.0.0.1:6379",  # Redis
        "127.0.0.1:5432",  # PostgreSQL
        f"127.0.0.1:{listening['console']}",
        f"{hosts[HOST]}:{console.port}",  # the console's host, on its own (public) address
        f"10.0.2.2:{listening['console']}",  # slirp's alias of the host's loopback
        f"{hosts[PRIVATE]}:80",
        "169.254.169.254:80",
    ]
    if spare:
        probe(tmp_path, [], policy)  # the next run of this shape gets a spare
    results = probe(tmp_path, targets, policy)
    assert results.pop(f"{hosts[PUBLIC]}:80") == f"ok hello from {hosts[PUBLIC]}"
    assert results.pop(allowed) == "ok hello from 127.0.0.1"
    assert all(result.startswith("refused") for result in results.values()), results


@unprivileged.when_root
def test_a_non_root_tool_cannot_change_its_egress_rules(
    tmp_path: Path, hosts: dict[str, str], listening: dict[str, int]
) -> None:
    assert os.geteuid() != 0
    targets = f"{hosts[PUBLIC]}:80 {hosts[PRIVATE]}:80 127.0.0.1:{listening['allowed']}"
    outcome = run_tool(
        tmp_path,
        "bash",
        TAMPER_SH,
        env={"TARGETS": targets},
        egress=egress_policy.build(f"127.0.0.1:{listening['allowed']}"),
    )
    assert outcome.status == SUCCEEDED, outcome.result
    text = outcome.result["content"][0]["text"]
    assert "flushed" not in text
    assert "sysctl written" not in text
    assert f"{hosts[PUBLIC]}:80 ok" in text
    assert f"127.0.0.1:{listening['allowed']} ok" in text
    assert f"{hosts[PRIVATE]}:80 refused" in text
    assert "IPv6: not routed" in outcome.network_policy
    assert support.slirp_children() == []


def check_ipv6(tmp_path: Path, listening: dict[str, int]) -> None:
    """IPv6 fails at once (not a hang): the host's IPv6 loopback and its own IPv6
    addresses, mapped and NAT64 forms of its IPv4 loopback and a public address alike."""
    v6_own = [
        str(ip) for ip in egress_policy.own_addresses() if ip.version == 6 and not ip.is_link_local
    ]
    targets = [
        f"[::1]:{listening['v6']}",
        "[::1]:6379",  # Redis listens on ::1 here
        f"[::ffff:127.0.0.1]:{listening['allowed']}",
        f"[64:ff9b::7f00:1]:{listening['allowed']}",
        "[2001:db8::1]:80",  # public (documentation) address: not routed
        *[f"[{ip}]:{listening['v6']}" for ip in v6_own],
    ]
    results = probe(tmp_path, targets, egress_policy.build(""))
    # A hang would read "timeout".
    assert all(result.startswith("refused") for result in results.values()), results
    assert results["[2001:db8::1]:80"] == f"refused {errno.errorcode[errno.ENETUNREACH]}"


def test_a_tools_ipv6_fails_at_once_and_reaches_nothing_of_the_host(
    tmp_path: Path, listening: dict[str, int]
) -> None:
    require(isolation_level()[0] != "bwrap", "egress filtering needs bubblewrap")
    require(tool_network.missing() != [], f"missing: {tool_network.missing()}")
    require(os.geteuid() != 0, "the root worker's case needs root (the next test is the other)")
    check_ipv6(tmp_path, listening)


@unprivileged.when_root
def test_a_non_root_tools_ipv6_fails_at_once_and_reaches_nothing_of_the_host(
    tmp_path: Path, listening: dict[str, int]
) -> None:
    assert os.geteuid() != 0
    check_ipv6(tmp_path, listening)


QUOTA = Limits(timeout=60, grace_seconds=1, disk_mb=32)
HOGS = {
    "bash-2GiB": ("bash", 'dd if=/dev/zero of="$HOME/big" bs=1M count=2048 2>&1\necho survived'),
    # Within the old per-file cap (RLIMIT_FSIZE), 36 MiB in all.
    "bash-spread": (
        "bash",
        'for dir in "$HOME" /tmp "$TOOL_OUTPUT_DIR"; do\n'
        '  head -c 12M /dev/zero > "$dir/part" || exit 0\n'
        "done\necho survived\n",
    ),
    "python-spare": (
        "python",
        textwrap.dedent(
            """
            def execute(tool_call_id, params, signal, on_update):
                chunk = b"x" * (1 << 20)
                for path in ("/home/tool/a", "/tmp/b"):
                    try:
                        with open(path, "wb") as f:
                            for _ in range(20):
                                f.write(chunk)
                    except OSError as exc:
                        return {"content": [{"type": "text", "text": f"caught {exc}"}]}
                return {"content": [{"type": "text", "text": "survived"}]}
            """
        ),
    ),
}


class HostDiskWatch:
    """The most bytes the run's directories on the host held while the run went on (not
    counting the artifacts copied out at its end)."""

    def __init__(self, under: Path) -> None:
        self.under = under
        self.most = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop.is_set():
            used = 0
            for root, dirs, names in os.walk(self.under):
                dirs[:] = [name for name in dirs if name != "artifacts"]
                for name in names:
                    try:
                        used += os.lstat(os.path.join(root, name)).st_blocks * 512
                    except OSError:
                        continue
            self.most = max(self.most, used)
            time.sleep(0.005)

    def __enter__(self) -> HostDiskWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


@unprivileged.when_root
@pytest.mark.parametrize("case", sorted(HOGS))
def test_a_non_root_workers_run_stops_at_the_disk_quota(
    tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert os.geteuid() != 0
    monkeypatch.setenv("TOOL_CONSOLE_SPARE_SANDBOXES", "on")
    require(isolation_level()[0] != "bwrap", "the quota needs bubblewrap")
    language, source = HOGS[case]
    if case == "python-spare":
        ok = "def execute(tool_call_id, params, signal, on_update):\n    return {'content': []}\n"
        assert run_tool(tmp_path, language, ok, limits=QUOTA).status == SUCCEEDED
    runs = tmp_path / "runs"
    with HostDiskWatch(runs) as watch:
        outcome = run_tool(tmp_path, language, source, limits=QUOTA)
    assert outcome.status == FAILED, outcome.result
    text = outcome.result["content"][0]["text"]
    assert text.startswith("The tool wrote more than 32 MiB (the run's disk quota) and was stopped")
    assert case != "python-spare" or outcome.spare
    assert watch.most < 1 << 20  # the host's disk never held the tool's writes
    standby.discard_spare()
    teardown.drain()
    assert list(runs.rglob("disk")) == []  # the quota's mount point went with the run


@unprivileged.when_root
@pytest.mark.parametrize("spare", [False, True], ids=["cold", "spare"])
def test_a_non_root_workers_artifacts_come_out_of_the_quota(
    tmp_path: Path, spare: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert os.geteuid() != 0
    monkeypatch.setenv("TOOL_CONSOLE_SPARE_SANDBOXES", "on" if spare else "off")
    require(isolation_level()[0] != "bwrap", "the quota needs bubblewrap")
    source = textwrap.dedent(
        """
        def execute(tool_call_id, params, signal, on_update):
            with open(params["output_path"], "w") as f:
                f.write("the report")
            return {"content": [{"type": "text", "text": "wrote"}]}
        """
    )
    if spare:
        ok = "def execute(tool_call_id, params, signal, on_update):\n    return {'content': []}\n"
        run_tool(tmp_path, "python", ok)
    outcome = run_tool(tmp_path, "python", source, params={"output_path": "deep/er/report.txt"})
    assert outcome.status == SUCCEEDED, outcome.result
    assert outcome.spare == spare
    [artifact] = outcome.artifacts
    assert artifact.name == "deep/er/report.txt"
    assert artifact.path.read_text() == "the report"


READ_INPUT = {
    "python": textwrap.dedent(
        """
        def execute(tool_call_id, params, signal, on_update):
            with open(params["doc"]) as f:
                text = f.read()
            return {"content": [{"type": "text", "text": params["doc"] + "|" + text}]}
        """
    ),
    "bash": 'printf "%s|" "$INPUT_DOC"; cat "$INPUT_DOC"\n',
}


@unprivileged.when_root
@pytest.mark.parametrize(
    "language,start",
    [
        ("python", "gated"),  # spares off: the gate's cold start
        ("python", "cold"),  # spares on, none yet: a standby sandbox started for the run
        ("python", "spare"),
        ("bash", "gated"),
    ],
)
def test_a_non_root_workers_tool_reads_its_input_files(
    tmp_path: Path, language: str, start: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `file` input of a rootless run lands inside the run's quota tmpfs (which only the
    run's namespaces see), not under its mount point on the host."""
    assert os.geteuid() != 0
    require(isolation_level()[0] != "bwrap", "the quota needs bubblewrap")
    monkeypatch.setenv("TOOL_CONSOLE_SPARE_SANDBOXES", "off" if start == "gated" else "on")
    if start == "spare":
        ok = "def execute(tool_call_id, params, signal, on_update):\n    return {'content': []}\n"
        assert run_tool(tmp_path, "python", ok).status == SUCCEEDED
    outcome = run_tool(
        tmp_path,
        language,
        READ_INPUT[language],
        params={"doc": "inputs/doc/notes.txt"},
        input_files={"inputs/doc/notes.txt": b"first line\nsecond line\n"},
        file_params=("doc",),
    )
    assert outcome.status == SUCCEEDED, (outcome.result, outcome.stderr_tail)
    assert outcome.spare == (start == "spare")
    path, text = outcome.result["content"][0]["text"].split("|", 1)
    assert path.endswith("/inputs/doc/notes.txt")
    assert text == "first line\nsecond line\n"
