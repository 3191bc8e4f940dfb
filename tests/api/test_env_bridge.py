"""GET /api/v1/env: the variables of the integrations published tools declare, for tokens
with secrets:read, only when CONSOLE_ENV_BRIDGE=on, every answer audited without values."""

from __future__ import annotations

import pytest

from tests.support import integrations as support
from tests.support import tool_files
from tests.support.agent_api import agent_client, reset_api_caches
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.models import AuditEvent

pytestmark = pytest.mark.django_db

URL = "/api/v1/env"
APIFY_TOKEN = "apify-secret-for-env-bridge-tests"
SEARX_TOKEN = "searx-secret-for-env-bridge-tests"


@pytest.fixture(autouse=True)
def bridge(settings):
    reset_api_caches()
    settings.CONSOLE_ENV_BRIDGE = True
    support.create("apify", secrets={"token": APIFY_TOKEN})
    support.create(
        "searxng", values={"url": "https://searx.example"}, secrets={"token": SEARX_TOKEN}
    )


def save(name: str, integrations: list[str], *, publish: bool = True):
    files = tool_files(name, "python", integrations=integrations)
    return save_version(name, files, actor=Actor.system(), publish=publish).version


def test_it_answers_the_variables_of_the_declared_integrations():
    save("scrape", ["apify"])
    save("search", ["searxng"])
    save("plain", [])
    client = agent_client("secrets:read", name="runner")

    response = client.get(URL, {"tools": "scrape,plain"})

    assert response.status_code == 200, response.content
    assert response.json() == {
        "tools": ["scrape", "plain"],
        "integrations": ["apify"],
        "env": {"APIFY_TOKEN": APIFY_TOKEN},
    }
    assert response["Cache-Control"] == "no-store"
    both = client.get(URL, {"tools": "scrape,search"}).json()["env"]
    assert both["SEARXNG_TOKEN"] == SEARX_TOKEN and both["SEARXNG_URL"] == "https://searx.example"


def test_it_audits_every_answer_with_names_never_values():
    save("scrape", ["apify"])
    client = agent_client("secrets:read", name="runner")

    client.get(URL, {"tools": "scrape"})

    event = AuditEvent.objects.get(action="env.read")
    assert event.actor == "token:runner"
    assert event.data == {
        "tools": ["scrape"],
        "integrations": ["apify"],
        "variables": ["APIFY_TOKEN"],
    }
    assert APIFY_TOKEN not in str(event.data) + event.summary


def test_it_follows_the_published_version_only():
    save("scrape", [])
    save("scrape", ["apify"], publish=False)  # a draft that asks for more
    save("drafty", ["apify"], publish=False)
    client = agent_client("secrets:read")

    assert client.get(URL, {"tools": "scrape"}).json()["env"] == {}
    assert client.get(URL, {"tools": "drafty"}).status_code == 404
    assert APIFY_TOKEN not in client.get(URL, {"tools": "drafty"}).content.decode()


def test_it_is_off_unless_configured(settings):
    save("scrape", ["apify"])
    settings.CONSOLE_ENV_BRIDGE = False

    response = agent_client("secrets:read").get(URL, {"tools": "scrape"})

    assert response.status_code == 403
    assert response.json()["error"] == "env bridge off"
    assert "CONSOLE_ENV_BRIDGE=on" in response.json()["detail"]
    assert not AuditEvent.objects.filter(action="env.read").exists()


def test_it_needs_the_secrets_scope():
    save("scrape", ["apify"])
    every_other = agent_client("registry:read", "sync:read", "tools:invoke")

    response = every_other.get(URL, {"tools": "scrape"})

    assert response.status_code == 403
    assert response.json()["detail"] == "this token lacks the 'secrets:read' scope"
    assert APIFY_TOKEN not in response.content.decode()
    assert agent_client("secrets:read").get(URL, {"tools": "scrape"}).status_code == 200


@pytest.mark.parametrize(
    ("query", "status"),
    [({}, 422), ({"tools": " , "}, 422), ({"tools": ",".join(f"t{i}" for i in range(51))}, 422),
     ({"tools": "nope"}, 404), ({"tools": "../x"}, 404), ({"tools": "a\x00"}, 404)],
)  # fmt: skip
def test_it_answers_bad_requests_with_json(query, status):
    response = agent_client("secrets:read").get(URL, query)
    assert response.status_code == status
    assert "error" in response.json()


def test_it_says_which_integration_is_missing():
    save("mail", ["email_db"])

    response = agent_client("secrets:read").get(URL, {"tools": "mail"})

    assert response.status_code == 409
    assert "email_db" in response.json()["detail"]
