"""The four seed tools, run for real through the runner and its sandbox.

Local HTTP servers on 127.0.0.1 stand in for web pages and for SearXNG; a temporary SQLite
file is the email archive; a generated WAV is converted with the real ffmpeg.
"""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import struct
import subprocess
import threading
import urllib.parse
import wave
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support import require
from tests.support.stand_in import Reply, Request, json_reply
from tools_app.http_tools.checks import ValidationContext
from tools_app.runner import (
    CANCELLED,
    FAILED,
    SUCCEEDED,
    Limits,
    RunOutcome,
    RunRequest,
    isolation_level,
    run,
)

# Code tools: their checks read nothing of a console.
NO_CONSOLE = ValidationContext()

SEED_TOOLS = Path(__file__).resolve().parents[2] / "seed" / "tools"
SEARX_TOKEN = "searx-token-3f9a1c"  # distinctive: the runner redacts it from results

PAGE_HTML = """<!doctype html>
<html><head><title>Release notes &amp; more</title>
<script>var tracking = "<p>never shown</p>";</script>
<style>body { color: hotpink }</style>
</head><body>
<nav><a href="/home">Home link</a> <a href="/about">About link</a></nav>
<main>
<h1>Release   notes</h1>
<p>Read <a href="/docs/start?a=1&amp;b=2">the guide</a> before upgrading.</p>
<ul><li>faster runs</li><li>fewer bugs</li></ul>
<div hidden>hidden text</div>
</main>
<footer>Footer text</footer>
</body></html>
"""
PLAIN_TEXT = "line one\n  indented line two\n<not html>\n"
JSON_TEXT = '{"name": "tool", "tags": ["a", "b"]}'


# --- helpers ------------------------------------------------------------------------------


@dataclass
class Run:
    outcome: RunOutcome
    updates: list[str]

    @property
    def text(self) -> str:
        return "\n".join(item["text"] for item in self.outcome.result["content"])

    @property
    def is_error(self) -> bool:
        return self.outcome.result["isError"]


@dataclass
class ToolRunner:
    """Copies a seed tool into a temp folder (so a test can put files beside it) and runs it."""

    root: Path
    tool_dirs: dict[str, Path] = field(default_factory=dict)

    def tool_dir(self, name: str) -> Path:
        if name not in self.tool_dirs:
            target = self.root / "tools" / name
            shutil.copytree(SEED_TOOLS / name, target)
            self.tool_dirs[name] = target
        return self.tool_dirs[name]

    def visible_path(self, name: str, file_name: str) -> str:
        """How the tool sees a file placed in its folder: bubblewrap mounts the folder at
        /tool and shows nothing else of the host, a plain subprocess sees host paths."""
        if isolation_level()[0] == "bwrap":
            return f"/tool/{file_name}"
        return str(self.tool_dir(name) / file_name)

    def __call__(
        self,
        name: str,
        params: dict[str, Any],
        *,
        env: dict[str, str] | None = None,
        secrets: dict[str, str] | None = None,
        timeout: float = 60,
        cancel_when: Callable[[str], bool] | None = None,
    ) -> Run:
        from tools_app.manifest.folder import validate_tool_dir

        manifest = validate_tool_dir(SEED_TOOLS / name, context=NO_CONSOLE).manifest
        assert manifest is not None
        cancel = threading.Event()
        updates: list[str] = []

        def on_update(update: dict[str, Any]) -> None:
            text = "".join(item["text"] for item in update["content"])
            updates.append(text)
            if cancel_when is not None and cancel_when(text):
                cancel.set()

        outcome = run(
            RunRequest(
                tool_dir=self.tool_dir(name),
                language=manifest.language,
                entry=manifest.entry_candidates[0],
                params=params,
                tool_call_id="call-1",
                env=env or {},
                secrets=secrets or {},
                network=manifest.network,
                limits=Limits(timeout=timeout),
                work_root=self.root / "runs",
            ),
            on_update=on_update,
            cancel=cancel,
        )
        return Run(outcome, updates)


