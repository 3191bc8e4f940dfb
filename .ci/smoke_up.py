#!/usr/bin/env python3
"""Prove README command 1 on a fresh clone: `python3 dev.py up` serves the console with the
four seed tools listed and a login that works. Standard library only."""

from __future__ import annotations

import http.cookiejar
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


PORT = int(os.environ.get("SMOKE_PORT", "0")) or _free_port()
BASE = f"http://127.0.0.1:{PORT}"
SEED_TOOLS = ("web_fetch", "web_search", "email_db", "convert_audio_to_mp3")


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="smoke-up-"))
    clone = work / "console"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    log_path = work / "up.log"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "dev.py", "up", "--port", str(PORT)],
            cwd=clone,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        return check(proc, log_path)
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def check(proc: subprocess.Popen, log_path: Path) -> int:
    deadline = time.monotonic() + 900
    password = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            print(log_path.read_text()[-5000:])
            print("smoke: dev.py up exited early", file=sys.stderr)
            return 1
        text = log_path.read_text()
        match = re.search(r"password \(shown only now\):\s+(\S+)", text)
        password = match.group(1) if match else None
        if password and _up():
            break
        time.sleep(2)
    else:
        print(log_path.read_text()[-5000:])
        print("smoke: console did not come up", file=sys.stderr)
        return 1

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(f"{BASE}/accounts/login/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    form = urllib.parse.urlencode(
        {"username": "admin", "password": password, "csrfmiddlewaretoken": token, "next": "/tools/"}
    ).encode()
    request = urllib.request.Request(f"{BASE}/accounts/login/", data=form)
    request.add_header("Referer", f"{BASE}/accounts/login/")
    tools_page = opener.open(request).read().decode()
    missing = [name for name in SEED_TOOLS if name not in tools_page]
    if missing or "Log out" not in tools_page:
        print(tools_page[:3000])
        print(f"smoke: logged-in tool list lacks {missing}", file=sys.stderr)
        return 1
    print(f"smoke: dev.py up served {len(SEED_TOOLS)} seed tools and the login works")
    return 0


def _up() -> bool:
    try:
        with urllib.request.urlopen(f"{BASE}/accounts/login/", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(main())
