"""The agent API's invoke caps `params` at 1 MiB of JSON, like the run form's raw JSON: a
bigger body is a 413 in the API's error shape, refused before it is read; a body just
under the cap is accepted or refused for its content, never a 500."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from tools_app.api.limits import MAX_BODY_BYTES, MAX_FILES_BODY_BYTES, MAX_PARAMS_BYTES
from tools_app.models import Run
from tools_app.models.tokens import AgentToken, Scope

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024
URL = "/api/v1/tools/echo/invoke"


@pytest.fixture
def echo(make_tool):
    return make_tool(
        "echo", language="python", inputs={"text": {"type": "string", "description": "Text."}}
    )


@pytest.fixture
def client(echo) -> Client:
    _, raw = AgentToken.issue("agent", [Scope.TOOLS_INVOKE])
    return Client(headers={"Authorization": f"Bearer {raw}"})


def post(client: Client, body: bytes | str):
    return client.post(URL, body, content_type="application/json")


def params_body(text_length: int) -> str:
    return json.dumps({"params": {"text": "x" * text_length}})


def assert_too_large(response) -> None:
    assert response.status_code == 413
    body = response.json()
    assert set(body) == {"error", "detail"}
    assert body["error"] == "request too large"
    # A valid token's body may be larger (base64 files): its cap is MAX_FILES_BODY_BYTES.
    assert any(
        f"the limit is {limit} bytes" in body["detail"]
        for limit in (MAX_PARAMS_BYTES, MAX_BODY_BYTES, MAX_FILES_BODY_BYTES)
    )


@pytest.mark.parametrize("size", [2 * MIB, 30 * MIB], ids=["2MiB", "30MiB"])
def test_it_refuses_a_body_over_the_cap(client, size, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = post(client, params_body(size))

    assert_too_large(response)
    assert "bytes" in response.json()["detail"]
    assert not Run.objects.exists() and not queued


def test_it_refuses_params_over_the_cap_inside_a_body_that_fits(client):
    # The envelope allowance lets the body through; the params themselves are too big.
    body = params_body(MAX_PARAMS_BYTES)
    assert len(body) <= MAX_BODY_BYTES

    response = post(client, body)

    assert_too_large(response)
    assert response.json()["detail"].startswith("params is ")
    assert not Run.objects.exists()


def test_it_accepts_params_just_under_the_cap(client, django_capture_on_commit_callbacks):
    text_length = MAX_PARAMS_BYTES - len('{"text":""}')

    with django_capture_on_commit_callbacks(execute=False):
        response = post(client, params_body(text_length))

    assert response.status_code == 202, response.content[:200]
    assert Run.objects.get().params == {"text": "x" * text_length}


@pytest.mark.parametrize(
    "body",
    [
        b"{" * (MIB - 16),
        b'{"params": {"text": "' + b"x" * (MIB - 64),
        b'{"params": [' + b"1," * (MIB // 2 - 16) + b"1]}",
        b'{"params": {"text": ' + b"1" * (MIB - 64) + b"}}",
        b"\xff" * (MIB - 16),
        b'{"params": {"text": "\\ud800' + b"y" * (MIB - 64) + b'"}}',
        b"[" * 100_000 + b"]" * 100_000,
    ],
    ids=["braces", "unclosed", "array", "huge-number", "not-utf8", "lone-surrogate", "deep"],
)
def test_a_body_just_under_the_cap_is_judged_by_its_content(client, body):
    assert len(body) <= MAX_BODY_BYTES

    response = post(client, body)

    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    assert set(response.json()) == {"error", "detail"}
    assert not Run.objects.exists()


def test_a_big_body_is_refused_unread_even_without_a_token(echo):
    # The size is judged from Content-Length before anything else, token checks included.
    assert_too_large(post(Client(), params_body(2 * MIB)))
    assert post(Client(), params_body(10)).status_code == 401


def test_openapi_documents_the_413(client):
    schema = Client().get("/api/openapi.json").json()
    responses = schema["paths"]["/api/v1/tools/{name}/invoke"]["post"]["responses"]
    assert "413" in responses
