"""kind: http tools: TOOL.md keys and the three checks (docs/http-tools.md), case by case
from tests/data/http, through the same validation as validate_tools, saving and publishing."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.support import tool_files
from tests.support.forms import link, submit
from tools_app.http_tools.checks import ValidationContext
from tools_app.http_tools.context import validation_context
from tools_app.manifest import toolmd
from tools_app.manifest.folder import validate_files, validate_tool_dir
from tools_app.models import EgressException, Integration

CASES = Path(__file__).resolve().parents[1] / "data" / "http"
NAMES = sorted(p.name for p in CASES.iterdir() if p.is_dir())


@pytest.fixture
def console(settings):
    settings.ALLOWED_HOSTS = ["console.example.org", "127.0.0.1", "localhost"]
    settings.TOOL_NETWORK_ALLOW = ""
    return settings


def _problems(case: Path, settings) -> list[str]:
    allow = case / "allow.txt"
    settings.TOOL_NETWORK_ALLOW = allow.read_text().strip() if allow.exists() else ""
    result = validate_tool_dir(case / "tool", context=validation_context())
    return [str(p).replace(str(case) + "/", "") for p in result.problems]


@pytest.mark.django_db
@pytest.mark.parametrize("name", NAMES)
def test_it_reports_each_case_with_file_line_and_key(name: str, console) -> None:
    case = CASES / name
    expected = [line for line in (case / "expected.txt").read_text().splitlines() if line]
    problems = _problems(case, console)
    errors = [p for p in problems if ": warning: " not in p]
    for wanted in expected:
        assert any(wanted in p for p in errors), f"{wanted!r} not in {errors}"
    if name.startswith("v"):
        assert errors == []
    else:
        assert len(errors) == len(expected), errors


def test_it_has_a_passing_and_a_failing_case_for_each_check() -> None:
    text = {n: (CASES / n / "expected.txt").read_text() for n in NAMES}
    assert any(n.startswith("v") for n in NAMES)
    for needle in ("own host", "refused by the egress policy", "http:// only", "hidden input"):
        assert any(needle in t for t in text.values()), needle
    assert any("unverified output" in t for t in text.values())


@pytest.mark.django_db
def test_it_parses_the_http_keys_into_the_manifest(console) -> None:
    result = validate_tool_dir(
        CASES / "v02_post_body_hidden_token" / "tool", context=validation_context()
    )
    manifest = result.manifest
    assert manifest is not None and manifest.kind == "http"
    assert manifest.request["method"] == "POST"
    assert manifest.request["body"] == {"input": "{{body_extra}}", "tag": "run-{{actor_id}}"}
    assert manifest.request["timeout"] == 30.0
    assert manifest.outputs["run_id"]["path"] == "data.id"
    assert [i.visibility for i in manifest.inputs.values()] == ["user-only", "llm-only", "hidden"]
    assert manifest.inputs["body_extra"].type == "json"
    again = toolmd.Manifest.from_dict(manifest.to_dict(), body=manifest.body)
    assert again == manifest


@pytest.mark.django_db
def test_it_fails_validate_tools_for_an_unverified_output(console, capsys) -> None:
    with pytest.raises(CommandError):
        call_command("validate_tools", str(CASES / "i09_unverified_output" / "tool"))
    assert "outputs.status: unverified output" in capsys.readouterr().out


@pytest.mark.django_db
def test_it_refuses_to_save_and_so_to_publish_an_http_tool_with_an_error(console) -> None:
    from tools_app.catalog import bundle, versions

    files = bundle.read_tool_dir(CASES / "i03_console_own_host" / "tool")
    assert not versions.validate("tool", files, validation_context()).ok
    good = bundle.read_tool_dir(CASES / "v01_get_with_outputs" / "tool")
    assert versions.validate("tool", good, validation_context()).ok


@pytest.mark.django_db
def test_it_blocks_publishing_once_the_request_is_out_of_bounds(console, console_admin) -> None:
    from django.test import Client

    from tools_app.audit import Actor
    from tools_app.catalog import bundle
    from tools_app.catalog.versions import save_version
    from tools_app.models import Tool

    files = bundle.read_tool_dir(CASES / "v01_get_with_outputs" / "tool")
    save_version("tool", files, actor=Actor.system(), publish=False)
    # The console now answers as api.example.com: the draft's URL points back at it.
    console.ALLOWED_HOSTS = ["testserver", "api.example.com"]
    client = Client()
    client.force_login(console_admin)
    confirm = link(client.get("/tools/tool/").content.decode(), "Publish v1")
    response = submit(client, confirm, button="Publish", follow=True)

    assert response.status_code == 200
    assert Tool.objects.get(name="tool").published_version is None
    page = response.content.decode()
    assert "cannot be published" in page and "this console&#x27;s own host" in page


@pytest.mark.django_db
def test_it_shows_the_problem_on_an_editor_save_and_keeps_the_text(
    console, developer_client
) -> None:
    from tests.support.editor import editor_data
    from tools_app.audit import Actor
    from tools_app.catalog import bundle
    from tools_app.catalog.versions import save_version
    from tools_app.models import ToolVersion

    console.ALLOWED_HOSTS = ["testserver", "console.example.org"]
    files = bundle.read_tool_dir(CASES / "v01_get_with_outputs" / "tool")
    save_version("tool", files, actor=Actor.system(), publish=False)
    assert developer_client.get("/tools/tool/").status_code == 200
    data = editor_data(developer_client, "tool")
    data["toolmd"] = data["toolmd"].replace(
        "https://api.example.com", "https://console.example.org"
    )

    response = developer_client.post("/tools/tool/edit/", data)

    assert response.status_code == 422  # the editor's answer to a file with errors
    page = response.content.decode()
    assert "request.url" in page and "own host" in page
    assert "console.example.org/v1/items" in page  # the person's text is kept
    assert ToolVersion.objects.filter(tool__name="tool").count() == 1


LIST_TOOL = """---
name: lister
description: Lists items by id.
kind: http
inputs:
  ids: {type: "integer[]", description: Ids, optional: true, default: [1, 2]}
  tags: {type: "string[]", description: Tags, optional: true, default: DEFAULT}
