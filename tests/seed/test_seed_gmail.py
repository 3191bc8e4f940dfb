"""The seed's gmail tool (TypeScript, seed/tools/gmail), run for real: the runner and its
bubblewrap sandbox, the egress policy and the Celery worker. A `stand_in` server
(tests/support/stand_in.py) plays gmail.googleapis.com and serves payloads written from
Google's REST reference (tests/data/gmail); the access token of the connected `google`
integration reaches the tool as GOOGLE_ACCESS_TOKEN.

Most tests run the tool in this process, the stand-in allowed by CONSOLE_TOOL_NETWORK_ALLOW.
The worker tests at the end take the production path: a worker whose /etc/hosts names
gmail.googleapis.com as a private address of a test network namespace
(tests/support/egress.py), refused to tools unless an allowance opens it, and the only one
that does is what the google integration type declares (api_hosts: gmail.googleapis.com)."""

from __future__ import annotations

import base64
import json
import textwrap
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.utils import timezone

from tests.seed.test_seed_tools import ToolRunner, run_tool  # noqa: F401 (fixture)
from tests.support import egress as egress_support
from tests.support import in_ci, require, tool_files
from tests.support.integrations import fernet_keys  # noqa: F401 (fixture)
from tests.support.oauth import record_of
from tests.support.stand_in import Reply, Request, StandIn
from tests.support.worker import (
    REDIS_URL,
    CeleryWorker,
    _configure_publisher,
    redis_reachable,
    skip_or_fail,
    wait_for_run,
    worker_database_url,
)
from tools_app.audit import Actor
from tools_app.catalog import bundle
from tools_app.catalog.versions import save_version
from tools_app.http_tools.context import validation_context
from tools_app.integrations import vault
from tools_app.integrations.service import create_integration
from tools_app.manifest.folder import validate_tool_dir
from tools_app.models import Run, RunArtifact, Tool
from tools_app.models.egress import EgressException
from tools_app.models.oauth import OAuthConnection, OAuthState
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runner import FAILED, isolation_level
from tools_app.runs import execute, start

SEED = Path(__file__).resolve().parents[2] / "seed" / "tools" / "gmail"
DATA = Path(__file__).resolve().parents[1] / "data" / "gmail"
API = "https://gmail.googleapis.com/gmail/v1/users/me"
TOKEN = "ya29.a0-gmail-stand-in-t0ken-5e1f"  # distinctive: results must never carry it
# The canaries: the console keeps them; no run record, tool or request may carry them.
REFRESH = "1//09gmail-stand-in-refresh-canary-3b8e"
CLIENT_SECRET = "gmail-tests-client-secret-canary-91d2"
PAGE_2 = "09876543210987654321"

pytestmark = pytest.mark.django_db(transaction=True)


def payload(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))["body"]


ALTERNATIVE = payload("message_multipart_alternative.json")
HTML_ONLY = payload("message_html_only.json")
LATIN1 = payload("message_iso_8859_1.json")
THREAD = payload("thread.json")
ERRORS = payload("errors.json")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


# About 300,000 characters of numbered lines, so a cut is visible; the tool trims the last
# newline, so the whole body it reads is HUGE_TEXT.strip().
HUGE_TEXT = "".join(f"line {i:06d} of the very long report\n" for i in range(8333))
HUGE_CHARS = len(HUGE_TEXT.strip())


def _huge(message_id: str, thread_id: str) -> dict[str, Any]:
    """A message with a huge text/plain body and an HTML alternative the tool must not pick."""
    text = HUGE_TEXT
    html = f"<p>{text}</p>".encode()
    return {
        "id": message_id,
        "threadId": thread_id,
        "labelIds": ["INBOX"],
        "snippet": "line 000000 of the very long report",
        "historyId": "4471300",
        "internalDate": "1710490502000",
        "sizeEstimate": 2 * len(HUGE_TEXT),
        "payload": {
            "partId": "",
            "mimeType": "multipart/alternative",
            "filename": "",
            "headers": [
                {"name": "From", "value": "Reports <reports@example.com>"},
                {"name": "Subject", "value": "The long report"},
                {"name": "Content-Type", "value": 'multipart/alternative; boundary="b1"'},
            ],
            "body": {"size": 0},
            "parts": [
                {
                    "partId": "0",
                    "mimeType": "text/plain",
                    "filename": "",
                    "headers": [{"name": "Content-Type", "value": "text/plain; charset=utf-8"}],
                    "body": {"size": len(text), "data": _b64url(text.encode())},
                },
                {
                    "partId": "1",
                    "mimeType": "text/html",
                    "filename": "",
                    "headers": [{"name": "Content-Type", "value": "text/html; charset=utf-8"}],
                    "body": {"size": len(html), "data": _b64url(html)},
                },
            ],
        },
    }


HUGE = _huge("18e4c1d2a7b3fb16", "18e4c1d2a7b3fb16")
HUGE_THREAD = {
    "id": "18e4c1d2a7b3fb17",
    "snippet": "line 000000 of the very long report",
    "historyId": "4471310",
    "messages": [
        _huge("18e4c1d2a7b3fb17", "18e4c1d2a7b3fb17"),
        _huge("18e4c1d2a7b3fb18", "18e4c1d2a7b3fb17"),
    ],
}