@pytest.fixture
def run_tool(tmp_path: Path) -> ToolRunner:
    return ToolRunner(tmp_path)


class FakeWeb:
    """A web site and a SearXNG instance on one local port."""

    def __init__(self) -> None:
        self.base = ""
        self.release = threading.Event()
        self.searches: list[dict[str, Any]] = []

    def answer(self, request: Request) -> Reply:
        url = urllib.parse.urlsplit(request.path)
        if url.path == "/page.html":
            return Reply(200, PAGE_HTML.encode(), "text/html; charset=utf-8")
        if url.path == "/notes.txt":
            return Reply(200, PLAIN_TEXT.encode(), "text/plain; charset=utf-8")
        if url.path == "/data.json":
            return Reply(200, JSON_TEXT.encode(), "application/json")
        if url.path == "/long.txt":
            return Reply(200, ("0123456789" * 1000).encode(), "text/plain")
        if url.path == "/slow":
            self.release.wait(30)  # until the test ends
            return Reply(200, b"too late", "text/plain")
        if url.path == "/searx/search":
            return self._search(request, urllib.parse.parse_qs(url.query))
        return Reply(404, b"<h1>Not Found</h1><p>No such page here.</p>", "text/html")

    def _search(self, request: Request, query: dict[str, list[str]]) -> Reply:
        auth = request.header("Authorization")
        self.searches.append({"query": query, "authorization": auth})
        if auth != f"Bearer {SEARX_TOKEN}":
            return Reply(401, b"token required", "text/plain")
        results = [
            {
                "title": f"Result number {i}",
                "url": f"https://example.org/{i}",
                "content": f"Snippet   of result\n{i}.",
                "engine": "duckduckgo",
            }
            for i in range(1, 8)
        ]
        body = {
            "query": query["q"][0],
            "number_of_results": 7,
            "results": results,
            "answers": [],
            "suggestions": ["related query"],
            "unresponsive_engines": [],
        }
        return json_reply(body)


@pytest.fixture
def fake_web(monkeypatch: pytest.MonkeyPatch, stand_in) -> Iterator[FakeWeb]:
    web = FakeWeb()
    server = stand_in(web.answer, methods=("GET",))
    web.base = server.url
    # Tools reach the host's loopback only where the egress policy allows it.
    monkeypatch.setenv("CONSOLE_TOOL_NETWORK_ALLOW", f"{server.host}:{server.port}")
    yield web
    web.release.set()


# --- web_fetch ----------------------------------------------------------------------------


def test_it_fetches_html_as_readable_text_without_scripts_styles_or_nav(
    run_tool: ToolRunner, fake_web: FakeWeb
) -> None:
    done = run_tool("web_fetch", {"url": f"{fake_web.base}/page.html"})
    assert done.outcome.status == SUCCEEDED, done.text
    assert not done.is_error
    text = done.text
    assert "Title: Release notes & more" in text
    assert "# Release notes" in text
    assert f"Read the guide ({fake_web.base}/docs/start?a=1&b=2) before upgrading." in text
    assert "- faster runs\n- fewer bugs" in text
    for absent in ("tracking", "never shown", "hotpink", "Home link", "Footer text", "hidden"):
        assert absent not in text
    assert done.updates[0] == f"fetching {fake_web.base}/page.html"
    assert any(u.startswith("received ") and "bytes" in u for u in done.updates)
    assert "extracting text" in done.updates


def test_it_returns_plain_text_and_json_unchanged(run_tool: ToolRunner, fake_web: FakeWeb) -> None:
    plain = run_tool("web_fetch", {"url": f"{fake_web.base}/notes.txt"})
    data = run_tool("web_fetch", {"url": f"{fake_web.base}/data.json"})
    assert plain.outcome.status == SUCCEEDED
    assert plain.text.endswith("\n\n" + PLAIN_TEXT)
    assert data.outcome.status == SUCCEEDED
    assert data.text.endswith("\n\n" + JSON_TEXT)
    assert "Content-Type: application/json" in data.text


