#!/usr/bin/env python3
"""CI's fresh-machine step: the README's two commands on a Debian root that has python3 and
nothing else, as a new user meets them.

It builds a minimal Debian root with debootstrap (minbase plus python3, python3-venv, git,
ca-certificates and curl; the tarball is cached under CACHE and rebuilt whenever it is
missing), unpacks a copy, and enters it as root through mount and PID namespaces of its own
with pivot_root (a chroot is not enough: the kernel refuses user namespaces inside one). The
network namespace is the host's, so the package registries and the host's Redis on
127.0.0.1 stay reachable. Into the root go the commit under test (a git bundle, cloned
there), the host's CA bundle with the variables that name it (SSL_CERT_FILE and friends) and
/etc/resolv.conf; nothing else from the host. Inside (see inside()):

1. `python3 dev.py up` until /healthz answers (seconds from its start are printed);
2. a seed tool (web_fetch) invoked through the agent API: it must succeed in bubblewrap;
3. `python3 dev.py test --sqlite-only` (unless --no-suite): its counts are printed, and
   anything skipped fails the step.

Run as root: python3 .ci/fresh_machine.py [--no-suite] [--keep]. Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("FRESH_MACHINE_CACHE", "/var/cache/tool-console-ci"))
INCLUDE = "python3,python3-venv,git,ca-certificates,curl"
# What carries the machine's CA settings into the root (each names the CA bundle).
CA_VARIABLES = (
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PIP_CERT",
    "GIT_SSL_CAINFO",
    "NODE_EXTRA_CA_CERTS",
)
HOST_CA = "/etc/ssl/host-ca-certificates.crt"  # where the host's bundle goes in the root
# Not under /root (0700): tests/support/unprivileged.py runs some tests as uid 65534 with the
# checkout's .venv, which /root's mode keeps that uid out of.
CHECKOUT = "/srv/tool-console"
PORT = 8000


def say(message: str) -> None:
    print(f"fresh-machine: {message}", flush=True)


# --- outside: build, cache, enter -------------------------------------------------------


def codename() -> str:
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return "bookworm"


def apt_mirror(suite: str) -> str:
    """The Debian mirror apt uses here (the first source with `suite`): never a hostname
    written into this file, so CI uses whatever mirror the machine is set up with."""
    sources = Path("/etc/apt")
    files = [sources / "sources.list", *sorted((sources / "sources.list.d").glob("*"))]
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".sources":  # deb822 stanzas
            for stanza in re.split(r"\n\s*\n", text):
                fields = dict(
                    (key.strip().lower(), value.strip())
                    for key, _, value in (
                        line.partition(":") for line in stanza.splitlines() if ":" in line
                    )
                    if not key.startswith("#")
                )
                if (
                    suite in fields.get("suites", "").split()
                    and "deb" in fields.get("types", "").split()
                ):
                    return fields["uris"].split()[0]
        elif path.suffix == ".list" or path.name == "sources.list":
            for line in text.splitlines():
                words = re.sub(r"\[[^]]*\]", "", line).split()
                if len(words) >= 3 and words[0] == "deb" and words[2] == suite:
                    return words[1]
    raise SystemExit(f"fresh-machine: no apt source for {suite} in /etc/apt")


def tarball(suite: str, mirror: str) -> Path:
    """The cached minimal root for `suite`, built with debootstrap when missing."""
    key = hashlib.sha256(f"{suite} minbase {INCLUDE} {mirror}".encode()).hexdigest()[:12]
    path = CACHE / f"debian-{suite}-minbase-{key}.tar"
    if path.exists():
        say(f"using the cached root {path}")
        return path
    if shutil.which("debootstrap") is None:
        # CI's own tool, not one the README's commands need: installing it hides nothing.
        say("installing debootstrap (it builds the fresh root)")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], check=True, env=env)
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "--no-install-recommends", "debootstrap"],
            check=True,
            env=env,
        )
    CACHE.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix="build-", dir=CACHE))
    started = time.monotonic()
    say(f"building a minimal Debian {suite} root with debootstrap from {mirror}")
    try:
        subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={INCLUDE}", suite, build, mirror],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        partial = path.with_suffix(".tar.part")
        subprocess.run(["tar", "-C", build, "-cf", partial, "."], check=True)
        partial.rename(path)
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", build], check=False)
    say(f"built and cached {path} in {time.monotonic() - started:.0f} s")
    return path


def prepare(root: Path, image: Path, inner_args: list[str]) -> None:
    subprocess.run(["tar", "-C", root, "-xf", image], check=True)
    root.chmod(0o755)  # the tarball's "." has the build folder's 0700, which locks out uid 65534
    # The machine's network and CA settings, nothing else from the host.
    shutil.copyfile("/etc/resolv.conf", root / "etc" / "resolv.conf")
    (root / "etc" / "hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost\n")
    ca = os.environ.get("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")
    shutil.copyfile(ca, root / HOST_CA.lstrip("/"))
    # The commit under test (HEAD), as a bundle to clone from.
    fresh = root / "fresh"
    fresh.mkdir()
    subprocess.run(
        ["git", "-C", ROOT, "bundle", "create", "-q", fresh / "commit.bundle", "HEAD"],
        check=True,
    )
    shutil.copyfile(__file__, fresh / "fresh_machine.py")
    (fresh / "args.json").write_text(json.dumps(inner_args))


# Run by `unshare --mount --pid --fork` (PID 1 of the new PID namespace: init() below) with
# the root as $1: mount what a booted machine has, then pivot_root into it and start inside().
ENTER = r"""
set -eu
root="$1"
shift
mount --make-rprivate /
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
cd "$root"
mkdir -p .old-root
pivot_root . .old-root
cd /
umount -l /.old-root
rmdir /.old-root
exec /usr/bin/env -i "$@"
"""


def enter(root: Path) -> int:
    env = [
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME=/root",
        "LANG=C.UTF-8",
        *(f"{name}={HOST_CA}" for name in CA_VARIABLES),
        "/usr/bin/python3",
        "/fresh/fresh_machine.py",
        "--inside",
    ]
    argv = ["unshare", "--mount", "--pid", "--fork", "--", "sh", "-c", ENTER, "enter", str(root)]
    return subprocess.run([*argv, *env], check=False).returncode


def outside(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        raise SystemExit("fresh-machine: run as root (it builds and enters a Debian root)")
    suite = codename()
    image = tarball(suite, apt_mirror(suite))
    root = Path(tempfile.mkdtemp(prefix="tool-console-fresh-", dir="/var/tmp"))
    root.chmod(0o755)
    try:
        prepare(root, image, ["--no-suite"] if args.no_suite else [])
        say(f"entering {root} (own mount and PID namespaces, pivot_root)")
        return enter(root)
    finally:
        if args.keep:
            say(f"kept {root}")
        else:
            subprocess.run(["rm", "-rf", "--one-file-system", root], check=False)


# --- inside: the README's commands on the fresh root ---------------------------------------


def http(method: str, url: str, token: str = "", body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
            return response.status, json.loads(text) if text.strip().startswith(b"{") else {}
    except urllib.error.HTTPError as exc:
        return exc.code, {}
    except OSError:
        return 0, {}


def serve(log: Path) -> tuple[subprocess.Popen, float]:
    """Command 1 in the background; the seconds until /healthz answers."""
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["python3", "dev.py", "up", "--port", str(PORT)],
            cwd=CHECKOUT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = started + 1800
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            print(log.read_text(errors="replace")[-6000:])
            raise SystemExit(f"fresh-machine: dev.py up exited with {proc.returncode}")
        if http("GET", f"http://127.0.0.1:{PORT}/healthz")[0] == 200:
            return proc, time.monotonic() - started
        time.sleep(1)
    print(log.read_text(errors="replace")[-6000:])
    raise SystemExit("fresh-machine: dev.py up did not serve /healthz in 30 min")


def stop(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def invoke_seed_tool(url: str) -> dict:
    """web_fetch through the agent API: the sandbox, its filtered network and Node."""
    token = subprocess.run(
        [".venv/bin/python", "manage.py", "create_agent_token", "fresh-machine"]
        + ["--scope", "tools:invoke"],
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    base = f"http://127.0.0.1:{PORT}/api/v1"
    status, run = http("POST", f"{base}/tools/web_fetch/invoke", token, {"params": {"url": url}})
    if "run" not in run:
        raise SystemExit(f"fresh-machine: invoke answered {status} {run}")
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        _, body = http("GET", f"{base}/runs/{run['run']}?wait=5", token)
        if body.get("status") not in (None, "queued", "running"):
            return body
    raise SystemExit("fresh-machine: the run did not end in 10 min")


def suite() -> tuple[int, str]:
    started = time.monotonic()
    done = subprocess.run(
        ["python3", "dev.py", "test", "--sqlite-only"],
        cwd=CHECKOUT,
        env={**os.environ, "CI": "true"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    failed = [
        line[:300] for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))
    ]
    print("\n".join(failed[:300]) or done.stdout[-8000:])
    summary = [line for line in done.stdout.splitlines() if re.search(r" in [\d.]+s", line)]
    counts = summary[-1].strip("= ") if summary else "no pytest summary"
    say(f"command 2: exit {done.returncode} in {time.monotonic() - started:.0f} s: {counts}")
    code = done.returncode
    if re.search(r"\d+ skipped", counts):
        say("command 2 skipped tests: a fresh machine must skip none")
        code = code or 1
    return code, counts


def inside(no_suite: bool) -> int:
    subprocess.run(
        ["git", "-c", "advice.detachedHead=false", "clone", "-q", "/fresh/commit.bundle", CHECKOUT],
        check=True,
    )
    log = Path("/fresh/up.log")
    say("command 1: python3 dev.py up")
    proc, seconds = serve(log)
    say(f"command 1: /healthz answered {seconds:.0f} s after the start")
    code = 0
    try:
        # A file the machine's own Debian mirror certainly serves (debootstrap read it).
        _deb, mirror, suite_name, *_ = next(
            line.split()
            for line in Path("/etc/apt/sources.list").read_text().splitlines()
            if line.startswith("deb ")
        )
        run = invoke_seed_tool(f"{mirror.rstrip('/')}/dists/{suite_name}/Release")
        status, isolation = run.get("status"), run.get("isolation")
        say(f"agent API run of web_fetch: status {status}, isolation {isolation}")
        if (status, isolation) != ("succeeded", "bwrap"):
            print(json.dumps(run, indent=1)[:4000])
            print(log.read_text(errors="replace")[-6000:])
            code = 1
    finally:
        stop(proc)
    if no_suite:
        say("--no-suite: command 2 not run")
        return code
    suite_code, _counts = suite()
    return code or suite_code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-suite", action="store_true", help="stop after command 1")
    parser.add_argument("--keep", action="store_true", help="keep the unpacked root")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        inner = json.loads(Path("/fresh/args.json").read_text())
        return init(lambda: inside("--no-suite" in inner))
    return outside(args)


def init(work) -> int:
    """Be the PID namespace's init, as a booted machine's (or a container's --init) is: run
    `work` in a child and reap every orphan until it ends. Without this, processes whose
    parent died (a killed worker's pool) stay zombies forever, which no real machine has."""
    child = os.fork()
    if child == 0:
        try:
            code = work()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, flush=True)
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        os._exit(code)
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, lambda signum, _frame: os.kill(child, signum))
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return 1
        if pid == child:
            return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