NOTE = b"See the notes attached.\n"
TEXT_ATTACHMENT = {
    "id": "18e4c1d2a7b3f908",
    "threadId": "18e4c1d2a7b3f908",
    "labelIds": ["INBOX"],
    "snippet": "See the notes attached.",
    "historyId": "4471140",
    "internalDate": "1710490502000",
    "sizeEstimate": 4096,
    "payload": {
        "partId": "",
        "mimeType": "multipart/mixed",
        "filename": "",
        "headers": [
            {"name": "Subject", "value": "Notes"},
            {"name": "Content-Type", "value": 'multipart/mixed; boundary="b2"'},
        ],
        "body": {"size": 0},
        "parts": [
            {
                "partId": "0",
                "mimeType": "text/plain",
                "filename": "",
                "headers": [{"name": "Content-Type", "value": "text/plain; charset=utf-8"}],
                "body": {"size": len(NOTE), "data": _b64url(NOTE).rstrip("=")},
            },
            {
                # A text file sent as an attachment: listed, never read as the body.
                "partId": "1",
                "mimeType": "text/plain",
                "filename": "notes.txt",
                "headers": [
                    {
                        "name": "Content-Type",
                        "value": 'text/plain; charset=utf-8; name="notes.txt"',
                    },
                    {"name": "Content-Disposition", "value": 'attachment; filename="notes.txt"'},
                ],
                "body": {"attachmentId": "ANGjdJ9notesTxtAttachmentId", "size": 1234},
            },
        ],
    },
}


def _metadata(message: dict[str, Any], wanted: list[str]) -> dict[str, Any]:
    """format=metadata: the message's ids, labels and the asked headers, no body."""
    slim = {k: v for k, v in message.items() if k != "payload"}
    names = {w.lower() for w in wanted}
    headers = [h for h in message["payload"]["headers"] if h["name"].lower() in names]
    slim["payload"] = {"partId": "", "mimeType": message["payload"]["mimeType"], "filename": "",
                       "headers": headers, "body": {"size": 0}}  # fmt: skip
    return slim


def _json(status: int, data: Any, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, json.dumps(data).encode(), "application/json; charset=UTF-8",
                 dict(headers or {}))  # fmt: skip


class Gmail:
    """Answers users.messages.list/get, users.threads.get and users.labels.list as the
    reference documents them, or every request with `fail` when a test sets it; `seen`
    holds each request's path, query and Authorization header."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.fail: tuple[int, dict, dict[str, str]] | None = None
        self.messages = {
            m["id"]: m for m in (ALTERNATIVE, HTML_ONLY, LATIN1, HUGE, TEXT_ATTACHMENT)
        }
        self.messages.update({m["id"]: m for m in THREAD["messages"]})
        self.threads = {t["id"]: t for t in (THREAD, HUGE_THREAD)}
        self.server: StandIn | None = None

    def answer(self, request: Request) -> Reply:
        query = urllib.parse.parse_qs(request.query)
        auth = request.header("Authorization")
        self.seen.append({"path": request.route, "query": query, "authorization": auth})
        if self.fail is not None:
            return _json(*self.fail)
        if auth != f"Bearer {TOKEN}":
            return _json(401, ERRORS["401"], {"WWW-Authenticate": 'Bearer realm="x"'})
        path = request.route.removeprefix("/gmail/v1/users/me")
        if path == "/messages":
            page = query.get("pageToken", [""])[0]
            return _json(200, payload("list_page_2.json" if page == PAGE_2 else "list_page_1.json"))
        if path.startswith("/messages/") and path[10:] in self.messages:
            message = self.messages[path[10:]]
            if query.get("format") == ["metadata"]:
                message = _metadata(message, query.get("metadataHeaders", []))
            return _json(200, message)
        if path.startswith("/threads/") and path[9:] in self.threads:
            return _json(200, self.threads[path[9:]])
        if path == "/labels":
            return _json(200, payload("labels.json"))
        return _json(404, ERRORS["404"])

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.port

    @property
    def base(self) -> str:
        assert self.server is not None
        return f"{self.server.url}/gmail/v1/users/me"

    def requests(self) -> str:
        """Every request as received, headers included, as text (for the canaries)."""
        assert self.server is not None
        sent = [(r.method, r.path, r.headers, r.body.decode(errors="replace"))
                for r in self.server.seen]  # fmt: skip
        return json.dumps(sent)


def serve_gmail(stand_in: Callable[..., StandIn], **where: Any) -> Gmail:
    """A Gmail stand-in, GET only and keeping connections open as Google's API does."""
    gmail = Gmail()
    gmail.server = stand_in(gmail.answer, http11=True, methods=("GET",), **where)
    return gmail


def _tool_files(base: str) -> dict[str, bytes]:
    """The seed tool as shipped, its API base pointed at `base`."""
    files = bundle.read_tool_dir(SEED)
    source = files["index.ts"].decode()
    assert source.count(API) == 1
    files["index.ts"] = source.replace(API, base).encode()
    return files


