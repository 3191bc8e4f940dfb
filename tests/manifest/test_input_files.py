"""`json`, `file` and `file[]` inputs (docs/tool-format.md, tools_app/manifest/input_files.py): the
run form's JSON box and uploads, base64 file objects through the API, files handed to a
code tool in its work dir (a real run in the sandbox) and to an http tool in its body."""

from __future__ import annotations

import base64
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.support.agent_api import agent_client, reset_api_caches
from tests.support.forms import submit
from tests.support.integrations import fake_provider  # noqa: F401 (fixture)
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.manifest import input_files
from tools_app.models import Run, Tool
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import execute as run_execute
from tools_app.runs import start

MIB = 1024 * 1024
READER_PY = """
import json, os
def execute(tool_call_id, params, signal, on_update):
    def read(path):
        with open(path, "rb") as f:
            return {"path": path, "bytes": f.read().decode()}
    seen = {"doc": read(params["doc"]), "more": [read(p) for p in params.get("more") or []],
            "config": params.get("config"), "cwd": os.getcwd()}
    return {"content": [{"type": "text", "text": json.dumps(seen)}]}
"""
INPUTS = {
    "doc": {"type": "file", "description": "A document."},
    "more": {"type": "file[]", "description": "More.", "optional": True},
    "config": {"type": "json", "description": "Settings.", "optional": True},
}


@pytest.fixture
def provider(fake_provider):  # noqa: F811 (the fixture above, by another name)
    return fake_provider


def file_object(name: str, data: bytes, mime: str = "text/plain") -> dict:
    return {"name": name, "mime_type": mime, "data": base64.b64encode(data).decode()}


@pytest.fixture
def reader(make_tool) -> Tool:
    return make_tool("reader", language="python", source=READER_PY, inputs=INPUTS)


def seen_by_tool(run: Run) -> dict:
    assert run.status == RunStatus.SUCCEEDED, (run.result, run.stderr_tail)
    return json.loads(run.result["content"][0]["text"])


@pytest.mark.django_db
def test_it_hands_an_uploaded_file_to_a_code_tool(reader, developer_client) -> None:
    upload = SimpleUploadedFile("../../etc/passwd", b"line one\n", content_type="text/plain")
    page = developer_client.get("/tools/reader/run/").content.decode()
    assert 'enctype="multipart/form-data"' in page and "js/json-input.js" in page

    response = submit(developer_client, "/tools/reader/run/",
                      {"doc": upload, "config": '{"depth": 2}'}, form_id="run-form")  # fmt: skip
    assert response.status_code == 302, response.content.decode()[:2000]
    run = Run.objects.get()
    # The record keeps name, type and size; the bytes rode sealed and are gone once it ran.
    assert run.params["doc"] == {"name": "passwd", "mime_type": "text/plain", "size": 9}
    assert run.params["config"] == {"depth": 2}

    seen = seen_by_tool(run_execute.execute_run(run.pk))
    assert seen["doc"]["bytes"] == "line one\n"
    # Inside the run's work dir, under a name no caller can point elsewhere.
    assert seen["doc"]["path"] == f"{seen['cwd']}/inputs/doc/passwd"
    assert seen["config"] == {"depth": 2}
    assert Run.objects.get().sealed_params == ""


@pytest.mark.django_db
def test_it_says_where_a_json_input_is_broken(reader, developer_client) -> None:
    upload = SimpleUploadedFile("a.txt", b"x")
    response = submit(developer_client, "/tools/reader/run/",
                      {"doc": upload, "config": '{"depth" 2}'}, form_id="run-form")  # fmt: skip
    assert response.status_code == 400
    page = response.content.decode()
    assert "config: not valid JSON: Expecting &#x27;:&#x27; delimiter (line 1, column 10)." in page
    assert 'data-json-editor="config"' in page
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_it_refuses_an_upload_over_10_mib(reader, developer_client) -> None:
    upload = SimpleUploadedFile("big.bin", b"x" * (10 * MIB + 1))
    response = submit(developer_client, "/tools/reader/run/", {"doc": upload}, form_id="run-form")
    assert response.status_code == 400
    assert "big.bin: the file is larger than 10 MiB." in response.content.decode()
    assert not Run.objects.exists()