def test_it_truncates_long_text_with_a_note_on_how_to_read_on(
    run_tool: ToolRunner, fake_web: FakeWeb
) -> None:
    first = run_tool("web_fetch", {"url": f"{fake_web.base}/long.txt", "max_chars": 25})
    assert first.outcome.status == SUCCEEDED
    assert "\n\n0123456789012345678901234\n\n" in first.text
    assert "[Truncated: showing characters 0-25 of 10000." in first.text
    assert "offset=25" in first.text
    rest = run_tool("web_fetch", {"url": f"{fake_web.base}/long.txt", "offset": 9995})
    assert "\n\n56789\n\n[Truncated: showing characters 9995-10000 of 10000.]" in rest.text


def test_it_reports_a_non_2xx_status_as_an_error(run_tool: ToolRunner, fake_web: FakeWeb) -> None:
    done = run_tool("web_fetch", {"url": f"{fake_web.base}/missing"})
    assert done.outcome.status == FAILED
    assert done.is_error
    assert f"HTTP 404 Not Found for {fake_web.base}/missing" in done.text
    assert "No such page here." in done.text


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.org/x", "data:,hello"])
def test_it_refuses_urls_that_are_not_http(run_tool: ToolRunner, url: str) -> None:
    done = run_tool("web_fetch", {"url": url})
    assert done.is_error
    assert "only fetches http and https URLs" in done.text
    assert "root:" not in done.text


def test_it_cancels_a_fetch_that_is_still_waiting(run_tool: ToolRunner, fake_web: FakeWeb) -> None:
    done = run_tool(
        "web_fetch",
        {"url": f"{fake_web.base}/slow"},
        cancel_when=lambda update: update.startswith("fetching"),
    )
    assert done.outcome.status == CANCELLED
    assert done.is_error
    assert "too late" not in done.text


def test_it_gives_up_after_timeout_seconds(run_tool: ToolRunner, fake_web: FakeWeb) -> None:
    done = run_tool("web_fetch", {"url": f"{fake_web.base}/slow", "timeout_seconds": 1})
    assert done.outcome.status == FAILED
    assert "timed out after 1 s" in done.text


# --- web_search ---------------------------------------------------------------------------


def _searx_env(fake_web: FakeWeb, token: str | None = SEARX_TOKEN) -> dict[str, str]:
    env = {"SEARXNG_URL": f"{fake_web.base}/searx/"}
    if token is not None:
        env["SEARXNG_TOKEN"] = token
    return env


def test_it_lists_searxng_results_with_the_integration_token(
    run_tool: ToolRunner, fake_web: FakeWeb
) -> None:
    done = run_tool(
        "web_search",
        {"query": "tool console", "max_results": 3, "categories": "general, it", "language": "en"},
        env=_searx_env(fake_web),
        secrets={"{{searxng.SEARXNG_TOKEN}}": SEARX_TOKEN},
    )
    assert done.outcome.status == SUCCEEDED, done.text
    assert "1. Result number 1\n   https://example.org/1\n   Snippet of result 1." in done.text
    assert "3. Result number 3" in done.text
    assert "4. Result number 4" not in done.text
    assert "Related searches: related query" in done.text
    (search,) = fake_web.searches
    assert search["authorization"] == f"Bearer {SEARX_TOKEN}"
    assert search["query"]["q"] == ["tool console"]
    assert search["query"]["format"] == ["json"]
    assert search["query"]["categories"] == ["general,it"]
    assert search["query"]["language"] == ["en"]
    assert any("searching" in u for u in done.updates)


def test_it_lets_the_searxng_token_input_override_the_integration(
    run_tool: ToolRunner, fake_web: FakeWeb
) -> None:
    done = run_tool(
        "web_search",
        {"query": "override", "searxng_token": SEARX_TOKEN},
        env=_searx_env(fake_web, token="stale-integration-token"),
    )
    assert done.outcome.status == SUCCEEDED, done.text
    assert fake_web.searches[0]["authorization"] == f"Bearer {SEARX_TOKEN}"