def connect_google() -> None:
    """A google integration connected as the OAuth callback leaves it: an access token
    valid for an hour and a refresh token, both sealed by the vault (the connect flow itself
    is tested against a real authorization server in tests/integrations/test_oauth.py)."""
    integration = create_integration(
        "google",
        "google",
        actor=Actor.system(),
        values={"client_id": "gmail-tests.apps.googleusercontent.com"},
        secrets={"client_secret": CLIENT_SECRET},
    )
    ciphertext, key_id = vault.encrypt(TOKEN)
    now = timezone.now()
    OAuthConnection.objects.create(
        integration=integration,
        state=OAuthState.CONNECTED,
        access_ciphertext=ciphertext,
        refresh_ciphertext=vault.encrypt(REFRESH)[0],
        key_id=key_id,
        expires_at=now + timedelta(hours=1),
        account="reader@example.com",
        scope="openid email https://www.googleapis.com/auth/gmail.readonly",
        connected_at=now,
    )


@pytest.fixture
def gmail(settings, fernet_keys, stand_in) -> Gmail:  # noqa: F811
    fake = serve_gmail(stand_in)
    settings.ALLOWED_HOSTS = ["console.test"]
    settings.TOOL_NETWORK_ALLOW = f"127.0.0.1:{fake.port}"
    fernet_keys("A")
    connect_google()
    save_version("gmail", _tool_files(fake.base), actor=Actor.system(), publish=True)
    return fake


def run_gmail(params: dict[str, Any]) -> Run:
    tool = Tool.objects.get(name="gmail")
    run = start.start_run(
        tool.published_version, params, actor=Actor.system(), via=RunVia.API, enqueue=False
    )
    return execute.execute_run(run.pk)


def text_of(run: Run) -> str:
    text = "\n".join(item["text"] for item in run.result["content"])
    assert TOKEN not in text and TOKEN not in json.dumps(run.result)
    no_secrets_in(record_of(run))
    return text


def no_secrets_in(kept: str) -> None:
    """Neither token nor the client secret in `kept` (a run's record, what a tool saw)."""
    for secret in (TOKEN, REFRESH, CLIENT_SECRET):
        assert secret not in kept


def succeeded(params: dict[str, Any]) -> str:
    run = run_gmail(params)
    assert run.status == RunStatus.SUCCEEDED, run.result
    return text_of(run)


def failed(params: dict[str, Any]) -> str:
    run = run_gmail(params)
    assert run.status == RunStatus.FAILED, run.result
    assert run.result["isError"] is True
    text = text_of(run)
    assert text.startswith("Error: ")
    return text


def artifact(run: Run, name: str) -> Any:
    row = run.artifacts.get(name=name)
    return json.loads(RunArtifact.objects.content_of(row.pk))


# --- search and pagination ---------------------------------------------------------------


def test_it_searches_with_the_query_labels_and_page_size_and_the_token_as_bearer(gmail):
    text = succeeded({"query": "from:alice@example.com", "label_ids": ["INBOX", "UNREAD"],
                      "max_results": 2})  # fmt: skip

    listed = gmail.seen[0]
    assert listed["path"] == "/gmail/v1/users/me/messages"
    assert listed["query"] == {"q": ["from:alice@example.com"], "labelIds": ["INBOX", "UNREAD"],
                               "maxResults": ["2"]}  # fmt: skip
    assert {s["authorization"] for s in gmail.seen} == {f"Bearer {TOKEN}"}
    reads = sorted(s["path"].rsplit("/", 1)[1] for s in gmail.seen[1:])
    assert reads == ["18e4c1d2a7b3f905", "18e4c1d2a7b3f906"]
    assert all(s["query"]["format"] == ["metadata"] for s in gmail.seen[1:])

    assert text.startswith(
        '2 message(s) matching query "from:alice@example.com" and labels INBOX, UNREAD'
        " (resultSizeEstimate 4).\n"
        f'More results: call again with page_token "{PAGE_2}".'
    )
    assert (
        "1. Message 18e4c1d2a7b3f905 (thread 18e4c1d2a7b3f905)\n"
        "   From: Alice Example <alice@example.com>\n"
        "   To: Bob Example <bob@example.com>\n"
        "   Date: Tue, 12 Mar 2024 09:15:02 +0100\n"
        "   Subject: Quarterly numbers\n"
        "   Received: 2024-03-12T08:15:02.000Z\n"
        "   Labels: INBOX, UNREAD, IMPORTANT, CATEGORY_PERSONAL\n"
        "   Snippet: Hi Bob, the Q1 numbers are attached: revenue up 12 %. Grüße, Alice"
    ) in text
    assert "2. Message 18e4c1d2a7b3f906" in text and "Subject: March news" in text
    assert "revenue up 12 %.\n" not in text  # no bodies unless asked


def test_it_pages_on_with_the_next_page_token_and_notes_a_message_gone_meanwhile(gmail):
    text = succeeded({"query": "from:alice@example.com", "page_token": PAGE_2})

    assert gmail.seen[0]["query"]["pageToken"] == [PAGE_2]
    assert gmail.seen[0]["query"]["maxResults"] == ["10"]
    assert "1. Message 18e4c1d2a7b3f907" in text and "Subject: Gruss aus Koeln" in text
    assert "From: Jürgen <juergen@example.de>" in text
    assert "No further page." in text
    assert "2. Message" not in text
    assert "could not be read any more (deleted?): 18e4c1d2a7b3f999" in text


