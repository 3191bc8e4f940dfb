"""The seed's gmail tool (TypeScript, seed/tools/gmail), run for real: the runner and its
bubblewrap sandbox, the egress policy (the stand-in is reachable only because
CONSOLE_TOOL_NETWORK_ALLOW allows it, as an admin would allow a provider) and, once, the
Celery worker. A local HTTP server stands in for gmail.googleapis.com and serves payloads
written from Google's REST reference (tests/data/gmail); the `google` integration's access
token reaches the tool as GOOGLE_ACCESS_TOKEN."""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from tests.seed.test_seed_tools import ToolRunner, run_tool  # noqa: F401 (fixture)
from tests.support.integrations import fernet_keys  # noqa: F401 (fixture)
from tools_app.audit import Actor
from tools_app.catalog import bundle
from tools_app.catalog.versions import save_version
from tools_app.http_tools.context import validation_context
from tools_app.integrations import vault
from tools_app.integrations.service import create_integration
from tools_app.manifest.toolmd import validate_tool_dir
from tools_app.models import Run, RunArtifact, Tool
from tools_app.models.egress import EgressException
from tools_app.models.oauth import OAuthConnection, OAuthState
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runner import FAILED
from tools_app.runs import execute, start

SEED = Path(__file__).resolve().parents[2] / "seed" / "tools" / "gmail"
DATA = Path(__file__).resolve().parents[1] / "data" / "gmail"
API = "https://gmail.googleapis.com/gmail/v1/users/me"
TOKEN = "ya29.a0-gmail-stand-in-t0ken-5e1f"  # distinctive: results must never carry it
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


class FakeGmail:
    """Answers users.messages.list/get, users.threads.get and users.labels.list as the
    reference documents them, or every request with `fail` when a test sets it."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.fail: tuple[int, dict, dict[str, str]] | None = None
        self.messages = {
            m["id"]: m for m in (ALTERNATIVE, HTML_ONLY, LATIN1, HUGE, TEXT_ATTACHMENT)
        }
        self.messages.update({m["id"]: m for m in THREAD["messages"]})
        self.threads = {t["id"]: t for t in (THREAD, HUGE_THREAD)}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
                body = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(url.query)
                auth = self.headers.get("Authorization")
                fake.seen.append({"path": url.path, "query": query, "authorization": auth})
                if fake.fail is not None:
                    self._send(*fake.fail)
                    return
                if auth != f"Bearer {TOKEN}":
                    self._send(401, ERRORS["401"], {"WWW-Authenticate": 'Bearer realm="x"'})
                    return
                base = "/gmail/v1/users/me"
                path = url.path.removeprefix(base)
                if path == "/messages":
                    page = query.get("pageToken", [""])[0]
                    self._send(
                        200, payload("list_page_2.json" if page == PAGE_2 else "list_page_1.json")
                    )
                elif path.startswith("/messages/") and path[10:] in fake.messages:
                    message = fake.messages[path[10:]]
                    if query.get("format") == ["metadata"]:
                        message = _metadata(message, query.get("metadataHeaders", []))
                    self._send(200, message)
                elif path.startswith("/threads/") and path[9:] in fake.threads:
                    self._send(200, fake.threads[path[9:]])
                elif path == "/labels":
                    self._send(200, payload("labels.json"))
                else:
                    self._send(404, ERRORS["404"])

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/gmail/v1/users/me"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _tool_files(fake: FakeGmail) -> dict[str, bytes]:
    """The seed tool as shipped, its API base pointed at the stand-in."""
    files = bundle.read_tool_dir(SEED)
    source = files["index.ts"].decode()
    assert source.count(API) == 1
    files["index.ts"] = source.replace(API, fake.base).encode()
    return files


def connect_google() -> None:
    """A google integration connected as the OAuth callback leaves it: a valid access token
    sealed by the vault (the connect flow itself is tested against a real authorization
    server in tests/test_oauth.py)."""
    integration = create_integration(
        "google",
        "google",
        actor=Actor.system(),
        values={"client_id": "gmail-tests.apps.googleusercontent.com"},
        secrets={"client_secret": "gmail-tests-client-secret"},
    )
    ciphertext, key_id = vault.encrypt(TOKEN)
    now = timezone.now()
    OAuthConnection.objects.create(
        integration=integration,
        state=OAuthState.CONNECTED,
        access_ciphertext=ciphertext,
        key_id=key_id,
        expires_at=now + timedelta(hours=1),
        account="reader@example.com",
        connected_at=now,
    )


@pytest.fixture
def gmail(settings, fernet_keys) -> Iterator[FakeGmail]:  # noqa: F811
    fake = FakeGmail()
    settings.ALLOWED_HOSTS = ["console.test"]
    settings.TOOL_NETWORK_ALLOW = f"127.0.0.1:{fake.port}"
    fernet_keys("A")
    connect_google()
    save_version("gmail", _tool_files(fake), actor=Actor.system(), publish=True)
    yield fake
    fake.close()


def run_gmail(params: dict[str, Any]) -> Run:
    tool = Tool.objects.get(name="gmail")
    run = start.start_run(
        tool.published_version, params, actor=Actor.system(), via=RunVia.API, enqueue=False
    )
    return execute.execute_run(run.pk)


def text_of(run: Run) -> str:
    text = "\n".join(item["text"] for item in run.result["content"])
    assert TOKEN not in text and TOKEN not in json.dumps(run.result)
    return text


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


def test_it_names_the_google_integration_when_none_is_connected(settings, fernet_keys):  # noqa: F811
    fake = FakeGmail()
    try:
        settings.TOOL_NETWORK_ALLOW = f"127.0.0.1:{fake.port}"
        save_version("gmail", _tool_files(fake), actor=Actor.system(), publish=True)
        run = run_gmail({"operation": "list_labels"})
        assert run.status == RunStatus.FAILED
        assert "integration 'google' is not configured" in text_of(run)
        assert fake.seen == []
    finally:
        fake.close()


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


@pytest.mark.worker
def test_it_runs_through_the_celery_worker_with_an_admins_egress_exception(worker):
    """The real path: start_run queues the task; the worker process takes the egress
    exception from the database (as one added on the System page) and runs the tool."""
    from tests.support.worker import wait_for_run

    vault.clear_cache()  # the worker's key, which the worker fixture configured
    fake = FakeGmail()
    try:
        EgressException.objects.create(entry=f"127.0.0.1:{fake.port}", note="gmail stand-in")
        connect_google()
        save_version("gmail", _tool_files(fake), actor=Actor.system(), publish=True)
        tool = Tool.objects.get(name="gmail")
        run = start.start_run(
            tool.published_version,
            {"operation": "get_message", "message_id": "18e4c1d2a7b3f907"},
            actor=Actor.system(),
            via=RunVia.API,
        )
        run = wait_for_run(run.pk, (RunStatus.SUCCEEDED, RunStatus.FAILED), worker=worker)
        assert run.status == RunStatus.SUCCEEDED, run.result
        assert run.worker
        assert text_of(run).endswith("Das Café öffnet um 9 Uhr; Preis: 3½ £ (¿sí?).")
        assert fake.seen[0]["authorization"] == f"Bearer {TOKEN}"
    finally:
        fake.close()