def test_it_explains_a_refused_searxng_token(run_tool: ToolRunner, fake_web: FakeWeb) -> None:
    done = run_tool("web_search", {"query": "x"}, env=_searx_env(fake_web, token=None))
    assert done.outcome.status == FAILED
    assert "HTTP 401" in done.text
    assert 'SEARXNG_TOKEN field of the "searxng" integration' in done.text
    assert fake_web.searches[0]["authorization"] is None


def test_it_says_to_configure_searxng_when_it_is_not_set(run_tool: ToolRunner) -> None:
    done = run_tool("web_search", {"query": "anything"})
    assert done.outcome.status == FAILED
    assert "SEARXNG_URL is not set" in done.text
    assert 'configure the "searxng" integration' in done.text


# --- email_db -----------------------------------------------------------------------------

MESSAGES = [
    (1, "alice@example.com", "bob@example.com", "Lunch?", "Meet at 12?\nCheers", "2024-05-01"),
    (2, "bob@example.com", "alice@example.com", "Re: Lunch?", "Yes!", "2024-05-01"),
    (3, "carol@example.com", "alice@example.com", "Quarterly report", None, "2024-05-02"),
]


@pytest.fixture
def email_db(run_tool: ToolRunner) -> dict[str, str]:
    """An email archive beside the tool, and the env the email_db integration would give."""
    path = run_tool.tool_dir("email_db") / "email.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE messages(id INTEGER PRIMARY KEY, sender TEXT, recipient TEXT,"
            " subject TEXT, body TEXT, sent_at TEXT)"
        )
        conn.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?)", MESSAGES)
    conn.close()
    return {"EMAIL_DB_PATH": run_tool.visible_path("email_db", "email.db")}


def _message_count(run_tool: ToolRunner) -> int:
    conn = sqlite3.connect(run_tool.tool_dir("email_db") / "email.db")
    try:
        return conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    finally:
        conn.close()


def test_it_answers_a_select_as_a_readable_table(
    run_tool: ToolRunner, email_db: dict[str, str]
) -> None:
    done = run_tool(
        "email_db",
        {"sql": "SELECT id, sender, subject, body FROM messages ORDER BY id"},
        env=email_db,
    )
    assert done.outcome.status == SUCCEEDED, done.text
    lines = done.text.splitlines()
    assert lines[0].split(" | ") == ["id", "sender           ", "subject         ", "body"]
    assert lines[1].startswith("---+-")
    assert "1  | alice@example.com | Lunch?           | Meet at 12?\\nCheers" in done.text
    assert lines[4].endswith("| NULL")
    assert lines[-1] == "(3 rows)"
    assert done.updates == ["opening the email database", "running query", "fetched 3 rows"]


def test_it_returns_json_and_honours_max_rows(
    run_tool: ToolRunner, email_db: dict[str, str]
) -> None:
    done = run_tool(
        "email_db",
        {"sql": "SELECT id, subject FROM messages ORDER BY id", "format": "json", "max_rows": 2},
        env=email_db,
    )
    assert done.outcome.status == SUCCEEDED, done.text
    document = json.loads(done.text)
    assert document["columns"] == ["id", "subject"]
    assert document["rows"] == [{"id": 1, "subject": "Lunch?"}, {"id": 2, "subject": "Re: Lunch?"}]
    assert document["truncated"] is True
    table = run_tool("email_db", {"sql": "SELECT id FROM messages", "max_rows": 1}, env=email_db)
    assert "(1 row; more rows exist" in table.text


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM messages",
        "INSERT INTO messages(subject) VALUES ('spam')",
        "WITH doomed AS (SELECT 1) DELETE FROM messages",
        "SELECT 1; DROP TABLE messages",
        "ATTACH DATABASE '/tmp/other.db' AS other",
        "PRAGMA user_version = 7",
        "SELECT load_extension('/tmp/evil.so')",
    ],
)
def test_it_refuses_writes_attach_pragmas_and_extensions(
    run_tool: ToolRunner, email_db: dict[str, str], sql: str
) -> None:
    done = run_tool("email_db", {"sql": sql}, env=email_db)
    assert done.outcome.status == FAILED
    assert done.is_error
    assert "read-only" in done.text or "only one SQL statement" in done.text
    assert _message_count(run_tool) == len(MESSAGES)