def test_it_includes_bodies_in_a_search_when_asked(gmail):
    text = succeeded({"include_bodies": True, "max_results": 2})
    assert all(s["query"]["format"] == ["full"] for s in gmail.seen[1:])
    assert "   the Q1 numbers are attached: revenue up 12 %.\n" in text
    assert "   (HTML-only message, shown as text)\n" in text
    assert "\n\n---\n\n" in text


def test_it_caps_max_results_at_fifty(gmail):
    text = succeeded({"max_results": 500})
    assert gmail.seen[0]["query"]["maxResults"] == ["50"]
    assert "Note: max_results is capped at 50 (500 was asked)." in text


# --- reading messages --------------------------------------------------------------------


def test_it_reads_the_plain_part_of_a_multipart_alternative_and_lists_the_attachment(gmail):
    text = succeeded({"operation": "get_message", "message_id": "18e4c1d2a7b3f905"})

    (read,) = gmail.seen
    assert read["path"] == "/gmail/v1/users/me/messages/18e4c1d2a7b3f905"
    assert read["query"] == {"format": ["full"]}
    assert text == (
        "Message 18e4c1d2a7b3f905 (thread 18e4c1d2a7b3f905)\n"
        "From: Alice Example <alice@example.com>\n"
        "To: Bob Example <bob@example.com>\n"
        "Date: Tue, 12 Mar 2024 09:15:02 +0100\n"
        "Subject: Quarterly numbers\n"
        "Received: 2024-03-12T08:15:02.000Z\n"
        "Labels: INBOX, UNREAD, IMPORTANT, CATEGORY_PERSONAL\n"
        "Attachment: q1-numbers.pdf (application/pdf, 48213 bytes,"
        " attachmentId ANGjdJ8wq1numbersPdfAttachmentId)\n"
        "\n"
        "Hi Bob,\n\nthe Q1 numbers are attached: revenue up 12 %.\n\nGrüße,\nAlice"
    )


def test_it_turns_an_html_only_message_into_text(gmail):
    text = succeeded({"operation": "get_message", "message_id": "18e4c1d2a7b3f906"})
    body = text.split("(HTML-only message, shown as text)\n", 1)[1]
    assert body == (
        "March news\n\n"
        "Our release notes (https://example.com/release?a=1&b=2) are out — read them.\n\n"
        "- faster search\n- fewer bugs\n\n"
        "Write to team@example.com.\nCafé & more – ☺"
    )
    for absent in ("hotpink", "tracker", "never shown", "hidden comment", "Newsletter", "<"):
        assert absent not in body


def test_it_decodes_an_unpadded_iso_8859_1_body_in_its_charset(gmail):
    data = LATIN1["payload"]["body"]["data"]
    assert not data.endswith("=") and ("-" in data or "_" in data)  # the URL alphabet, unpadded
    text = succeeded({"operation": "get_message", "message_id": "18e4c1d2a7b3f907"})
    assert text.endswith("\n\nGrüße aus Köln!\nDas Café öffnet um 9 Uhr; Preis: 3½ £ (¿sí?).")

    as_json = json.loads(succeeded({"operation": "get_message", "message_id": "18e4c1d2a7b3f907",
                                    "format": "json"}))  # fmt: skip
    body = as_json["message"]["body"]
    assert body["mimeType"] == "text/plain" and body["charset"] == "iso-8859-1"
    assert body["text"].startswith("Grüße aus Köln!") and body["truncated"] is False


def test_it_lists_a_text_file_attachment_instead_of_reading_it_as_the_body(gmail):
    text = succeeded({"operation": "get_message", "message_id": "18e4c1d2a7b3f908"})
    assert text.endswith(
        "Subject: Notes\n"
        "Received: 2024-03-15T08:15:02.000Z\n"
        "Labels: INBOX\n"
        "Attachment: notes.txt (text/plain, 1234 bytes, attachmentId ANGjdJ9notesTxtAttachmentId)\n"
        "\n"
        "See the notes attached."
    )


def test_it_answers_json_with_the_apis_field_names(gmail):
    answer = json.loads(succeeded({"operation": "get_message", "message_id": "18e4c1d2a7b3f905",
                                   "format": "json"}))  # fmt: skip
    message = answer["message"]
    assert set(message) == {"id", "threadId", "labelIds", "snippet", "historyId", "internalDate",
                            "sizeEstimate", "headers", "body", "attachments"}  # fmt: skip
    assert (message["id"], message["historyId"], message["internalDate"]) == (
        "18e4c1d2a7b3f905", "4471102", "1710231302000")  # fmt: skip
    assert message["sizeEstimate"] == 67032
    assert [h["name"] for h in message["headers"]] == ["From", "To", "Date", "Subject"]
    assert message["attachments"] == [{
        "partId": "1", "filename": "q1-numbers.pdf", "mimeType": "application/pdf",
        "size": 48213, "attachmentId": "ANGjdJ8wq1numbersPdfAttachmentId"}]  # fmt: skip
    assert message["body"]["mimeType"] == "text/plain"
    assert answer["truncated"] is False


