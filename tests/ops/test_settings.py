"""The CONSOLE_* settings docs/configuration.md documents do what it says. Settings are read when
console.settings is imported, so each is tested in a fresh process started with the
variable set: a `manage.py` command, or a short script that imports the settings."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.seed.test_seed_tools import _write_wav
from tests.support import MANAGE, REPO, console_env, require
from tests.support.worker import worker_database_url
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.models import RunArtifact
from tools_app.runs import artifacts as run_artifacts


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a fresh install: no CONSOLE_* variable but those given."""
    defaults = {
        "CONSOLE_SECRET_KEY": "settings-test-key-" + "x" * 40,
        # A set secret key turns the HTTPS defaults on (tests/ops/test_deploy_check.py covers
        # them); these tests speak plain HTTP, as a development install does.
        "CONSOLE_HTTPS": "False",
        "DJANGO_SETTINGS_MODULE": "console.settings",
    }
    return console_env(tmp_path, fresh=True, **{**defaults, **extra})


def fresh_process(
    tmp_path: Path, argv: list[str], *, timeout: int = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run `argv` from the repository in a fresh install's environment (clean_env)."""
    return subprocess.run(
        argv,
        env=clean_env(tmp_path, **env),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def script(tmp_path: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the Python `code` in a fresh process; it must exit 0."""
    done = fresh_process(tmp_path, [sys.executable, "-c", code], **env)
    assert done.returncode == 0, done.stderr
    return done


def python(tmp_path: Path, code: str, **env: str) -> dict:
    """Run `code` after django.setup() in a new process; it prints one JSON document."""
    done = script(tmp_path, "import django, json\ndjango.setup()\n" + textwrap.dedent(code), **env)
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- run limits and input folders: a real run, started by `manage.py run_tool` -------------


def run_tool(tmp_path: Path, name: str, params: dict, **env: str) -> tuple[int, dict]:
    database = worker_database_url()
    require(database is None, "in-memory SQLite: a second process cannot see the test data")
    argv = [*MANAGE, "run_tool", name, "--params", json.dumps(params)]
    done = fresh_process(tmp_path, argv, timeout=300, DATABASE_URL=database, **env)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def text_of(result: dict) -> str:
    return "\n".join(block.get("text", "") for block in result["content"])


HOLDS_200_MIB = """
def execute(tool_call_id, params, signal, on_update):
    keep = [bytearray(8 << 20) for _ in range(25)]
    return {"content": [{"type": "text", "text": f"kept {len(keep) * 8} MiB"}]}
"""
# 60 processes: within the default (64, and a cgroup allows 32 more for runtime threads),
# past 10 (a cgroup's 42).
STARTS_60_PROCESSES = "for i in $(seq 1 60); do sleep 1 & done\nwait\necho all 60 ended\n"


def publish(name: str, language: str, source: str) -> None:
    from tests.support import tool_files

    files = tool_files(name, language, source=source, extra={"timeout": 60})
    save_version(name, files, actor=Actor.system(), publish=True)


@pytest.mark.django_db(transaction=True)
def test_runner_memory_mb_lowers_what_a_run_may_allocate(tmp_path):
    publish("hog", "python", HOLDS_200_MIB)

    code, default = run_tool(tmp_path, "hog", {})
    assert code == 0 and text_of(default) == "kept 200 MiB", default

    code, lowered = run_tool(tmp_path, "hog", {}, CONSOLE_RUNNER_MEMORY_MB="128")
    assert code == 1
    assert "ran out of memory (limit 128 MiB)" in text_of(lowered), lowered


@pytest.mark.django_db(transaction=True)
def test_runner_max_processes_lowers_how_many_processes_a_run_may_start(tmp_path):
    publish("forker", "bash", STARTS_60_PROCESSES)

    code, default = run_tool(tmp_path, "forker", {})
    assert code == 0 and "all 60 ended" in text_of(default), default

    code, lowered = run_tool(tmp_path, "forker", {}, CONSOLE_RUNNER_MAX_PROCESSES="10")
    assert code == 1
    assert text_of(lowered) == (
        "The tool exceeded the process limit (10 processes) and was stopped."
    ), lowered


@pytest.mark.django_db(transaction=True)
def test_tool_input_dirs_let_convert_audio_to_mp3_read_a_file_outside_its_folder(tmp_path):
    from tools_app.catalog.sync import sync_tools

    require(not _has_ffmpeg(), "ffmpeg is not installed (apt-get install ffmpeg)")
    sync_tools(REPO / "seed" / "tools")
    recordings = tmp_path / "recordings"
    recordings.mkdir()
    _write_wav(recordings / "meeting.wav", seconds=1)
    params = {"input_path": str(recordings / "meeting.wav")}

    code, hidden = run_tool(tmp_path, "convert_audio_to_mp3", params)
    assert code == 1, hidden  # the sandbox does not show the host's folders by default

    code, done = run_tool(
        tmp_path, "convert_audio_to_mp3", params, CONSOLE_TOOL_INPUT_DIRS=str(recordings)
    )
    assert code == 0, done
    assert f"Converted {recordings / 'meeting.wav'} to MP3." in text_of(done)
    artifact = RunArtifact.objects.get(name="meeting.mp3")
    # Artifacts are kept in the database (CONSOLE_ARTIFACT_STORAGE's default).
    with run_artifacts.open_artifact(artifact) as stored:
        mp3 = stored.read()
    assert mp3[:3] == b"ID3" and artifact.size == len(mp3)
    assert (recordings / "meeting.wav").exists() and not (recordings / "meeting.mp3").exists()


def _has_ffmpeg() -> bool:
    import shutil

    return shutil.which("ffmpeg") is not None


# --- web settings: a Django test client in a fresh process ---------------------------------

LOGIN_PAGE = """
from django.test import Client
client = Client(enforce_csrf_checks=True)
page = client.get("/accounts/login/", HTTP_HOST="{host}")
"""


def test_secure_cookies_marks_the_session_and_csrf_cookies_secure(tmp_path):
    code = LOGIN_PAGE.format(host="127.0.0.1") + textwrap.dedent("""
        from django.conf import settings
        print(json.dumps({"csrf": bool(page.cookies["csrftoken"]["secure"]),
                          "session": settings.SESSION_COOKIE_SECURE}))
    """)
    assert python(tmp_path, code) == {"csrf": False, "session": False}
    assert python(tmp_path, code, CONSOLE_SECURE_COOKIES="true") == {"csrf": True, "session": True}


def test_allowed_hosts_decides_which_host_names_are_served(tmp_path):
    code = textwrap.dedent("""
        from django.test import Client
        client = Client()
        print(json.dumps({host: client.get("/accounts/login/", HTTP_HOST=host).status_code
                          for host in ("127.0.0.1", "console.example.org")}))
    """)
    assert python(tmp_path, code) == {"127.0.0.1": 200, "console.example.org": 400}
    only = python(tmp_path, code, CONSOLE_ALLOWED_HOSTS="console.example.org")
    assert only == {"127.0.0.1": 400, "console.example.org": 200}


@pytest.mark.django_db(transaction=True)
def test_csrf_trusted_origins_admits_a_proxys_origin(tmp_path):
    # A TLS proxy in front of the console: the browser posts from https://console.example.org
    # while the console sees plain HTTP. Django refuses that Origin unless it is trusted.
    # (Committed, not in a test transaction: the child's failed login writes axes records.)
    code = LOGIN_PAGE.format(host="console.example.org") + textwrap.dedent("""
        from tests.support.forms import find_form
        form = find_form(page.content.decode(), form_id="login-form")
        answer = client.post(
            form.attrs.get("action") or "/accounts/login/",
            form.filled({"username": "x", "password": "y"}),
            HTTP_HOST="console.example.org",
            HTTP_ORIGIN="https://console.example.org",
        )
        print(json.dumps([answer.status_code, "didn't match" in answer.content.decode()]))
    """)
    hosts = {"CONSOLE_ALLOWED_HOSTS": "console.example.org"}
    url = worker_database_url()
    require(url is None, "in-memory SQLite: a second process cannot see the test database")
    assert python(tmp_path, code, DATABASE_URL=url, **hosts) == [403, False]
    trusted = python(
        tmp_path,
        code,
        DATABASE_URL=url,
        CONSOLE_CSRF_TRUSTED_ORIGINS="https://console.example.org",
        **hosts,
    )
    assert trusted == [200, True]  # the form again, with "didn't match": CSRF passed


def test_debug_shows_djangos_technical_pages_only_when_set(tmp_path):
    code = textwrap.dedent("""
        from django.conf import settings
        from django.test import Client
        page = Client().get("/no-such-page/", HTTP_HOST="127.0.0.1")
        print(json.dumps({"debug": settings.DEBUG, "technical": b"URLconf" in page.content}))
    """)
    assert python(tmp_path, code) == {"debug": False, "technical": False}
    assert python(tmp_path, code, CONSOLE_DEBUG="true") == {"debug": True, "technical": True}


def test_db_conn_max_age_sets_how_long_connections_are_kept(tmp_path):
    code = """
        from django.db import connection
        print(json.dumps(connection.settings_dict["CONN_MAX_AGE"]))
    """
    assert python(tmp_path, code) == 60
    assert python(tmp_path, code, CONSOLE_DB_CONN_MAX_AGE="0") == 0


def test_log_level_hides_messages_below_it(tmp_path):
    code = textwrap.dedent("""
        import django, logging
        django.setup()
        logging.getLogger("tools_app").info("an info line")
        logging.getLogger("tools_app").warning("a warning line")
    """)

    def stderr(**env: str) -> str:
        return script(tmp_path, code, **env).stderr

    default = stderr()
    assert "an info line" in default and "a warning line" in default
    quiet = stderr(CONSOLE_LOG_LEVEL="WARNING")
    assert "an info line" not in quiet and "a warning line" in quiet


def test_the_generated_secret_key_is_private_and_kept(tmp_path):
    code = """
        from django.conf import settings
        print(json.dumps(settings.SECRET_KEY))
    """
    first = python(tmp_path, code, CONSOLE_SECRET_KEY="")
    path = tmp_path / "state" / "secret_key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().strip() == first and len(first) >= 50
    assert python(tmp_path, code, CONSOLE_SECRET_KEY="") == first  # read, not replaced


def test_an_older_readable_secret_key_is_made_private(tmp_path):
    """A key file from before the 0600 rule (or copied in loosely) is tightened at start."""
    path = tmp_path / "state" / "secret_key"  # the state dir isolated_state made
    path.write_text("an-older-key-" + "y" * 50)
    path.chmod(0o644)
    code = """
        from django.conf import settings
        print(json.dumps(settings.SECRET_KEY))
    """
    assert python(tmp_path, code, CONSOLE_SECRET_KEY="") == "an-older-key-" + "y" * 50
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_hypothesis_is_derandomized_in_ci():
    """A property-test failure in CI must be reproducible: same examples every run."""
    import hypothesis

    from tests.support import in_ci

    require(not in_ci(), "only CI derandomizes (locally Hypothesis explores)")
    assert hypothesis.settings.default.derandomize is True


@pytest.mark.django_db
def test_tool_input_dirs_let_a_person_convert_a_recording_from_the_run_form(
    tmp_path, settings, developer_client
):
    """The same setting on the way a person runs the tool: the run form, the runner
    (run_execute.execute_run, as a worker does) and the run page. (CONSOLE_TOOL_INPUT_DIRS is read
    into settings.TOOL_INPUT_DIRS at start-up: the test above starts processes with it.)"""
    from tests.views.test_run_outcomes import page, run_from_the_form
    from tools_app.catalog.sync import sync_tools

    require(not _has_ffmpeg(), "ffmpeg is not installed (apt-get install ffmpeg)")
    sync_tools(REPO / "seed" / "tools")
    recordings = tmp_path / "recordings"
    recordings.mkdir()
    _write_wav(recordings / "meeting.wav", seconds=1)
    wav = str(recordings / "meeting.wav")

    settings.TOOL_INPUT_DIRS = []
    hidden = run_from_the_form(developer_client, "convert_audio_to_mp3", input_path=wav)
    assert "Failed" in page(developer_client, hidden)
    assert f"input file not found: {wav}" in page(developer_client, hidden)

    settings.TOOL_INPUT_DIRS = [str(recordings)]
    run = run_from_the_form(developer_client, "convert_audio_to_mp3", input_path=wav)

    text = page(developer_client, run)
    assert "Succeeded" in text and f"Converted {wav} to MP3." in text
    assert "Artifacts meeting.mp3" in text


def test_ci_runs_the_test_command_with_ci_set():
    """CI=true is what turns a missing prerequisite into a failure and derandomizes
    Hypothesis: .ci/run must export it before the README's test command, and dev.py test
    must hand its environment on to pytest."""
    script = (REPO / ".ci" / "run").read_text().splitlines()
    exports = [i for i, line in enumerate(script) if re.match(r"export CI=true\b", line)]
    tests = [i for i, line in enumerate(script) if line.strip().startswith("python3 dev.py test")]
    assert exports and tests and exports[0] < tests[0], "CI=true is not set for the tests"
    dev = (REPO / "dev.py").read_text()
    body = dev[dev.index("def cmd_test(") :]
    assert 'env = {**os.environ, "PYTHONDONTWRITEBYTECODE"' in body
