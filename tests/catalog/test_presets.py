"""Presets for `user-only` inputs (docs/tool-format.md, tools_app/catalog/presets.py): set by admins
on /tools/<name>/presets/, merged into runs, never given to models; a sensitive one is
encrypted and write-only, like an integration secret."""

from __future__ import annotations

import io
import json
import uuid

import pytest
from django.core.management import call_command

from tests.support.agent_api import agent_client, reset_api_caches
from tests.support.forms import submit
from tests.support.integrations import fake_provider, fernet_keys, send_json  # noqa: F401
from tests.support.stand_in import Reply, Request
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.manifest import schema
from tools_app.models import AuditEvent, Run, Tool, ToolPreset
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import execute, setup, start

pytestmark = pytest.mark.django_db

CANARY = f"canary-preset-{uuid.uuid4().hex}"
SAMPLE = {"source": "https://docs.example.com/x", "status": 200, "body": {"got": "x"}}


@pytest.fixture
def provider(fake_provider):  # noqa: F811 (the fixture above, by another name)
    return fake_provider


def echo(request: Request) -> Reply:
    """The provider answers with what it was sent: path and headers (providers do echo)."""
    return send_json(request, {"got": request.path, "key": request.header("X-Key", "")})


@pytest.fixture
def tool(settings, provider) -> Tool:
    settings.ALLOWED_HOSTS = ["testserver"]
    settings.TOOL_NETWORK_ALLOW = provider.url.removeprefix("http://")
    provider.handler = echo
    text = (
        "---\nname: lookup\ndescription: Looks up.\nkind: http\ninputs:\n"
        "  account: {type: string, description: Account, visibility: user-only}\n"
        "  api_key: {type: string, description: Key, visibility: user-only, optional: true}\n"
        "  limit: {type: integer, description: Limit, visibility: user-only, optional: true}\n"
        "  query: {type: string, description: Query}\n"
        "request:\n  method: GET\n"
        f"  url: {provider.url}/find/{{{{account}}}}\n"
        '  query: {q: "{{query}}", limit: "{{limit}}"}\n'
        '  headers: {X-Key: "{{api_key}}"}\n'
        "---\n# Lookup\n"
    )
    files = {"TOOL.md": text.encode(), "samples/x.json": json.dumps(SAMPLE).encode()}
    save_version("lookup", files, actor=Actor.system(), publish=True)
    return Tool.objects.get(name="lookup")


def run_of(tool: Tool, params: dict, via: str = RunVia.BROWSER) -> Run:
    run = start.start_run(tool.published_version, params, actor=Actor.system(), via=via,
                         enqueue=False)  # fmt: skip
    return execute.execute_run(run.pk)


def set_preset(client, name: str, value: str, *, sensitive: bool = False):
    changes = {"input": name, "value": value, "sensitive": "on" if sensitive else None}
    return submit(client, "/tools/lookup/presets/", changes, button="Save preset")


def test_it_fills_a_user_only_input_from_the_preset(tool, console_admin_client, provider) -> None:
    response = set_preset(console_admin_client, "account", "acme")
    assert response.status_code == 302

    run = run_of(tool, {"query": "q1"})

    assert run.status == RunStatus.SUCCEEDED, run.result
    assert provider.last.path == "/find/acme?q=q1"
    # Read again when the run executes, never copied into the run record.
    assert run.params == {"query": "q1"}
    assert run.notices == ["Filled from the tool's presets: account."]
    event = AuditEvent.objects.get(action="tool.preset.set")
    assert event.data == {"input": "account", "sensitive": False}
    assert "acme" not in event.summary


def test_it_lets_a_person_type_over_a_preset(
    tool, console_admin_client, developer_client, provider
) -> None:
    set_preset(console_admin_client, "account", "acme")
    page = developer_client.get("/tools/lookup/run/").content.decode()
    assert "Preset by an admin: leave empty to use it." in page

    response = submit(developer_client, "/tools/lookup/run/", {"account": "mine", "query": "a"},
                      form_id="run-form")  # fmt: skip
    assert response.status_code == 302
    run = execute.execute_run(Run.objects.get().pk)
    assert run.status == RunStatus.SUCCEEDED, (run.result, run.error)
    assert provider.last.path == "/find/mine?q=a"

    # Left empty, the preset fills it (the field is not required any more).
    submit(developer_client, "/tools/lookup/run/", {"account": "", "query": "b"},
           form_id="run-form")  # fmt: skip
    run = execute.execute_run(Run.objects.order_by("-created_at").first().pk)
    assert run.status == RunStatus.SUCCEEDED, (run.result, run.error)
    assert provider.last.path == "/find/acme?q=b"