def invoke(client, params: dict):
    return client.post("/api/v1/tools/reader/invoke", {"params": params},
                       content_type="application/json")  # fmt: skip


@pytest.mark.django_db
def test_it_takes_base64_files_through_the_api(reader, django_capture_on_commit_callbacks):
    reset_api_caches()
    params = {
        "doc": file_object("report.txt", b"first"),
        "more": [file_object("a/b.txt", b"second"), file_object("b.txt", b"third")],
    }
    with django_capture_on_commit_callbacks(execute=False):
        response = invoke(agent_client(), params)
    assert response.status_code == 202, response.content
    run = Run.objects.get()
    assert run.params["more"][1] == {"name": "b.txt", "mime_type": "text/plain", "size": 5}

    seen = seen_by_tool(run_execute.execute_run(run.pk))
    assert seen["doc"]["bytes"] == "first"
    # Two files of one name both arrive, side by side.
    assert [(m["path"].rsplit("/", 1)[1], m["bytes"]) for m in seen["more"]] == [
        ("b.txt", "second"),
        ("b-2.txt", "third"),
    ]


@pytest.mark.django_db
def test_it_refuses_bad_files_through_the_api(reader, django_capture_on_commit_callbacks):
    reset_api_caches()
    client = agent_client()
    big = file_object("big.bin", b"x" * (10 * MIB + 1))
    with django_capture_on_commit_callbacks(execute=False):
        too_big = invoke(client, {"doc": big})
        not_base64 = invoke(client, {"doc": {"name": "a", "data": "%%%"}})
        not_object = invoke(client, {"doc": "aGVsbG8="})
    assert too_big.status_code == 422
    assert too_big.json()["detail"] == ["doc: the file is larger than 10 MiB"]
    assert not_base64.json()["detail"] == ["doc: data is not valid base64"]
    assert not_object.json()["detail"] == [
        'doc: must be a file object {"name", "mime_type", "data" (base64)}, got a string'
    ]
    # A big body is read only for a valid token; anonymous ones stay refused unread.
    anonymous = client.__class__().post(
        "/api/v1/tools/reader/invoke", {"params": {"doc": big}}, content_type="application/json"
    )
    assert anonymous.status_code == 413
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_it_sends_a_file_to_an_http_tool_as_base64_json(settings, provider) -> None:
    settings.ALLOWED_HOSTS = ["testserver"]
    settings.TOOL_NETWORK_ALLOW = provider.url.removeprefix("http://")
    text = (
        "---\nname: upload\ndescription: Uploads.\nkind: http\ninputs:\n"
        "  doc: {type: file, description: Document}\n"
        f"request:\n  method: POST\n  url: {provider.url}/upload\n"
        '  body: {document: "{{doc}}"}\n---\n# Upload\n'
    )
    save_version("upload", {"TOOL.md": text.encode()}, actor=Actor.system(), publish=True)
    version = Tool.objects.get(name="upload").published_version
    doc = file_object("../notes.md", b"# hi", "text/markdown")
    run = start.start_run(version, {"doc": doc}, actor=Actor.system(), via=RunVia.API,
                         enqueue=False)  # fmt: skip
    run = run_execute.execute_run(run.pk)
    assert run.status == RunStatus.SUCCEEDED, run.result
    sent = json.loads(provider.last.body)
    assert sent == {"document": {"name": "notes.md", "mime_type": "text/markdown",
                                 "data": base64.b64encode(b"# hi").decode()}}  # fmt: skip


@pytest.mark.parametrize(
    ("given", "safe"),
    [
        ("../../etc/passwd", "passwd"),
        ("..", "file"),
        ("C:\\Users\\me\\a b.txt", "a_b.txt"),
        (".hidden", "hidden"),
        ("re\x00port\n.pdf", "report.pdf"),
        ("", "file"),
        ("x" * 300 + ".txt", "x" * 116 + ".txt"),
    ],
)
def test_it_makes_file_names_safe(given: str, safe: str) -> None:
    assert input_files.safe_name(given) == safe