def test_it_reads_a_thread_in_order(gmail):
    text = succeeded({"operation": "get_thread", "thread_id": "18e4c1d2a7b3f905"})
    assert gmail.seen[0]["path"] == "/gmail/v1/users/me/threads/18e4c1d2a7b3f905"
    assert gmail.seen[0]["query"] == {"format": ["full"]}
    assert text.startswith("Thread 18e4c1d2a7b3f905: 2 message(s).\n")
    first = text.index("--- message 1 of 2 ---\nMessage 18e4c1d2a7b3f905")
    second = text.index("--- message 2 of 2 ---\nMessage 18e4c9f0b1c2d3e4")
    assert first < second
    assert "Subject: Re: Quarterly numbers" in text
    assert "Thanks Alice, looks good.\n\nOn Tue, 12 Mar 2024 Alice wrote:\n>" in text

    one = succeeded({"operation": "get_thread", "thread_id": "18e4c1d2a7b3f905", "max_results": 1})
    assert "2 message(s), 1 shown" in one and "18e4c9f0b1c2d3e4" not in one
    assert "Note: the thread has 2 messages; the first 1 are shown (max_results)." in one


# --- bounded output and output_path ------------------------------------------------------


def test_it_cuts_a_huge_body_at_the_per_body_cap_with_a_truncated_marker(gmail):
    text = succeeded({"operation": "get_message", "message_id": HUGE["id"], "max_body_chars": 1000})
    assert len(text) < 2000
    assert "line 000000 of the very long report" in text
    assert "<p>" not in text  # the plain part, not the HTML one
    assert (
        f"[truncated: 1000 of {HUGE_CHARS} characters of this body shown; raise max_body_chars"
    ) in text
    assert "[truncated: bodies are capped at 1000 characters each and 20000 in all;" in text

    answer = json.loads(succeeded({"operation": "get_message", "message_id": HUGE["id"],
                                   "format": "json"}))  # fmt: skip
    body = answer["message"]["body"]
    assert len(body["text"]) == 4000  # the default per-body cap
    assert body["truncated"] is True and body["length"] == HUGE_CHARS
    assert answer["truncated"] is True


def test_it_stops_at_the_total_cap_across_the_messages_of_a_call(gmail):
    answer = json.loads(succeeded({"operation": "get_thread", "thread_id": HUGE_THREAD["id"],
                                   "max_body_chars": 5000, "max_total_chars": 7000,
                                   "format": "json"}))  # fmt: skip
    first, second = (m["body"] for m in answer["thread"]["messages"])
    assert len(first["text"]) == 5000 and first["truncated"] is True
    assert len(second["text"]) <= 2000 and second["truncated"] is True
    assert len(first["text"]) + len(second["text"]) <= 7000
    assert answer["truncated"] is True


def test_it_writes_the_full_data_to_output_path_and_answers_with_a_summary(gmail):
    run = run_gmail({"operation": "get_message", "message_id": HUGE["id"],
                     "output_path": "mail/report.json"})  # fmt: skip
    assert run.status == RunStatus.SUCCEEDED, run.result
    text = text_of(run)
    assert len(text) < 2000
    assert "it is attached to this run as the artifact mail/report.json" in text
    assert "line 000000" not in text.split("\n\n", 1)[1].split("Snippet:")[0]
    full = artifact(run, "mail/report.json")
    assert full["operation"] == "get_message"
    body = full["message"]["body"]
    assert body["truncated"] is False and body["text"] == HUGE_TEXT.strip()
    assert {h["name"] for h in full["message"]["headers"]} >= {"From", "Subject", "Content-Type"}


def test_it_writes_every_message_of_a_search_with_its_page_token_to_output_path(gmail):
    run = run_gmail({"query": "from:alice@example.com", "output_path": "search.json"})
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert all(s["query"]["format"] == ["full"] for s in gmail.seen[1:])
    full = artifact(run, "search.json")
    assert full["nextPageToken"] == PAGE_2 and full["resultSizeEstimate"] == 4
    assert [m["id"] for m in full["messages"]] == ["18e4c1d2a7b3f905", "18e4c1d2a7b3f906"]
    assert full["messages"][1]["body"]["mimeType"] == "text/html"
    assert "Café & more" in full["messages"][1]["body"]["text"]


# --- labels ------------------------------------------------------------------------------


def test_it_lists_the_labels_system_ones_first(gmail):
    text = succeeded({"operation": "list_labels"})
    assert gmail.seen[0]["path"] == "/gmail/v1/users/me/labels"
    assert text == (
        "5 label(s). Use the ids in label_ids; in a query, use label:<name>.\n"
        "\n"
        "System labels:\n"
        "- INBOX (id INBOX, type system, labelListVisibility labelShow,"
        " messageListVisibility hide)\n"
        "- SENT (id SENT, type system, labelListVisibility labelHide,"
        " messageListVisibility hide)\n"
        "- UNREAD (id UNREAD, type system)\n"
        "\n"
        "User labels:\n"
        "- Projects/Q1 (id Label_3, type user, labelListVisibility labelShowIfUnread,"
        " messageListVisibility show)\n"
        "- Receipts (id Label_12, type user, labelListVisibility labelShow,"
        " messageListVisibility show)"
    )
    labels = json.loads(succeeded({"operation": "list_labels", "format": "json"}))["labels"]
    receipts = next(label for label in labels if label["id"] == "Label_12")
    assert receipts["color"] == {"textColor": "#ffffff", "backgroundColor": "#16a766"}