def test_it_allows_read_only_pragma_tables_for_the_schema(
    run_tool: ToolRunner, email_db: dict[str, str]
) -> None:
    done = run_tool(
        "email_db", {"sql": "SELECT name FROM pragma_table_info('messages')"}, env=email_db
    )
    assert done.outcome.status == SUCCEEDED, done.text
    assert "sender" in done.text and "sent_at" in done.text


def test_it_reports_sql_errors_with_sqlites_message(
    run_tool: ToolRunner, email_db: dict[str, str]
) -> None:
    done = run_tool("email_db", {"sql": "SELECT * FROM inbox"}, env=email_db)
    assert done.outcome.status == FAILED
    assert "no such table: inbox" in done.text
    assert "sqlite_schema" in done.text


def test_it_says_to_configure_email_db_when_it_is_not_set(run_tool: ToolRunner) -> None:
    done = run_tool("email_db", {"sql": "SELECT 1"})
    assert done.outcome.status == FAILED
    assert "EMAIL_DB_PATH is not set" in done.text
    assert 'configure the "email_db" integration' in done.text


def test_it_reports_a_missing_database_file(run_tool: ToolRunner) -> None:
    missing = run_tool.visible_path("email_db", "no-such.db")
    done = run_tool("email_db", {"sql": "SELECT 1"}, env={"EMAIL_DB_PATH": missing})
    assert done.outcome.status == FAILED
    assert f"the email database {missing} does not exist" in done.text


def test_it_cancels_a_long_query(run_tool: ToolRunner, email_db: dict[str, str]) -> None:
    endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT max(i) FROM n"
    done = run_tool(
        "email_db",
        {"sql": endless},
        env=email_db,
        cancel_when=lambda update: update == "running query",
    )
    assert done.outcome.status == CANCELLED
    assert done.is_error


# --- convert_audio_to_mp3 -----------------------------------------------------------------


@pytest.fixture
def ffmpeg_installed() -> None:
    # ffprobe comes in the same package; the MP3 test reads its answer without condition.
    missing = shutil.which("ffmpeg") is None or shutil.which("ffprobe") is None
    require(missing, "ffmpeg/ffprobe are not installed (apt-get install ffmpeg)")


needs_ffmpeg = pytest.mark.usefixtures("ffmpeg_installed")


def _write_wav(path: Path, seconds: float, rate: int = 44100, tone: bool = True) -> None:
    frames = int(seconds * rate)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        if tone:
            samples = (int(8000 * math.sin(2 * math.pi * 440 * i / rate)) for i in range(frames))
            out.writeframes(b"".join(struct.pack("<h", s) for s in samples))
        else:
            out.writeframes(bytes(2 * frames))  # silence: quick to write, slow to encode


def _is_mp3(data: bytes) -> bool:
    return data.startswith(b"ID3") or (data[0] == 0xFF and data[1] & 0xE0 == 0xE0)


@pytest.fixture
def wav_input(run_tool: ToolRunner) -> str:
    _write_wav(run_tool.tool_dir("convert_audio_to_mp3") / "tone.wav", seconds=2)
    return run_tool.visible_path("convert_audio_to_mp3", "tone.wav")