request:
  method: GET
  url: https://api.example.com/items
  query: {id: "{{ids}}", tag: "{{tags}}"}
  response: text
---
# Lister
"""


@pytest.mark.django_db
def test_it_accepts_list_inputs_in_a_query_and_checks_their_defaults(console) -> None:
    ok = validate_files({"TOOL.md": LIST_TOOL.replace("DEFAULT", '["a"]').encode()},
                               "lister/TOOL.md", context=validation_context())  # fmt: skip
    assert ok.ok, ok.problems
    assert ok.manifest.inputs["ids"].type == "integer[]"
    assert ok.manifest.inputs["ids"].default == [1, 2]
    for default, message in [
        ("a", "inputs.tags.default: must be a list of string values, got a string"),
        ("[1]", "inputs.tags.default: every item must be a string, got an integer"),
    ]:
        bad = validate_files(
            {"TOOL.md": LIST_TOOL.replace("DEFAULT", default).encode()},
            "lister/TOOL.md",
            context=validation_context(),
        )
        assert any(message in str(p) for p in bad.problems), bad.problems


# --- The context the checks get ----------------------------------------------------------


def test_it_checks_an_http_tool_from_the_context_alone() -> None:
    """No database, no settings: the checks know what the context says and nothing more
    (this test has no database, so a query would fail it)."""
    own_host = CASES / "i03_console_own_host" / "tool"
    assert validate_tool_dir(own_host, context=ValidationContext()).ok
    ours = ValidationContext(allowed_hosts=("*", ".example.org"))
    [problem] = validate_tool_dir(own_host, context=ours).errors
    assert "'console.example.org' is this console's own host" in problem.message

    hidden = CASES / "v02_post_body_hidden_token" / "tool"
    [problem] = validate_tool_dir(hidden, context=ValidationContext()).errors
    assert problem.key == "inputs.token" and "nobody can fill" in problem.message
    filled = ValidationContext(integration_fields={"apify": frozenset({"token"})})
    assert validate_tool_dir(hidden, context=filled).ok


@pytest.mark.django_db
def test_it_reads_the_database_only_once_an_http_tool_is_checked(
    console, django_assert_max_num_queries
) -> None:
    with django_assert_max_num_queries(0):  # building it, then checking a code tool
        context = validation_context()
        assert validate_files(tool_files("t", "python"), "t", context=context).ok
    hidden = CASES / "v02_post_body_hidden_token" / "tool"
    with django_assert_max_num_queries(2):  # the integrations, the System page's exceptions
        validate_tool_dir(hidden, context=context)
    with django_assert_max_num_queries(0):  # read once per context
        validate_tool_dir(hidden, context=context)


@pytest.mark.django_db
def test_it_builds_the_context_from_the_settings_and_the_integrations(settings) -> None:
    settings.ALLOWED_HOSTS = ["console.example.org"]
    settings.PUBLIC_URL = "https://console.example.org:8443"
    settings.TOOL_NETWORK_ALLOW = "203.0.113.0/24"
    EgressException.objects.create(entry="198.51.100.7:8080")
    Integration.objects.create(
        slug="searxng", type_slug="searxng", values={"url": "http://127.0.0.1:8888"}
    )
    Integration.objects.create(
        slug="off", type_slug="searxng", values={"url": "http://127.0.0.1:9999"}, enabled=False
    )
    custom = [{"name": "key", "label": "Key", "env": "CRM_KEY", "secret": True}]
    Integration.objects.create(slug="apify", type_slug="custom", custom_fields=custom)

    context = validation_context()

    assert context.allowed_hosts == ("console.example.org",)
    assert context.console_ports == {8443}
    assert context.network_allow == "203.0.113.0/24"
    assert list(context.admin_entries) == ["198.51.100.7:8080"]
    # Only enabled integrations open their URLs; a secret field is no URL to open.
    assert dict(context.integration_urls) == {"searxng": ("http://127.0.0.1:8888",), "apify": ()}
    # Every integration's fields, its own (custom) winning over a type of the same slug,
    # and every type's for an integration not created yet.
    assert context.integration_fields["apify"] == {"key", "crm_key"}
    assert context.integration_fields["off"] == {"url", "searxng_url", "token", "searxng_token"}
    assert "openai" in context.integration_fields