# --- errors ------------------------------------------------------------------------------


REFRESH_OR_RECONNECT = (
    '(HTTP 401: Invalid Credentials). The console refreshes the "google" integration\'s token'
    " before a run, so run the tool again; if it fails again, an admin must reconnect the"
    ' "google" integration.'
)
NO_SCOPE = (
    "(HTTP 403, insufficient scope: Request had insufficient authentication scopes.): the"
    " token was not granted the gmail.readonly scope"
)
RATE_LIMITED = (
    "(HTTP 429 Too Many Requests: Too many concurrent requests for user): too many requests"
    " for this account. Retry after 30 s."
)


@pytest.mark.parametrize(
    ("status", "body", "headers", "expected"),
    [
        (401, "401", {}, REFRESH_OR_RECONNECT),
        (403, "403_scope", {}, NO_SCOPE),
        (403, "403_quota", {}, "(HTTP 403, daily quota exceeded: Daily Limit Exceeded)"),
        (429, "429", {"Retry-After": "30"}, RATE_LIMITED),
    ],
    ids=["401", "403-scope", "403-quota", "429"],
)
def test_it_explains_gmails_errors_in_words(gmail, status, body, headers, expected):
    gmail.fail = (status, ERRORS[body], headers)
    text = failed({"operation": "list_labels"})
    assert expected in text
    assert "{" not in text  # words, not the JSON error body


def test_it_says_which_message_was_not_found(gmail):
    text = failed({"operation": "get_message", "message_id": "18e4c1d2a7b3f000"})
    assert text == (
        "Error: Gmail found no message with id 18e4c1d2a7b3f000 (HTTP 404: Requested entity was"
        " not found.): check the id; it may have been deleted, or belong to another account."
    )


def test_it_refuses_bad_inputs_before_calling_gmail(gmail):
    assert "message_id is required" in failed({"operation": "get_message"})
    assert "thread_id is required" in failed({"operation": "get_thread"})
    assert "max_results must be at least 1" in failed({"max_results": 0})
    assert gmail.seen == []


def test_it_reaches_gmail_only_where_the_egress_policy_allows(gmail, settings):
    settings.TOOL_NETWORK_ALLOW = ""
    text = failed({"operation": "list_labels"})
    assert f"could not reach Gmail at http://127.0.0.1:{gmail.port}" in text
    assert gmail.seen == []


def test_it_names_the_google_integration_when_none_is_connected(
    settings,
    fernet_keys,  # noqa: F811
    stand_in,
):
    fake = serve_gmail(stand_in)
    settings.TOOL_NETWORK_ALLOW = f"127.0.0.1:{fake.port}"
    save_version("gmail", _tool_files(fake.base), actor=Actor.system(), publish=True)
    run = run_gmail({"operation": "list_labels"})
    assert run.status == RunStatus.FAILED
    assert "integration 'google' is not configured" in text_of(run)
    assert fake.seen == []


def test_it_says_to_connect_google_when_it_runs_without_a_token(
    run_tool: ToolRunner,  # noqa: F811 (the fixture)
) -> None:
    """The tool's own check, for a loader that runs it outside the console (the console
    refuses the run before, as above): the runner and sandbox, no GOOGLE_ACCESS_TOKEN."""
    done = run_tool("gmail", {"operation": "list_labels"})
    assert done.outcome.status == FAILED
    assert "gmail is not connected: GOOGLE_ACCESS_TOKEN is not set" in done.text
    assert 'connect the "google" integration' in done.text


# --- the tool as shipped -----------------------------------------------------------------


def test_the_tool_validates_and_declares_the_google_integration_read_only():
    result = validate_tool_dir(SEED, context=validation_context())
    assert result.ok and [str(p) for p in result.problems] == []
    manifest = result.manifest
    assert manifest.language == "typescript" and manifest.integrations == ("google",)
    assert manifest.network is True
    assert manifest.extra["annotations"]["readOnlyHint"] is True
    assert tuple(manifest.inputs["operation"].values) == (
        "search", "get_message", "get_thread", "list_labels")  # fmt: skip
    assert manifest.inputs["access_token"].sensitive
    source = (SEED / "index.ts").read_text()
    assert f"const API = '{API}';" in source
    assert "method:" not in source  # GET only: a read-only tool


# --- the production path: the Celery worker, the sandbox, the google type's allowance -----

# Gmail by its own name, on the port the google type opens to the tools declaring it
# (api_hosts: gmail.googleapis.com, so https's 443); plain HTTP, as no certificate for
# Google's name could be made that the tool's Node would trust.
GOOGLE_API = "http://gmail.googleapis.com:443/gmail/v1/users/me"


@dataclass
class GoogleHost:
    hosts: egress_support.EgressHosts
    worker: CeleryWorker

    @property
    def allowance(self) -> str:
        """The line of a run's network policy that the google type's api_hosts make."""
        return f"- {self.hosts.private}:443 (integration google)"