def test_it_requires_a_user_only_input_without_a_preset(tool) -> None:
    with pytest.raises(start.InvalidParams) as caught:
        start.start_run(tool.published_version, {"query": "q"}, actor=Actor.system(),
                       via=RunVia.API, enqueue=False)  # fmt: skip
    assert caught.value.errors == ["account: is required"]


def test_it_never_lets_a_model_fill_a_user_only_input(tool, console_admin_client) -> None:
    set_preset(console_admin_client, "account", "acme")
    with pytest.raises(start.InvalidParams) as caught:
        start.start_run(tool.published_version, {"query": "q", "account": "evil"},
                       actor=Actor.system(), via=RunVia.MCP, enqueue=False)  # fmt: skip
    assert caught.value.errors == ["account: unknown parameter (allowed: query)"]
    # What models are shown agrees: the model formats list only the query.
    reset_api_caches()
    for fmt in ("openai", "anthropic", "mcp"):
        listed = agent_client().get("/api/v1/registry", {"format": fmt}).json()["tools"][0]
        text = json.dumps(listed)
        assert '"query"' in text and "account" not in text and "api_key" not in text


def test_it_refuses_a_preset_that_does_not_fit_the_input(tool, console_admin_client) -> None:
    response = set_preset(console_admin_client, "limit", "ten")
    assert response.status_code == 400
    assert "limit: not valid JSON for a integer" in response.content.decode()
    response = set_preset(console_admin_client, "limit", "2.5")
    assert "limit: must be an integer" in response.content.decode()
    assert not ToolPreset.objects.exists()
    assert set_preset(console_admin_client, "limit", "10").status_code == 302
    assert ToolPreset.objects.get().value == 10


def test_it_lets_only_admins_set_presets(tool, developer_client) -> None:
    assert developer_client.get("/tools/lookup/presets/").status_code == 403
    response = developer_client.post("/tools/lookup/presets/", {"input": "account", "value": "x"})
    assert response.status_code == 403
    assert not ToolPreset.objects.exists()


def test_it_removes_a_preset(tool, console_admin_client) -> None:
    set_preset(console_admin_client, "account", "acme")
    response = submit(console_admin_client, "/tools/lookup/presets/", button="Remove")
    assert response.status_code == 302
    assert not ToolPreset.objects.exists()
    assert AuditEvent.objects.filter(action="tool.preset.clear").count() == 1


def test_it_never_reveals_a_sensitive_preset(
    tool, console_admin_client, developer_client, provider, capsys
) -> None:
    set_preset(console_admin_client, "account", "acme")
    response = set_preset(console_admin_client, "api_key", CANARY, sensitive=True)
    assert response.status_code == 302

    # The provider echoes the key back: the run record must still not hold it.
    run = run_of(tool, {"query": "q"})
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert provider.last.headers["x-key"] == CANARY  # the request did carry it
    reset_api_caches()
    api = agent_client()
    seen = [
        console_admin_client.get("/tools/lookup/presets/").content.decode(),
        console_admin_client.get("/tools/lookup/").content.decode(),
        developer_client.get("/tools/lookup/run/").content.decode(),
        developer_client.get(f"/runs/{run.pk}/").content.decode(),
        api.get(f"/api/v1/runs/{run.pk}").content.decode(),
        api.get("/api/v1/registry", {"format": "native"}).content.decode(),
        json.dumps([run.params, run.result, run.notices, run.response, run.stderr_tail]),
        json.dumps(list(run.updates.values_list("content", flat=True))),
        json.dumps(list(AuditEvent.objects.values("summary", "data"))),
    ]
    out = io.StringIO()
    call_command("dumpdata", "tools_app", stdout=out)
    seen.append(out.getvalue())
    seen.append(capsys.readouterr().out)
    assert "{{preset.api_key}}" in run.result["content"][0]["text"]
    for text in seen:
        assert CANARY not in text
    assert CANARY not in ToolPreset.objects.get(input="api_key").ciphertext


def test_it_lists_user_only_and_hidden_inputs_natively_only(tool) -> None:
    manifest = setup.manifest_of(tool.published_version)
    assert list(schema.input_schema(manifest, for_model=True)["properties"]) == ["query"]
    native = schema.tool_entry(manifest, fmt="native")["input_schema"]["properties"]
    assert list(native) == ["account", "api_key", "limit", "query"]