@needs_ffmpeg
def test_it_converts_a_wav_into_an_mp3_artifact(run_tool: ToolRunner, wav_input: str) -> None:
    done = run_tool("convert_audio_to_mp3", {"input_path": wav_input})
    assert done.outcome.status == SUCCEEDED, done.text
    (artifact,) = done.outcome.artifacts
    assert artifact.name == "tone.mp3"
    data = artifact.path.read_bytes()
    assert artifact.size == len(data) > 1000
    assert _is_mp3(data)
    assert f"Converted {wav_input} to MP3." in done.text
    assert f"Size: {artifact.size} bytes" in done.text
    assert "Duration: 0:00:02" in done.text
    assert "Bitrate: 192k" in done.text
    assert done.updates[0].startswith("converting tone.wav")
    probe = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "stream=codec_name,bit_rate"]
        + ["-of", "json", str(artifact.path)],
        capture_output=True,
        text=True,
        check=True,
    )
    (stream,) = json.loads(probe.stdout)["streams"]
    assert stream["codec_name"] == "mp3"
    assert stream["bit_rate"] == "192000"


@needs_ffmpeg
def test_it_writes_the_output_path_at_the_chosen_bitrate(
    run_tool: ToolRunner, wav_input: str
) -> None:
    small = run_tool(
        "convert_audio_to_mp3",
        {"input_path": wav_input, "output_path": "clips/memo.mp3", "bitrate": "64k"},
    )
    large = run_tool("convert_audio_to_mp3", {"input_path": wav_input, "bitrate": "320k"})
    assert small.outcome.status == SUCCEEDED, small.text
    (artifact,) = small.outcome.artifacts
    assert artifact.name == "clips/memo.mp3"
    assert "Bitrate: 64k" in small.text
    assert "the artifact clips/memo.mp3" in small.text
    assert artifact.size < large.outcome.artifacts[0].size


@needs_ffmpeg
def test_it_says_when_mp3_caps_the_bitrate_at_a_low_sample_rate(run_tool: ToolRunner) -> None:
    _write_wav(run_tool.tool_dir("convert_audio_to_mp3") / "phone.wav", 1, rate=16000)
    path = run_tool.visible_path("convert_audio_to_mp3", "phone.wav")
    done = run_tool("convert_audio_to_mp3", {"input_path": path, "bitrate": "320k"})
    assert done.outcome.status == SUCCEEDED, done.text
    assert "Bitrate: 160k (320k requested;" in done.text


@needs_ffmpeg
def test_it_reports_a_missing_input_file(run_tool: ToolRunner) -> None:
    missing = run_tool.visible_path("convert_audio_to_mp3", "absent.wav")
    done = run_tool("convert_audio_to_mp3", {"input_path": missing})
    assert done.outcome.status == FAILED
    assert f"input file not found: {missing}" in done.text
    assert done.outcome.artifacts == []


@needs_ffmpeg
def test_it_reports_a_file_that_is_not_audio(run_tool: ToolRunner) -> None:
    (run_tool.tool_dir("convert_audio_to_mp3") / "notes.wav").write_text("not audio at all")
    path = run_tool.visible_path("convert_audio_to_mp3", "notes.wav")
    done = run_tool("convert_audio_to_mp3", {"input_path": path})
    assert done.outcome.status == FAILED
    assert "not an audio file?" in done.text


@needs_ffmpeg
def test_it_stops_ffmpeg_and_leaves_no_file_when_cancelled(run_tool: ToolRunner) -> None:
    # Ten minutes of 44.1 kHz audio take ffmpeg seconds to encode: cancelled mid-way.
    _write_wav(run_tool.tool_dir("convert_audio_to_mp3") / "long.wav", 600, rate=44100, tone=False)
    path = run_tool.visible_path("convert_audio_to_mp3", "long.wav")
    done = run_tool(
        "convert_audio_to_mp3",
        {"input_path": path, "bitrate": "320k"},
        cancel_when=lambda update: update.startswith("converting"),
    )
    assert done.outcome.status == CANCELLED
    assert done.is_error
    assert done.outcome.artifacts == []