@pytest.fixture(scope="module")
def google_host(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[GoogleHost]:
    """A worker of its own whose /etc/hosts (which its sandboxes get too) names
    gmail.googleapis.com as the test namespace's private address: refused to every tool
    unless an allowance opens it."""
    require(isolation_level()[0] != "bwrap", "the egress policy needs bubblewrap")
    with django_db_blocker.unblock():
        database_url = worker_database_url()
    if database_url is None:
        skip_or_fail("the worker needs a file or PostgreSQL test database")
    if not redis_reachable() and in_ci():
        pytest.fail(f"Redis is required in CI but does not answer at {REDIS_URL}")
    with egress_support.test_hosts() as hosts:
        root = tmp_path_factory.mktemp("gmail-worker")
        etc_hosts = root / "hosts"
        etc_hosts.write_text(
            Path("/etc/hosts").read_text() + f"\n{hosts.private} gmail.googleapis.com\n"
        )
        worker = CeleryWorker(
            root=root,
            broker_url=REDIS_URL if redis_reachable() else "filesystem://",
            queue=f"test-gmail-{uuid.uuid4().hex[:8]}",
            database_url=database_url,
            encryption_key=Fernet.generate_key().decode(),
            concurrency=1,
            prefix=egress_support.with_file_at("/etc/hosts", etc_hosts),
        )
        undo = _configure_publisher(worker)
        worker.start()
        try:
            yield GoogleHost(hosts, worker)
        finally:
            worker.stop()
            undo()


@pytest.fixture
def google(google_host, settings, stand_in) -> Gmail:
    """Gmail at gmail.googleapis.com:443, the google integration connected under the
    worker's key and the seed tool calling Gmail by that name. No CONSOLE_TOOL_NETWORK_ALLOW
    and no System page exception: the worker has none."""
    settings.CONSOLE_ENCRYPTION_KEYS = [google_host.worker.encryption_key]
    settings.ARTIFACTS_PATH = google_host.worker.state_dir / "artifacts"
    vault.clear_cache()
    hosts = google_host.hosts
    fake = serve_gmail(stand_in, host=hosts.private, port=443, netns=hosts.netns_path)
    connect_google()
    save_version("gmail", _tool_files(GOOGLE_API), actor=Actor.system(), publish=True)
    return fake


def in_worker(google_host: GoogleHost, params: dict[str, Any], name: str = "gmail") -> Run:
    """Queue the run as the console does and wait for the worker to finish it."""
    tool = Tool.objects.get(name=name)
    run = start.start_run(tool.published_version, params, actor=Actor.system(), via=RunVia.API)
    worker = google_host.worker
    run = wait_for_run(run.pk, (RunStatus.SUCCEEDED, RunStatus.FAILED), worker=worker)
    assert run.worker and run.isolation == "bwrap"
    return run


def through_the_allowance(google_host: GoogleHost, gmail: Gmail, run: Run) -> None:
    """The run had the google type's allowance, and the stand-in got the connected
    account's access token and nothing else of the console's."""
    assert google_host.allowance in run.network_policy.splitlines()
    assert gmail.seen and {s["authorization"] for s in gmail.seen} == {f"Bearer {TOKEN}"}
    sent = gmail.requests()
    assert REFRESH not in sent and CLIENT_SECRET not in sent


@pytest.mark.worker
@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (
            {"operation": "get_message", "message_id": "18e4c1d2a7b3f905"},
            ["Attachment: q1-numbers.pdf (application/pdf, 48213 bytes,",
             "\n\nHi Bob,\n\nthe Q1 numbers are attached: revenue up 12 %.\n\nGrüße,\nAlice"],
        ),
        (
            {"operation": "get_message", "message_id": "18e4c1d2a7b3f906"},
            ["(HTML-only message, shown as text)\nMarch news\n\n",
             "Write to team@example.com.\nCafé & more – ☺"],
        ),
        (
            {"operation": "get_message", "message_id": "18e4c1d2a7b3f907"},
            ["\n\nGrüße aus Köln!\nDas Café öffnet um 9 Uhr; Preis: 3½ £ (¿sí?)."],
        ),
        (
            {"operation": "get_message", "message_id": HUGE["id"], "max_body_chars": 1000},
            ["line 000000 of the very long report",
             f"[truncated: 1000 of {HUGE_CHARS} characters of this body shown;"],
        ),
        (
            {"query": "from:alice@example.com", "max_results": 2},
            ['2 message(s) matching query "from:alice@example.com" (resultSizeEstimate 4).',
             f'More results: call again with page_token "{PAGE_2}".',
             "Subject: Quarterly numbers", "Subject: March news"],
        ),
        (
            {"query": "from:alice@example.com", "page_token": PAGE_2},
            ["1. Message 18e4c1d2a7b3f907", "No further page.",
             "could not be read any more (deleted?): 18e4c1d2a7b3f999"],
        ),
    ],
    ids=["multipart", "html-only", "iso-8859-1", "huge", "first-page", "next-page"],
)  # fmt: skip
def test_it_reads_gmail_through_the_worker_by_the_google_types_allowance(
    google_host, google, params, expected
):
    run = in_worker(google_host, params)
    assert run.status == RunStatus.SUCCEEDED, run.result
    text = text_of(run)
    for part in expected:
        assert part in text
    assert "<p>" not in text
    through_the_allowance(google_host, google, run)


