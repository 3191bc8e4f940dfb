"""Registry formats of a kind: http tool: models see only user-or-llm and llm-only inputs,
the native format lists every input with its visibility and the output schema, MCP gets
`outputSchema`; a caller cannot fill a hidden input."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.agent_api import agent_client, reset_api_caches
from tools_app.audit import Actor
from tools_app.catalog import bundle
from tools_app.catalog.versions import save_version
from tools_app.manifest import schema

TOOL = Path(__file__).resolve().parents[1] / "data" / "http" / "v02_post_body_hidden_token" / "tool"
pytestmark = pytest.mark.django_db


@pytest.fixture
def published(settings):
    settings.ALLOWED_HOSTS = ["testserver"]
    reset_api_caches()
    files = bundle.read_tool_dir(TOOL)
    files["TOOL.md"] = files["TOOL.md"].replace(b"name: tool", b"name: apify_run")
    save_version("apify_run", files, actor=Actor.system(), publish=True)


def entries(fmt: str) -> dict:
    body = agent_client().get("/api/v1/registry", {"format": fmt}).json()
    return body["tools"][0]


def test_it_lists_only_model_visible_inputs_for_models(published) -> None:
    openai = entries("openai")["function"]["parameters"]
    anthropic = entries("anthropic")["input_schema"]
    mcp = entries("mcp")
    for schema_ in (openai, anthropic, mcp["inputSchema"]):
        # actor_id is user-only (a preset), token hidden (the integration): never a model's.
        assert list(schema_["properties"]) == ["body_extra"]
        assert schema_["required"] == []
    assert mcp["outputSchema"] == {
        "type": "object",
        "properties": {"run_id": {"type": "string"}},
        "required": ["run_id"],
    }


def test_it_lists_every_input_and_the_outputs_natively(published) -> None:
    native = entries("native")
    assert list(native["input_schema"]["properties"]) == ["actor_id", "body_extra", "token"]
    assert native["kind"] == "http"
    assert native["output_schema"]["properties"] == {"run_id": {"type": "string"}}


def test_it_refuses_a_hidden_input_from_a_caller(published) -> None:
    from tools_app.models import Tool
    from tools_app.runs.setup import manifest_of

    manifest = manifest_of(Tool.objects.get(name="apify_run").published_version)
    _filled, errors = schema.validate_params(manifest, {"actor_id": "a", "token": "mine"})
    assert errors == ["token: unknown parameter (allowed: actor_id, body_extra)"]
    _filled, errors = schema.validate_params(manifest, {"actor_id": "a"})
    assert errors == []
