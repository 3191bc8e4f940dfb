"""GET /api/v1/registry: formats, JSON Schemas, ETag/304, auth errors, bad input."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from django.core.cache.backends import base as cache_base
from django.core.cache.backends import locmem
from django.test import Client
from django.utils import timezone
from jsonschema import Draft202012Validator

from tests.support import REPO
from tests.support.agent_api import (
    agent_client,
    import_published,
    reset_api_caches,
    valid_corpus_tools,
)
from tools_app.api import auth, conditional
from tools_app.audit import Actor
from tools_app.catalog.sync import sync_tools
from tools_app.catalog.versions import publish_version, set_enabled, unpublish
from tools_app.manifest.schema import FORMATS
from tools_app.models import AgentToken, Tool

URL = "/api/v1/registry"
SEED_TOOLS = REPO / "seed" / "tools"

ALL_TYPES = {
    "url": {"type": "string", "description": "Where."},
    "count": {"type": "integer", "description": "How many.", "optional": True, "default": 3},
    "ratio": {"type": "number", "description": "How much.", "optional": True},
    "loud": {"type": "boolean", "description": "Shout.", "optional": True, "default": False},
    "mode": {"type": "enum", "description": "How.", "values": "fast,slow", "default": "fast"},
    "api_key": {"type": "string", "description": "Key.", "optional": True, "sensitive": True},
}


@pytest.fixture(autouse=True)
def fresh_caches():
    reset_api_caches()


def entry_schema(entry: dict, fmt: str) -> dict:
    """The input schema inside one registry entry of format `fmt`."""
    return {
        "native": lambda e: e["input_schema"],
        "openai": lambda e: e["function"]["parameters"],
        "openai-responses": lambda e: e["parameters"],
        "anthropic": lambda e: e["input_schema"],
        "mcp": lambda e: e["inputSchema"],
    }[fmt](entry)


def entry_name(entry: dict, fmt: str) -> str:
    return entry["function"]["name"] if fmt == "openai" else entry["name"]


def registry(client: Client, fmt: str | None = None, **headers) -> dict:
    response = client.get(URL, {"format": fmt} if fmt else {}, headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    return response.json()


def assert_valid_schemas(client: Client, names: set[str]) -> None:
    for fmt in FORMATS:
        body = registry(client, fmt)
        assert body["format"] == fmt
        assert {entry_name(e, fmt) for e in body["tools"]} == names
        for entry in body["tools"]:
            Draft202012Validator.check_schema(entry_schema(entry, fmt))


# --- formats and schemas -----------------------------------------------------------------


def test_it_lists_published_tools_in_all_four_formats(make_tool):
    make_tool("fetcher", inputs=ALL_TYPES, integrations=["brave"])
    make_tool("plain", language="bash")
    client = agent_client("registry:read")

    native = registry(client)
    assert native["format"] == "native"
    assert native["count"] == 2
    fetcher = native["tools"][0]
    assert fetcher["name"] == "fetcher"
    assert fetcher["integrations"] == ["brave"]
    assert fetcher["sha256"] == Tool.objects.get(name="fetcher").published_version.sha256
    schema = fetcher["input_schema"]
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["properties"]["mode"]["enum"] == ["fast", "slow"]
    assert schema["properties"]["api_key"]["writeOnly"] is True
    assert sorted(schema["required"]) == ["mode", "url"]
    assert schema["additionalProperties"] is False

    openai = registry(client, "openai")["tools"][0]
    assert openai["type"] == "function"
    assert openai["function"]["name"] == "fetcher"
    assert "$schema" not in openai["function"]["parameters"]

    anthropic = registry(client, "anthropic")["tools"][0]
    assert set(anthropic) == {"name", "description", "input_schema"}
    assert "$schema" not in anthropic["input_schema"]

    mcp = registry(client, "mcp")["tools"][0]
    assert mcp["name"] == "fetcher"
    assert mcp["inputSchema"]["type"] == "object"
    assert mcp["_meta"]["sha256"] == fetcher["sha256"]

    assert_valid_schemas(client, {"fetcher", "plain"})


def test_it_validates_every_seed_tool_schema_against_the_metaschema(db):
    lines = sync_tools(seed_dir=SEED_TOOLS)
    seed_names = {p.name for p in SEED_TOOLS.iterdir() if (p / "TOOL.md").is_file()}
    assert seed_names and {line.name for line in lines if line.status == "imported"} == seed_names
    assert_valid_schemas(agent_client("registry:read"), seed_names)


CORPUS = sorted(valid_corpus_tools())


@pytest.mark.parametrize("folder", CORPUS, ids=lambda p: f"{p.parents[2].name}:{p.parent.name}")
def test_it_validates_every_corpus_valid_tool_schema_against_the_metaschema(db, folder: Path):
    name = import_published(folder)
    assert_valid_schemas(agent_client("registry:read"), {name})


def test_it_has_corpus_tools_to_check():
    # tests/data/toolmd ships with the repository, so the parametrized test never runs empty.
    assert any("tests/data/toolmd" in str(p) for p in CORPUS)


def test_it_answers_422_json_to_an_unknown_format(make_tool):
    make_tool("one")
    client = agent_client("registry:read")
    for bad in ("xml", "", "NATIVE", "native\x00", "x" * 100_000):
        response = client.get(URL, {"format": bad})
        assert response.status_code == 422, bad[:20]
        body = response.json()
        assert body["error"] == "invalid request"
        assert body["detail"][0]["loc"] == ["query", "format"]
        assert len(response.content) < 2000  # the huge value is not echoed


def test_it_leaves_out_disabled_and_draft_only_tools(make_tool):
    make_tool("shown")
    make_tool("draft_only", publish=False)
    hidden = make_tool("hidden")
    set_enabled(hidden, False, actor=Actor.system())
    body = registry(agent_client("registry:read"))
    assert [t["name"] for t in body["tools"]] == ["shown"]


def test_it_lists_the_published_version_not_a_newer_draft(make_tool):
    make_tool("evolving", description="Published description.")
    make_tool("evolving", description="Draft description.", publish=False)
    (entry,) = registry(agent_client("registry:read"))["tools"]
    assert entry["version"] == 1
    assert entry["description"] == "Published description."


# --- ETag and 304 ------------------------------------------------------------------------


def test_it_answers_304_to_a_matching_if_none_match(make_tool):
    make_tool("one")
    client = agent_client("registry:read")
    first = client.get(URL)
    etag = first["ETag"]
    assert etag.startswith('"') and etag.endswith('"')
    assert "no-cache" in first["Cache-Control"]

    for header in (etag, f"W/{etag}", "*", f'"nope", {etag}', f' "a" ,, W/{etag} ,'):
        again = client.get(URL, headers={"If-None-Match": header})
        assert again.status_code == 304, header
        assert again.content == b""
        assert again["ETag"] == etag

    assert client.get(URL, headers={"If-None-Match": '"other"'}).status_code == 200


@pytest.mark.parametrize(
    "header",
    [
        "garbage",
        '"unterminated',
        "W/",
        'W/"a" "b"',
        '"a"; "b"',
        "**",
        '"sp ace"',
        '""' * 10_000,
        "x" * 200_000,
        '"\u00e9t\u00e9"',
        "\t,\t",
        "",
    ],
)
def test_it_answers_200_to_a_malformed_if_none_match(make_tool, header):
    make_tool("one")
    client = agent_client("registry:read")
    response = client.get(URL, headers={"If-None-Match": header})
    assert response.status_code == 200
    assert response.json()["count"] == 1


def test_it_uses_one_etag_per_format(make_tool):
    make_tool("one")
    client = agent_client("registry:read")
    etags = {client.get(URL, {"format": fmt})["ETag"] for fmt in FORMATS}
    assert len(etags) == len(FORMATS)
    native = client.get(URL)["ETag"]
    assert client.get(URL, {"format": "mcp"}, headers={"If-None-Match": native}).status_code == 200


def test_it_changes_the_etag_when_the_published_tools_change(make_tool):
    tool = make_tool("one")
    make_tool("two")
    client = agent_client("registry:read")

    def etag() -> str:
        return client.get(URL)["ETag"]

    seen = [etag()]
    assert etag() == seen[-1]  # stable while nothing changes

    make_tool("one", description="A new version.")  # published at once
    seen.append(etag())
    make_tool("three", publish=False)  # a draft-only tool is not listed...
    assert registry(client)["count"] == 2
    unpublish(tool, actor=Actor.system())
    seen.append(etag())
    publish_version(tool.versions.get(number=1), actor=Actor.system())  # a rollback
    seen.append(etag())
    set_enabled(tool, False, actor=Actor.system())
    seen.append(etag())
    set_enabled(tool, True, actor=Actor.system())
    seen.append(etag())
    Tool.objects.filter(name="two").delete()
    seen.append(etag())
    assert all(before != after for before, after in zip(seen, seen[1:], strict=False)), seen
    # The ETag names the content: the same published set as before gives the same ETag.
    assert seen[2] == seen[4]  # {two} after unpublishing one, and after disabling it
    # The body always matches the answer's ETag.
    assert registry(client)["tools"][0]["version"] == 1


# --- auth --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer ", "Basic dXNlcjpwdw==", "Bearer nope", "Bearer tc_" + "x" * 500],
)
def test_it_answers_401_json_without_a_valid_token(db, authorization):
    headers = {} if authorization is None else {"Authorization": authorization}
    response = Client().get(URL, headers=headers)
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response["WWW-Authenticate"].startswith("Bearer")
    body = response.json()
    assert set(body) == {"error", "detail"} and body["error"]


def test_it_answers_401_to_a_revoked_token(make_tool):
    client = agent_client("registry:read")
    assert client.get(URL).status_code == 200
    AgentToken.objects.get().revoke()
    response = client.get(URL)
    assert response.status_code == 401
    assert response.json()["error"] == "invalid token"


def test_it_answers_403_json_without_the_scope(db):
    response = agent_client("sync:read", "tools:invoke").get(URL)
    assert response.status_code == 403
    assert response.json()["error"] == "missing scope"
    assert 'scope="registry:read"' in response["WWW-Authenticate"]


def test_it_checks_the_token_before_answering_304(make_tool):
    make_tool("one")
    etag = agent_client("registry:read").get(URL)["ETag"]
    assert Client().get(URL, headers={"If-None-Match": etag}).status_code == 401


def test_it_records_when_a_token_was_last_used_at_most_once_a_minute(make_tool):
    client = agent_client("registry:read")
    token = AgentToken.objects.get()
    assert token.last_used_at is None
    client.get(URL)
    token.refresh_from_db()
    first = token.last_used_at
    assert first is not None
    client.get(URL)
    token.refresh_from_db()
    assert token.last_used_at == first


# --- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/nope",
        "/api/v2/registry",
        "/api/v1/registry/extra",
        "/api/",
        "/api/v1/tools/../../etc/passwd",
        "/api/v1/tools/%2e%2e/%2e%2e/registry",
        "/api/v1/tools/a%2fb/versions/1",
    ],
)
def test_it_answers_json_404_to_unknown_api_paths(db, path):
    response = agent_client().get(path)
    assert response.status_code == 404
    assert response.json()["error"]


def test_it_answers_405_json_to_a_wrong_method(db):
    response = agent_client().post(URL)
    assert response.status_code == 405
    assert response.json()["error"] == "method not allowed"
    assert "GET" in response["Allow"]


def test_it_answers_400_json_to_too_many_query_fields(make_tool):
    make_tool("one")
    query = "&".join(f"f{i}=1" for i in range(5000))
    response = agent_client().get(f"{URL}?{query}")
    assert response.status_code == 400
    assert response.json()["error"] == "bad request"


def test_it_ignores_unknown_query_fields(make_tool):
    make_tool("one")
    assert agent_client().get(URL, {"page": "2", "x" * 1000: "y"}).status_code == 200


def test_it_serves_a_trivial_health_check(db):
    response = Client().get("/api/healthz")
    assert response.status_code == 200
    assert response.json() == {"ok": True}


# --- cost --------------------------------------------------------------------------------


def test_it_answers_with_a_constant_number_of_queries(make_tool, django_assert_max_num_queries):
    # Enough tools that a query per tool would show; more only cost the suite time.
    for i in range(40):
        make_tool(f"tool_{i:03}", inputs={"q": {"type": "string", "description": "Query."}})
    client = agent_client("registry:read")
    # Cold: token, last_used_at, revision, the tools (with the hashes of their stored
    # rows), then to verify them (catalog/integrity.py) keys.json and their versions.
    with django_assert_max_num_queries(6):
        response = client.get(URL, {"format": "openai"})
    assert response.json()["count"] == 40
    # Warm: at most the token and the revision (none while this process remembers them);
    # the body comes from memory.
    with django_assert_max_num_queries(2):
        assert client.get(URL, {"format": "openai"}).status_code == 200
    with django_assert_max_num_queries(2):
        response = client.get(URL, {"format": "openai"}, headers={"If-None-Match": "*"})
    assert response.status_code == 304


# --- compression and the per-process memory ----------------------------------------------


def test_it_gzips_for_clients_that_accept_it(make_tool):
    for i in range(5):
        make_tool(f"tool_{i}", inputs=ALL_TYPES)
    client = agent_client("registry:read")
    plain = client.get(URL)
    zipped = client.get(URL, headers={"Accept-Encoding": "br;q=1.0, gzip;q=0.8, *;q=0.1"})
    assert zipped["Content-Encoding"] == "gzip"
    assert gzip.decompress(zipped.content) == plain.content
    assert len(zipped.content) < len(plain.content) / 3
    assert zipped["ETag"] != plain["ETag"]
    assert "Accept-Encoding" in plain["Vary"] and "Accept-Encoding" in zipped["Vary"]
    # Either tag names the same revision.
    for etag in (plain["ETag"], zipped["ETag"]):
        again = client.get(URL, headers={"If-None-Match": etag, "Accept-Encoding": "gzip"})
        assert again.status_code == 304
        assert again["ETag"] == zipped["ETag"]
    refused = client.get(URL, headers={"Accept-Encoding": "gzip;q=0, identity"})
    assert "Content-Encoding" not in refused
    assert refused.content == plain.content


@pytest.mark.parametrize(
    "header, expected",
    [
        ("gzip", True),
        ("deflate, gzip;q=0.5", True),
        ("GZIP", True),
        ("*", True),
        ("x-gzip", True),
        ("", False),
        ("identity", False),
        ("gzip;q=0", False),
        ("gzip;q=0.000", False),
        ("*;q=0", False),
        ("*, gzip;q=0", False),
        ("gzip;q=abc", False),
        ("gzip;" + "x" * 5000, False),
    ],
)
def test_it_reads_accept_encoding(header, expected):
    assert conditional.accepts_gzip(header) is expected


def cache_clock(fake_clock):
    """The revision is remembered in a locmem cache, which reads time.time(): fake that."""
    clock = fake_clock(locmem)
    fake_clock(cache_base)
    clock.time = clock.monotonic
    return clock


def test_it_notices_changes_made_elsewhere_within_the_revision_ttl(make_tool, settings, fake_clock):
    settings.CONSOLE_REGISTRY_REVISION_TTL = 0.3
    clock = cache_clock(fake_clock)
    make_tool("one")
    make_tool("two")
    client = agent_client("registry:read")
    before = client.get(URL)["ETag"]
    # A queryset update sends no signal, like a change made by another process.
    Tool.objects.filter(name="two").update(enabled=False)
    assert client.get(URL)["ETag"] == before  # this process may answer from memory...
    clock.advance(0.4)
    after = client.get(URL)  # ...but not for longer than the TTL
    assert after["ETag"] != before
    assert after.json()["count"] == 1


def test_it_refuses_a_token_revoked_elsewhere_within_the_auth_ttl(make_tool, settings, fake_clock):
    settings.CONSOLE_API_AUTH_CACHE_SECONDS = 0.3
    clock = fake_clock(auth)
    client = agent_client("registry:read")
    assert client.get(URL).status_code == 200
    # Revoked by another process: no signal reaches this one.
    AgentToken.objects.update(revoked_at=timezone.now())
    clock.advance(0.4)
    assert client.get(URL).status_code == 401


def test_it_remembers_nothing_when_the_ttls_are_zero(make_tool, settings):
    settings.CONSOLE_API_AUTH_CACHE_SECONDS = 0
    settings.CONSOLE_REGISTRY_REVISION_TTL = 0
    make_tool("one")
    client = agent_client("registry:read")
    before = client.get(URL)["ETag"]
    Tool.objects.filter(name="one").update(enabled=False)
    assert client.get(URL)["ETag"] != before
    AgentToken.objects.update(revoked_at=timezone.now())
    assert client.get(URL).status_code == 401