def test_it_rotates_a_sensitive_preset_with_the_keys(
    tool,
    console_admin_client,
    provider,
    fernet_keys,  # noqa: F811 (the fixture imported above)
) -> None:
    from tools_app.integrations.rotation import rotate_keys

    fernet_keys("old")
    set_preset(console_admin_client, "account", "acme")
    set_preset(console_admin_client, "api_key", CANARY, sensitive=True)
    fernet_keys("new", "old")

    assert rotate_keys().presets == 1

    fernet_keys("new")  # the old key is gone: the preset still decrypts
    assert run_of(tool, {"query": "q"}).status == RunStatus.SUCCEEDED
    assert provider.last.headers["x-key"] == CANARY


def test_it_counts_a_sensitive_preset_in_the_vault_health(
    tool,
    console_admin_client,
    viewer_client,
    fernet_keys,  # noqa: F811 (the fixture imported above)
) -> None:
    from tools_app.integrations import vault

    def errors() -> list[str]:
        return [f"{m.id}: {m.msg}" for m in vault.check_encryption_keys()]

    fernet_keys("old")
    set_preset(console_admin_client, "account", "acme")  # plain: nothing to decrypt
    set_preset(console_admin_client, "api_key", CANARY, sensitive=True)
    assert errors() == []

    fernet_keys("new", "old")
    assert vault.secret_health() == vault.SecretHealth(total=1, unknown_key=0, not_primary=1)
    # The System page lists every configuration warning in full (the banner links there).
    assert "1 stored secret still encrypted with an older key" in (
        console_admin_client.get("/system/").content.decode()
    )

    fernet_keys("replaced")  # the key it was sealed under is no longer configured
    assert vault.secret_health().unknown_key == 1
    assert errors() == [
        "tools_app.E102: 1 stored secret cannot be decrypted: encrypted with a key that is "
        "not in CONSOLE_ENCRYPTION_KEYS (add the old key back, after the new one, then run "
        "`manage.py rotate_encryption_keys`)"
    ]
    page = console_admin_client.get("/system/").content.decode()
    assert "Encryption keys: 1 stored secret cannot be decrypted" in page
    assert CANARY not in page
    assert CANARY not in viewer_client.get("/integrations/").content.decode()

    # A row claiming the current key, sealed under another: only decrypting finds it.
    ToolPreset.objects.filter(sensitive=True).update(key_id=vault.primary_key_id())
    assert vault.undecryptable_sample() == ["preset lookup.api_key"]
    assert errors() == [
        "tools_app.E102: stored secrets cannot be decrypted with the configured keys: "
        "preset lookup.api_key"
    ]


def test_it_redacts_each_item_of_a_sensitive_list_preset(
    settings, provider, console_admin_client
) -> None:
    """A string[] preset's items travel one by one (?key=a&key=b); each is redacted."""
    settings.ALLOWED_HOSTS = ["testserver"]
    settings.TOOL_NETWORK_ALLOW = provider.url.removeprefix("http://")
    provider.handler = echo
    text = (
        "---\nname: lister\ndescription: Lists.\nkind: http\ninputs:\n"
        '  keys: {type: "string[]", description: Keys, visibility: user-only, sensitive: true}\n'
        f"request:\n  method: GET\n  url: {provider.url}/list\n"
        '  query: {key: "{{keys}}"}\n---\n# Lister\n'
    )
    files = {"TOOL.md": text.encode(), "samples/x.json": json.dumps(SAMPLE).encode()}
    save_version("lister", files, actor=Actor.system(), publish=True)
    items = [f"{CANARY}-a", f"{CANARY}-b"]
    changes = {"input": "keys", "value": json.dumps(items), "sensitive": "on"}
    response = submit(console_admin_client, "/tools/lister/presets/", changes,
                      button="Save preset")  # fmt: skip
    assert response.status_code == 302
    run = run_of(Tool.objects.get(name="lister"), {})
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert provider.last.path == f"/list?key={items[0]}&key={items[1]}"
    stored = json.dumps([run.params, run.result, run.response])
    assert CANARY not in stored
    assert "key={{preset.keys.0}}&key={{preset.keys.1}}" in stored


def test_it_shows_a_plain_preset_as_json(tool, console_admin_client) -> None:
    set_preset(console_admin_client, "account", 'say "hi"')
    set_preset(console_admin_client, "limit", "7")
    page = console_admin_client.get("/tools/lookup/presets/").content.decode()
    # JSON as TOOL.md and the API write it, not Python's repr ('say "hi"', True, None).
    assert "<code>&quot;say \\&quot;hi\\&quot;&quot;</code>" in page
    assert "<code>7</code>" in page
    assert ToolPreset(value=["Ann", True, None]).shown == '["Ann", true, null]'
