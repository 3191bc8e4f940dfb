"""`python3 dev.py up` and `test` install the Debian packages they need (issue: a fresh
machine). The OS is stood in for by stub `apt-get` and `dpkg-query` scripts first on PATH:
they record their arguments and answer from a list of installed packages. dev.py runs from a
copy in a scratch folder, so nothing here touches the checkout's .venv."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import prerequisite

REPO = Path(__file__).resolve().parents[2]
ROOT = os.geteuid() == 0
RUNTIME = [
    "bubblewrap",
    "util-linux",
    "libseccomp2",
    "slirp4netns",
    "nftables",
    "iproute2",
    "ffmpeg",
    "tesseract-ocr",
    "tesseract-ocr-eng",
]
TEST = ["chromium", "fonts-dejavu-core", "wrk", "libatomic1"]

APT_GET = """#!/bin/sh
echo "$DEBIAN_FRONTEND $*" >> "$STUB_DIR/apt-get.log"
exit "${APT_EXIT:-0}"
"""
DPKG_QUERY = """#!/bin/sh
for package; do :; done
if /bin/grep -qx "$package" "$STUB_DIR/installed"; then
  printf 'install ok installed'
else
  echo "dpkg-query: no packages found matching $package" >&2
  exit 1
fi
"""


@dataclass
class Machine:
    """A scratch folder with dev.py, stub apt-get/dpkg-query and their record."""

    dir: Path

    @property
    def apt_calls(self) -> list[str]:
        log = self.dir / "apt-get.log"
        return log.read_text().splitlines() if log.exists() else []

    def installed(self, *packages: str) -> None:
        (self.dir / "installed").write_text("".join(f"{p}\n" for p in packages))

    def env(self, apt_get: bool = True, **extra: str) -> dict[str, str]:
        # Without apt-get, PATH holds the stubs only: the host's own apt-get is in /usr/bin.
        path = f"{self.dir / 'bin'}:/usr/bin:/bin" if apt_get else str(self.dir / "bin-no-apt")
        return {"PATH": path, "STUB_DIR": str(self.dir), **extra}

    def packages(self, test: bool, user: int | None = None, **env) -> subprocess.CompletedProcess:
        """dev.system_packages() on its own, as root or as `user`."""
        code = f"import sys; sys.path.insert(0, {str(self.dir)!r}); import dev\n"
        code += f"dev.system_packages(test={test})\n"
        return self._run([sys.executable, "-c", code], user=user, **env)

    def dev(self, *args: str, **env) -> subprocess.CompletedProcess:
        return self._run([sys.executable, str(self.dir / "dev.py"), *args], **env)

    def _run(self, argv, user: int | None = None, apt_get: bool = True, **env):
        return subprocess.run(
            argv,
            cwd=self.dir,
            env=self.env(apt_get, **env),
            user=user,
            group=user,
            extra_groups=[] if user is not None else None,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )


@pytest.fixture
def machine() -> Iterator[Machine]:
    # World-readable (not under pytest's 0700 tmp_path) so that uid 65534 can run it too.
    folder = Path(tempfile.mkdtemp(prefix="dev-packages-"))
    try:
        folder.chmod(0o777)
        shutil.copy(REPO / "dev.py", folder / "dev.py")
        for name, script in (("bin", {"apt-get": APT_GET}), ("bin-no-apt", {})):
            (folder / name).mkdir()
            for exe, text in {**script, "dpkg-query": DPKG_QUERY}.items():
                (folder / name / exe).write_text(text)
                (folder / name / exe).chmod(0o755)
        (folder / "installed").write_text("")
        (folder / "installed").chmod(0o644)
        yield Machine(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def no_traceback(done: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in done.stdout + done.stderr, done.stderr


@prerequisite(not ROOT, "the install runs as root")
def test_it_installs_only_the_missing_runtime_packages_as_root(machine: Machine) -> None:
    machine.installed("bubblewrap", "util-linux", "iproute2")
    done = machine.packages(test=False)
    assert done.returncode == 0, done.stderr
    missing = "libseccomp2 slirp4netns nftables ffmpeg tesseract-ocr tesseract-ocr-eng"
    assert machine.apt_calls == [
        "noninteractive update -q",
        f"noninteractive install -y --no-install-recommends {missing} -q",
    ]
    # One line saying what and why.
    lines = [line for line in done.stdout.splitlines() if "installing system packages" in line]
    assert lines == [
        "==> installing system packages with apt-get (libseccomp2: the sandbox's seccomp "
        "filter; slirp4netns: a sandbox's filtered network; nftables: the egress filter; "
        "ffmpeg: the seed tool convert_audio_to_mp3; tesseract-ocr: the seed tool ocr; "
        "tesseract-ocr-eng: the seed tool ocr's English data)"
    ]


@prerequisite(not ROOT, "the install runs as root")
def test_the_test_command_adds_the_suites_packages(machine: Machine) -> None:
    machine.installed(*RUNTIME)
    done = machine.packages(test=True)
    assert done.returncode == 0, done.stderr
    assert machine.apt_calls[1:] == [
        f"noninteractive install -y --no-install-recommends {' '.join(TEST)} -q"
    ]


@prerequisite(not ROOT, "the install runs as root")
def test_it_installs_nothing_when_everything_is_there(machine: Machine) -> None:
    machine.installed(*RUNTIME, *TEST)
    done = machine.packages(test=True)
    assert (done.returncode, done.stdout, machine.apt_calls) == (0, "", [])


@prerequisite(not ROOT, "uid 65534 stands for an ordinary user")
def test_an_ordinary_user_gets_the_sudo_line_and_goes_on(machine: Machine) -> None:
    machine.installed(*RUNTIME[:-3])
    done = machine.packages(test=True, user=65534)
    assert done.returncode == 0, done.stderr
    assert machine.apt_calls == []
    seed = "ffmpeg tesseract-ocr tesseract-ocr-eng"
    assert f"sudo apt-get install -y --no-install-recommends {seed} {' '.join(TEST)}\n" in (
        done.stdout
    )
    assert "fallback sandbox" in done.stdout


def test_without_apt_get_it_names_the_packages_and_goes_on(machine: Machine) -> None:
    done = machine.packages(test=False, apt_get=False)
    assert done.returncode == 0, done.stderr
    assert machine.apt_calls == []
    assert "no apt-get here" in done.stdout and " ".join(RUNTIME) in done.stdout


@prerequisite(not ROOT, "the install runs as root")
def test_a_failing_apt_get_says_what_failed_and_how_to_fix_it(machine: Machine) -> None:
    done = machine.dev("test", "--sqlite-only", APT_EXIT="100")
    assert done.returncode == 1
    no_traceback(done)
    assert machine.apt_calls == ["noninteractive update -q"]
    assert done.stderr.endswith(
        "dev.py: apt-get update -q exited with code 100\n"
        "  to fix: check the network and apt's sources, then run: apt-get install -y "
        f"--no-install-recommends {' '.join(RUNTIME + TEST)}\n"
    )


@pytest.mark.parametrize("command", ["up", "test"])
def test_no_system_packages_skips_the_step_and_a_failing_pip_says_so(
    machine: Machine, command: str
) -> None:
    # A lock pip rejects at once (no network), so the next step fails after the skipped one.
    (machine.dir / "requirements.lock").write_text("this is not a requirement\n")
    (machine.dir / "requirements-dev.lock").write_text("")
    (machine.dir / "pyproject.toml").write_text("")
    done = machine.dev(command, "--no-system-packages")
    assert done.returncode == 1
    no_traceback(done)
    assert machine.apt_calls == []
    assert "system packages" not in done.stdout
    assert "==> installing pinned dependencies" in done.stdout
    assert done.stderr.endswith(
        "dev.py: python -m pip exited with code 1\n"
        "  to fix: pip could not install the pinned dependencies: check access to PyPI (or "
        "pip's index in `pip config list`), then run again\n"
    )


def tun(machine: Machine, device: Path, user: int | None = None) -> subprocess.CompletedProcess:
    """dev.tun_device() on its own, with the device at `device`."""
    code = f"import sys; sys.path.insert(0, {str(machine.dir)!r}); import dev, pathlib\n"
    code += f"dev.TUN = pathlib.Path({str(device)!r}); dev.tun_device()\n"
    return machine._run([sys.executable, "-c", code], user=user)


@prerequisite(not ROOT, "making a device node needs root")
def test_it_opens_a_0600_tun_device_to_every_user_as_root(machine: Machine) -> None:
    device = machine.dir / "net" / "tun"
    device.parent.mkdir()
    os.mknod(device, 0o600 | stat.S_IFCHR, os.makedev(10, 200))
    device.chmod(0o600)
    done = tun(machine, device)
    assert done.returncode == 0, done.stderr
    assert "==> opening /dev/net/tun to every user, as udev does (chmod 0666" in done.stdout
    assert stat.S_IMODE(device.stat().st_mode) == 0o666


@prerequisite(not ROOT, "making a device node needs root")
def test_it_makes_a_missing_tun_device_as_root(machine: Machine) -> None:
    device = machine.dir / "net" / "tun"
    done = tun(machine, device)
    assert done.returncode == 0, done.stderr
    assert "mknod -m 0666 /dev/net/tun c 10 200" in done.stdout
    made = device.stat()
    assert stat.S_ISCHR(made.st_mode) and stat.S_IMODE(made.st_mode) == 0o666
    assert (os.major(made.st_rdev), os.minor(made.st_rdev)) == (10, 200)


@prerequisite(not ROOT, "making a device node needs root")
def test_an_ordinary_user_gets_the_tun_line_and_goes_on(machine: Machine) -> None:
    device = machine.dir / "net" / "tun"
    device.parent.mkdir()
    device.parent.chmod(0o755)
    os.mknod(device, 0o600 | stat.S_IFCHR, os.makedev(10, 200))
    device.chmod(0o600)
    done = tun(machine, device, user=65534)
    assert done.returncode == 0, done.stderr
    no_traceback(done)
    assert "as root run:\n    chmod 0666 /dev/net/tun\n" in done.stdout
    assert stat.S_IMODE(device.stat().st_mode) == 0o600


@prerequisite(not ROOT, "making a device node needs root")
def test_it_leaves_an_open_tun_device_alone(machine: Machine) -> None:
    device = machine.dir / "tun"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(10, 200))
    device.chmod(0o666)
    done = tun(machine, device)
    assert (done.returncode, done.stdout) == (0, "")
