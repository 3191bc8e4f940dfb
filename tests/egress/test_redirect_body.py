"""A request body never follows a redirect to another origin (tools_app/egress/client.py): an http
tool's `{{slug.FIELD}}` in its body stays with the origin it was written for. Two local
HTTP servers are two origins (different ports); the second records what reaches it."""

from __future__ import annotations

import json

import pytest

from tests.support.integrations import fernet_keys  # noqa: F401 (fixture)
from tests.support.stand_in import Reply, Request
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.egress import client
from tools_app.egress import policy as egress_policy
from tools_app.integrations.service import create_integration
from tools_app.models import Tool
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import execute, start

TOKEN = "s3cr3t-body-token-91"
SAMPLE = {"source": "https://docs.example.com/items", "status": 200, "body": {"ok": True}}


class Origin:
    """One HTTP server: /<status> answers that redirect to `target`, /same307 redirects
    within this origin, anything else answers 200 after recording the request."""

    def __init__(self, stand_in) -> None:
        self.seen: list[dict] = []
        self.target = ""
        self.server = stand_in(self.answer, http11=True, methods=("GET", "POST", "PUT", "PATCH"))
        self.port = self.server.port
        self.url = self.server.url

    def answer(self, request: Request) -> Reply:
        self.seen.append({"method": request.method, "path": request.path, "body": request.body})
        status = request.path.strip("/")
        headers = {}
        if status in ("301", "302", "303", "307", "308"):
            headers["Location"] = self.target
        elif status == "same307":
            status, headers["Location"] = "307", "/landed"
        else:
            status = "200"
        return Reply(int(status), b'{"ok":true}', "application/json", headers)


@pytest.fixture
def origins(settings, stand_in) -> tuple[Origin, Origin]:
    first, second = Origin(stand_in), Origin(stand_in)
    first.target = f"{second.url}/steal"
    # The console itself is console.test here: 127.0.0.1 is two providers the admin allowed.
    settings.ALLOWED_HOSTS = ["console.test"]
    settings.TOOL_NETWORK_ALLOW = f"127.0.0.1:{first.port},127.0.0.1:{second.port}"
    return first, second


def allow_both(first: Origin, second: Origin) -> egress_policy.Policy:
    return egress_policy.build(f"127.0.0.1:{first.port},127.0.0.1:{second.port}")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("status", [307, 308])
def test_it_never_sends_an_http_tools_secret_body_to_another_origin(
    origins,
    fernet_keys,  # noqa: F811
    status,
) -> None:
    first, second = origins
    fernet_keys("A")
    create_integration("apify", "apify", actor=Actor.system(), secrets={"token": TOKEN})
    text = (
        "---\nname: poster\ndescription: Posts to a local API.\nkind: http\n"
        "integrations: [apify]\nrequest:\n  method: POST\n"
        f"  url: {first.url}/{status}\n"
        '  body: {token: "{{apify.APIFY_TOKEN}}", q: 1}\n  response: text\n---\n# Poster\n'
    )
    files = {"TOOL.md": text.encode(), "samples/ok.json": json.dumps(SAMPLE).encode()}
    save_version("poster", files, actor=Actor.system(), publish=True)
    version = Tool.objects.get(name="poster").published_version
    run = start.start_run(version, {}, actor=Actor.system(), via=RunVia.BROWSER, enqueue=False)
    run = execute.execute_run(run.pk)

    assert run.status == RunStatus.FAILED, run.result
    message = run.result["content"][0]["text"]
    assert (
        f"did not follow the {status} redirect to another origin ({second.url}): "
        "it would re-send the request body there"
    ) in message
    assert json.loads(first.seen[0]["body"]) == {"token": TOKEN, "q": 1}  # its own origin
    assert second.seen == []
    assert TOKEN not in json.dumps(run.result)


@pytest.mark.parametrize("method, status", [("PUT", 302), ("PATCH", 301), ("POST", 307)])
def test_it_never_re_sends_a_body_to_another_origin_from_the_console(
    origins, method, status
) -> None:
    """The same for every caller of client.request (connection tests send a body too):
    301/302 keep the method and body for anything but POST."""
    first, second = origins
    with pytest.raises(client.HttpError, match=f"did not follow the {status} redirect"):
        client.request(
            method,
            f"{first.url}/{status}",
            content=f'{{"token": "{TOKEN}"}}',
            policy=allow_both(first, second),
        )
    assert second.seen == []


def test_it_still_follows_what_re_sends_no_body_elsewhere(origins) -> None:
    """A body stays on a 307 within its origin; a 303 (or a 302 after a POST) to another
    origin becomes a GET without the body and is followed."""
    first, second = origins
    policy = allow_both(first, second)
    result = client.request("POST", f"{first.url}/same307", content=TOKEN, policy=policy)
    assert result.status == 200
    assert first.seen[-1] == {"method": "POST", "path": "/landed", "body": TOKEN.encode()}
    for status in (303, 302):
        result = client.request("POST", f"{first.url}/{status}", content=TOKEN, policy=policy)
        assert result.status == 200 and result.url == f"{second.url}/steal"
        assert second.seen[-1] == {"method": "GET", "path": "/steal", "body": b""}
    result = client.request("GET", f"{first.url}/307", policy=policy)  # no body: followed
    assert result.status == 200 and second.seen[-1]["path"] == "/steal"
