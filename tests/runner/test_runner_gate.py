"""The gate in front of a bwrap run (tools_app/runner/gate.py): nothing starts before the
runner says go, the protocol pipe ends up on fd 3 only, and a runner that dies before
saying go leaves no shell behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tools_app.runner.gate import Gate


def read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def started(tmp_path: Path, script: str, params: bytes = b"") -> tuple[Gate, subprocess.Popen]:
    stdin = os.memfd_create("params")
    os.write(stdin, params)
    out = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT, 0o600)
    gate = Gate()
    try:
        proc = gate.popen(
            ["/bin/sh", "-c", script],
            stdin=stdin,
            stdout=out,
            stderr=out,
            env={"PATH": "/usr/bin:/bin"},
            cwd=tmp_path,
        )
    finally:
        os.close(stdin)
        os.close(out)
    return gate, proc


def test_it_runs_the_command_after_go_with_its_stdin_stdout_and_protocol(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    gate, proc = started(
        tmp_path, f'touch {marker}; cat; echo "to the protocol" >&3', params=b"the params"
    )
    assert proc.poll() is None and not marker.exists()  # waits at the gate

    gate.open(proc, None, {"CORE": 0})

    assert proc.wait(10) == 0
    assert read_all(gate.protocol_r) == b"to the protocol\n"
    assert (tmp_path / "out").read_bytes() == b"the params"


def test_the_protocol_pipe_is_on_fd_3_only(tmp_path: Path) -> None:
    script = 'for fd in /proc/self/fd/*; do echo "${fd##*/} $(readlink $fd)"; done >&3'
    gate, proc = started(tmp_path, script)
    gate.open(proc, None, {})
    assert proc.wait(10) == 0
    listing = dict(line.split(" ", 1) for line in read_all(gate.protocol_r).decode().splitlines())
    protocol = listing["3"]
    assert protocol.startswith("pipe:")
    assert [fd for fd, target in listing.items() if target == protocol] == ["3"]


def test_a_runner_that_dies_before_go_leaves_no_shell(tmp_path: Path) -> None:
    gate, proc = started(tmp_path, "echo should not run >&3")
    gate.close()  # what the runner's death does to its end of the gate pipe
    assert proc.wait(10) == 125


LOW_FDS = """
import os, sys
sys.path.insert(0, sys.argv[1])
from tools_app.runner.gate import Gate

# The tool's stdin and stdout on fds 3 and 4, where the protocol must end up.
for fd in range(3, 10):
    try:
        os.close(fd)
    except OSError:
        pass
params = os.memfd_create("params")
out = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, 0o600)
assert (params, out) == (3, 4), (params, out)
os.write(params, b"params on fd 3")
gate = Gate()
proc = gate.popen(["/bin/sh", "-c", "cat; echo protocol >&3"], stdin=params, stdout=out,
                  stderr=2, env={"PATH": "/usr/bin:/bin"}, cwd="/")
os.close(params)
os.close(out)
gate.open(proc, None, {})
assert proc.wait(10) == 0
print(os.read(gate.protocol_r, 100).decode(), end="")
"""


def test_it_works_whatever_descriptors_it_is_given(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", LOW_FDS, str(repo), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "protocol\n", "")
    assert (tmp_path / "out").read_bytes() == b"params on fd 3"