@pytest.mark.worker
@pytest.mark.parametrize(
    ("fail", "params", "expected"),
    [
        ((401, ERRORS["401"], {}), {"operation": "list_labels"}, REFRESH_OR_RECONNECT),
        ((403, ERRORS["403_scope"], {}), {"operation": "list_labels"}, NO_SCOPE),
        (None, {"operation": "get_message", "message_id": "18e4c1d2a7b3f000"},
         "Gmail found no message with id 18e4c1d2a7b3f000 (HTTP 404: Requested entity was"
         " not found.)"),
        ((429, ERRORS["429"], {"Retry-After": "30"}), {"operation": "list_labels"},
         RATE_LIMITED),
    ],
    ids=["401", "403", "404", "429"],
)  # fmt: skip
def test_it_explains_gmails_errors_in_words_through_the_worker(
    google_host, google, fail, params, expected
):
    google.fail = fail
    run = in_worker(google_host, params)
    assert run.status == RunStatus.FAILED, run.result
    text = text_of(run)
    assert text.startswith("Error: ") and expected in text
    assert "{" not in text
    through_the_allowance(google_host, google, run)


@pytest.mark.worker
@pytest.mark.parametrize("where", ["another port of that host", "the host's loopback"])
def test_it_reaches_no_host_the_google_type_does_not_declare(google_host, google, stand_in, where):
    """The type opens gmail.googleapis.com:443, not that address's other ports nor
    anything else; the google integration connected changes nothing there."""
    hosts = google_host.hosts
    if where == "another port of that host":
        other = serve_gmail(stand_in, host=hosts.private, port=8443, netns=hosts.netns_path)
        base = "http://gmail.googleapis.com:8443/gmail/v1/users/me"
    else:
        other = serve_gmail(stand_in)
        base = other.base
    save_version("gmail", _tool_files(base), actor=Actor.system(), publish=True)
    run = in_worker(google_host, {"operation": "list_labels"})
    assert run.status == RunStatus.FAILED, run.result
    origin = base.removesuffix("/gmail/v1/users/me")
    assert f"could not reach Gmail at {origin}" in text_of(run)
    assert other.seen == [] and google.seen == []
    assert google_host.allowance in run.network_policy.splitlines()


# A tool declaring google (or not) that calls `url` with the token it got and shows its
# whole environment: where a refresh token or client secret handed to tools would show.
ENV_PROBE_PY = textwrap.dedent(
    """
    import json, os, urllib.request

    def execute(tool_call_id, params, signal, on_update):
        token = os.environ.get("GOOGLE_ACCESS_TOKEN", "")
        request = urllib.request.Request(
            params["url"], headers={"Authorization": "Bearer " + token}
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                reached = answer.status
        except Exception as exc:
            reached = repr(exc)
        seen = {"reached": reached, "env": dict(os.environ)}
        return {"content": [{"type": "text", "text": json.dumps(seen)}]}
    """
)


def probe(google_host: GoogleHost, integrations: list[str]) -> tuple[Run, dict[str, Any]]:
    files = tool_files(
        "google_probe",
        "python",
        ENV_PROBE_PY,
        inputs={"url": {"type": "string", "description": "What to call"}},
        integrations=integrations,
        extra={"network": True},
    )
    save_version("google_probe", files, actor=Actor.system(), publish=True)
    run = in_worker(google_host, {"url": f"{GOOGLE_API}/labels"}, name="google_probe")
    assert run.status == RunStatus.SUCCEEDED, run.result
    return run, json.loads(run.result["content"][0]["text"])


@pytest.mark.worker
def test_a_google_tool_gets_the_access_token_and_never_the_refresh_token(google_host, google):
    run, seen = probe(google_host, ["google"])
    assert seen["reached"] == 200  # the token it got is the connected one (the stand-in said)
    assert seen["env"]["GOOGLE_ACCESS_TOKEN"] == "{{google.access_token}}"  # redacted
    assert not any("REFRESH" in name or "SECRET" in name for name in seen["env"])
    no_secrets_in(json.dumps(seen))
    no_secrets_in(record_of(run))
    through_the_allowance(google_host, google, run)


@pytest.mark.worker
def test_only_a_tool_declaring_google_reaches_gmail(google_host, google):
    run, seen = probe(google_host, [])
    assert "Connection refused" in seen["reached"]
    assert "GOOGLE_ACCESS_TOKEN" not in seen["env"]
    assert google.seen == []
    assert google_host.allowance not in run.network_policy


@pytest.mark.worker
def test_it_runs_through_the_celery_worker_with_an_admins_egress_exception(
    google_host, google, stand_in
):
    """The worker takes the egress exception from the database (as one added on the
    System page): the tool reaches a Gmail stand-in on the host's loopback."""
    fake = serve_gmail(stand_in)
    EgressException.objects.create(entry=f"127.0.0.1:{fake.port}", note="gmail stand-in")
    save_version("gmail", _tool_files(fake.base), actor=Actor.system(), publish=True)
    run = in_worker(google_host, {"operation": "get_message", "message_id": "18e4c1d2a7b3f907"})
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert run.worker
    assert text_of(run).endswith("Das Café öffnet um 9 Uhr; Preis: 3½ £ (¿sí?).")
    assert fake.seen[0]["authorization"] == f"Bearer {TOKEN}"
    assert f"- 127.0.0.1:{fake.port} (the System page)" in run.network_policy.splitlines()
