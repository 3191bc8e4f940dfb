"""`import_openapi` (docs/http-tools.md): draft kind: http tools from OpenAPI 3.0/3.1
documents, by command and on the console's import page. Two real public specs ship as test
data (tests/data/openapi/*/NOTICE); hostile documents are refused with nothing imported."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.support.integrations import fernet_keys  # noqa: F401 (fixture)
from tests.support.stand_in import Reply, Request, StandIn
from tools_app.http_tools.context import validation_context
from tools_app.http_tools.openapi import document as openapi_document
from tools_app.manifest import toolmd
from tools_app.manifest.folder import validate_files
from tools_app.models import AuditEvent, Tool

DATA = Path(__file__).resolve().parents[1] / "data" / "openapi"
PETSTORE = DATA / "petstore-expanded" / "petstore-expanded.yaml"
USPTO = DATA / "uspto" / "uspto.json"


@contextmanager
def json_server(answer: Callable[[str], bytes], headers: list | None = None) -> Iterator[int]:
    """A local server that answers each GET with `answer(path)` as JSON; yields its port.
    `headers` collects each request's headers."""

    def reply(request: Request) -> Reply:
        if headers is not None:
            headers.append(request.headers)
        return Reply(200, answer(request.path), "application/json")

    with StandIn(reply, methods=("GET",)) as server:
        yield server.port


def _run(*args: str) -> tuple[str, int]:
    out = io.StringIO()
    try:
        call_command("import_openapi", *args, stdout=out)
    except CommandError as exc:
        return out.getvalue() + f"ERROR {exc}\n", exc.returncode
    return out.getvalue(), 0


def _files(name: str) -> dict[str, bytes]:
    return Tool.objects.get(name=name).versions.get(number=1).file_bytes()


def _manifest(name: str) -> toolmd.Manifest:
    result = validate_files(_files(name), f"{name}/TOOL.md", context=validation_context())
    assert result.ok, result.problems
    return result.manifest


def _spec(paths: dict, **extra) -> dict:
    return {
        "openapi": "3.1.0",
        "info": {"title": "Test API", "version": "1"},
        "servers": [{"url": "https://api.example.com/v1"}],
        "paths": paths,
        **extra,
    }


def _write(tmp_path: Path, document: dict | str, name: str = "spec.json") -> str:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


GET_ITEM = {
    "get": {
        "operationId": "getItem",
        "summary": "Get an item",
        "parameters": [
            {"name": "itemId", "in": "path", "required": True, "schema": {"type": "string"}},
            {"name": "X-Trace", "in": "header", "required": True, "schema": {"type": "string"}},
            {"name": "verbose", "in": "query", "schema": {"type": ["boolean", "null"]}},
        ],
        "responses": {
            "200": {
                "description": "The item",
                "content": {
                    "application/json": {
                        "schema": {"$ref": "#/components/schemas/Item"},
                        "examples": {"one": {"value": {"id": "a1", "size": 3}}},
                    }
                },
            }
        },
    }
}
ITEM_SCHEMA = {
    "Item": {
        "type": "object",
        "required": ["id"],
        "properties": {"id": {"type": "string"}, "size": {"type": "integer"}},
    }
}


# --- The two real specs, by command -------------------------------------------------------


def test_it_imports_the_uspto_spec_end_to_end(db):
    out, code = _run(str(USPTO), "--prefix", "uspto")

    assert code == 0, out
    assert out.splitlines() == [
        "list-data-sets: created uspto_list_data_sets (outputs: total, apis)",
        "list-searchable-fields: created uspto_list_searchable_fields (outputs: value)",
        "perform-search: created uspto_perform_search (outputs: items)",
    ]
    listing = _manifest("uspto_list_data_sets")
    # The {scheme} server variable took its default; the host was literal.
    assert listing.request["url"] == "https://developer.uspto.gov/ds-api/"
    assert listing.outputs["total"] == {
        "type": "integer", "path": "total", "description": "", "nullable": True,
    }  # fmt: skip
    sample = json.loads(_files("uspto_list_data_sets")["samples/openapi.json"])
    assert sample["source"] == (
        "openapi#/paths/~1/get/responses/200/content/application~1json/example"
    )
    assert sample["body"]["total"] == 2  # the documented example, as documented
    fields = _manifest("uspto_list_searchable_fields")
    assert set(fields.inputs) == {"dataset", "version"}
    assert fields.request["url"].endswith("/ds-api/{{dataset}}/{{version}}/fields")
    search = _manifest("uspto_perform_search")
    assert "body" not in search.request  # a form body is not sent as JSON ...
    assert "application/x-www-form-urlencoded) is not sent" in search.body  # ... and it says so
    # Drafts: nothing is published by an import.
    assert not Tool.objects.filter(published_version__isnull=False).exists()
    assert AuditEvent.objects.filter(action="tools.import_openapi").count() == 1


def test_it_refuses_the_petstores_http_server_and_imports_it_with_server(db):
    out, code = _run(str(PETSTORE))
    assert code == 1
    assert "addPet: invalid add_pet (request.url: http:// only to a destination" in out
    assert "nothing imported" in out
    assert not Tool.objects.exists()

    out, code = _run(str(PETSTORE), "--server", "https://petstore.swagger.io/api")
    assert code == 0, out
    assert out.splitlines() == [
        "findPets: created find_pets (outputs: items)",
        "addPet: created add_pet (outputs: name, tag, id)",
        "find pet by id: created find_pet_by_id (outputs: name, tag, id)",
        "deletePet: created delete_pet (no outputs: the response is undocumented)",
    ]
    add = _manifest("add_pet")
    # The object body's properties are typed inputs; the body is a template of them.
    assert add.request["body"] == {"name": "{{name}}", "tag": "{{tag}}"}
    assert add.inputs["name"].type == "string" and not add.inputs["name"].optional
    assert add.inputs["tag"].type == "string" and add.inputs["tag"].optional
    assert "body" not in add.inputs
    # Pet is allOf NewPet + {id}: the sample is built from the documented schema only.
    sample = json.loads(_files("add_pet")["samples/openapi.json"])
    assert sample["body"] == {"name": "string", "tag": "string", "id": 0}
    assert sample["source"].endswith("/responses/200/content/application~1json/schema")
    assert add.outputs["id"]["type"] == "integer" and not add.outputs["id"]["nullable"]
    assert add.outputs["tag"]["nullable"]
    delete = _manifest("delete_pet")
    assert delete.outputs == {} and delete.request["response"] == "text"
    assert "The 204 response documents no JSON body: no outputs" in delete.body
    assert "samples/openapi.json" not in _files("delete_pet")
    find = _manifest("find_pets")
    assert find.request["query"] == {"tags": "{{tags}}", "limit": "{{limit}}"}
    assert find.inputs["limit"].type == "integer" and find.inputs["limit"].optional


def test_it_imports_only_the_chosen_operations_with_a_prefix(db):
    out, code = _run(
        str(PETSTORE), "--server", "https://petstore.swagger.io/api",
        "--prefix", "pets", "--operation", "findPets", "--operation", "DELETE /pets/{id}",
    )  # fmt: skip
    assert code == 0, out
    assert sorted(Tool.objects.values_list("name", flat=True)) == [
        "pets_delete_pet",
        "pets_find_pets",
    ]


def test_it_names_an_unknown_operation(db):
    out, code = _run(str(PETSTORE), "--operation", "nope")
    assert code == 1 and "no such operation: 'nope'" in out


# --- What each operation becomes ----------------------------------------------------------


def test_it_maps_parameters_examples_and_31_types(db, tmp_path):
    spec = _spec({"/items/{itemId}": GET_ITEM}, components={"schemas": ITEM_SCHEMA})
    out, code = _run(_write(tmp_path, spec))
    assert code == 0, out
    manifest = _manifest("get_item")
    assert manifest.request["url"] == "https://api.example.com/v1/items/{{item_id}}"
    assert manifest.request["headers"] == {"X-Trace": "{{x_trace}}"}
    assert manifest.request["query"] == {"verbose": "{{verbose}}"}
    assert manifest.inputs["verbose"].type == "boolean" and manifest.inputs["verbose"].optional
    assert manifest.outputs["id"]["path"] == "id" and not manifest.outputs["id"]["nullable"]
    sample = json.loads(_files("get_item")["samples/openapi.json"])
    assert sample["body"] == {"id": "a1", "size": 3}
    assert sample["source"].endswith("/examples/one/value")


def test_it_reads_yaml_response_codes_written_as_numbers(db, tmp_path):
    text = """openapi: 3.0.3
info: {title: T, version: "1"}
servers: [{url: https://api.example.com}]
paths:
  /status:
    get:
      operationId: status
      responses:
        200:
          description: OK
          content:
            application/json:
              example: {up: true, since: 2024-01-01}
"""
    out, code = _run(_write(tmp_path, text, "spec.yaml"))
    assert code == 0, out
    assert _manifest("status").outputs["up"]["type"] == "boolean"
    sample = json.loads(_files("status")["samples/openapi.json"])
    assert sample["body"] == {"up": True, "since": "2024-01-01"}  # a YAML date, as text


def test_it_reports_a_malformed_operation_instead_of_failing(db, tmp_path):
    bad = {"name": "q", "in": "query", "content": {"application/json": "not a mapping"}}
    spec = _spec({"/x": {"get": {"operationId": "x", "parameters": [bad], "responses": {}}}})
    out, code = _run(_write(tmp_path, spec))
    assert code == 1
    assert "x: invalid x (the operation is malformed (AttributeError" in out
    assert not Tool.objects.exists()


def test_it_follows_a_path_item_ref(db, tmp_path):
    spec = _spec(
        {"/items/{itemId}": {"$ref": "#/components/pathItems/Item"}},
        components={"schemas": ITEM_SCHEMA, "pathItems": {"Item": GET_ITEM}},
    )
    out, code = _run(_write(tmp_path, spec))
    assert code == 0, out
    assert _manifest("get_item").outputs["size"]["type"] == "integer"


def test_it_gives_an_undocumented_response_no_outputs_and_says_so(db, tmp_path):
    spec = _spec(
        {
            "/ping": {
                "get": {"operationId": "ping", "responses": {"default": {"description": "x"}}}
            },
            "/pong": {"post": {"operationId": "pong", "responses": {}}},
        }
    )
    out, code = _run(_write(tmp_path, spec))
    assert code == 0, out
    assert "ping: created ping (no outputs: the response is undocumented)" in out
    assert "pong: created pong (no outputs: the response is undocumented)" in out
    manifest = _manifest("ping")
    assert manifest.outputs == {}
    assert "The document describes no 2xx response: no outputs" in manifest.body


def test_it_declares_an_integration_named_like_the_security_scheme(db, tmp_path):
    spec = _spec(
        {"/items/{itemId}": GET_ITEM},
        components={
            "schemas": ITEM_SCHEMA,
            "securitySchemes": {
                "apify": {"type": "http", "scheme": "bearer"},
                "vendorKey": {"type": "apiKey", "in": "header", "name": "X-Key"},
            },
        },
        security=[{"apify": [], "vendorKey": []}],
    )
    out, code = _run(_write(tmp_path, spec))
    assert code == 0, out
    manifest = _manifest("get_item")
    assert manifest.integrations == ("apify",)
    assert manifest.request["headers"]["Authorization"] == "Bearer {{apify.APIFY_TOKEN}}"
    assert "security scheme `vendorKey` (apiKey) has no integration of that name" in manifest.body


def test_it_skips_an_operation_it_cannot_express(db, tmp_path):
    form = {"required": True, "content": {"application/xml": {"schema": {"type": "object"}}}}
    spec = _spec(
        {
            "/items/{itemId}": GET_ITEM,
            "/upload": {"post": {"operationId": "upload", "requestBody": form, "responses": {}}},
        },
        components={"schemas": ITEM_SCHEMA},
    )
    out, code = _run(_write(tmp_path, spec))
    assert code == 0, out
    assert "upload: skipped upload (its request body is application/xml" in out
    assert list(Tool.objects.values_list("name", flat=True)) == ["get_item"]


# --- Nothing half-imported ----------------------------------------------------------------


def test_it_imports_nothing_when_a_name_clashes(db, tmp_path, make_tool):
    make_tool("find_pets")
    out, code = _run(str(PETSTORE), "--server", "https://petstore.swagger.io/api")
    assert code == 1
    assert "findPets: invalid find_pets (a tool named 'find_pets' exists already" in out
    assert "addPet: skipped add_pet (nothing is imported while another" in out
    assert list(Tool.objects.values_list("name", flat=True)) == ["find_pets"]


def test_it_imports_nothing_when_one_chosen_operation_has_a_reference_cycle(db, tmp_path):
    cyclic = {
        "get": {
            "operationId": "tree",
            "responses": {
                "200": {
                    "description": "x",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/A"}}},
                }
            },
        }
    }
    schemas = {
        **ITEM_SCHEMA,
        "A": {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"}}},
        "B": {"type": "object", "properties": {"a": {"$ref": "#/components/schemas/A"}}},
    }
    spec = _spec({"/items/{itemId}": GET_ITEM, "/tree": cyclic}, components={"schemas": schemas})
    out, code = _run(_write(tmp_path, spec))
    assert code == 1
    assert (
        "tree: invalid tree (reference cycle: #/components/schemas/A -> "
        "#/components/schemas/B -> #/components/schemas/A)"
    ) in out
    assert not Tool.objects.exists()
    # Without the cyclic operation the rest imports.
    out, code = _run(_write(tmp_path, spec), "--operation", "getItem")
    assert code == 0, out


# --- Hostile and invalid documents --------------------------------------------------------

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n" + "".join(
    f"{chr(99 + i)}: &{chr(99 + i)} [{', '.join(['*' + chr(98 + i)] * 9)}]\n" for i in range(7)
)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("openapi: 3.0.0\ninfo: {title: x, version: '1'}\n" + BOMB + "paths: {}\n",
         "anchors and aliases (& and *) are not allowed"),
        ({"swagger": "2.0", "paths": {}}, "Swagger 2.0 (OpenAPI 2) is not supported"),
        ({"info": {}, "paths": {}}, "the 'openapi' version key is missing"),
        ({"openapi": "3.0.3", "info": {}}, "'paths' is missing or not a mapping"),
        ({"openapi": "4.0", "paths": {}}, "OpenAPI '4.0' is not supported"),
        ('{"openapi": "3.0.0", "openapi": "3.1.0", "paths": {}}', "duplicate key 'openapi'"),
        ("openapi: 3.0.0\npaths: {a: [unclosed\n", "YAML syntax error"),
        ("[1, 2]", "the top level must be a mapping"),
        ('{"openapi": "3.0.0", "paths": {}, "x": 1' + "1" * 5000 + "}", "not valid JSON"),
        (_spec({"/x": {"get": {"operationId": "x", "responses": {"200": {
            "$ref": "https://evil.example/responses.yaml#/Ok"}}}}}),
         "external reference 'https://evil.example/responses.yaml#/Ok' is not supported"),
        (_spec({"/x": {"get": {"operationId": "x", "parameters": [
            {"$ref": "other.yaml#/components/parameters/P"}], "responses": {}}}}),
         "external reference 'other.yaml#/components/parameters/P' is not supported"),
        (_spec({"/x": {"get": {"operationId": "x", "responses": {}}}},
               servers=[{"url": "https://{region}.api.example.com",
                         "variables": {"region": {"default": "eu"}}}]),
         "has a templated host: a tool needs a literal host"),
        (_spec({"/x": {"get": {"operationId": "x", "responses": {}}}}, servers=[{"url": "/v3"}]),
         "the server URL '/v3' is relative"),
        (_spec({"/x": {"get": {"operationId": "x", "responses": {}}}}, servers=[]),
         "the document names no server"),
        (_spec({"/x/{{apify.APIFY_TOKEN}}": {"get": {"operationId": "x", "responses": {}}}}),
         "a path may not contain '{{' or '}}'"),
        (_spec({"/x": {"get": {"operationId": "x", "responses": {}}}},
               servers=[{"url": "https://localhost/api"}]),
         "this console's own host"),
    ],
    ids=["yaml-bomb", "swagger-2", "no-openapi", "no-paths", "openapi-4", "duplicate-key",
         "bad-yaml", "not-mapping", "huge-int", "external-ref-url", "external-ref-file",
         "templated-host", "relative-server", "no-server", "template-in-path", "own-host"],
)  # fmt: skip
def test_it_refuses_bad_documents_clearly_and_imports_nothing(db, tmp_path, document, message):
    out, code = _run(_write(tmp_path, document, "spec.yaml"))
    assert code == 1
    assert message in out
    assert not Tool.objects.exists()


def test_it_refuses_a_50_mb_document_by_its_size_before_parsing(db, tmp_path):
    path = tmp_path / "huge.yaml"
    with path.open("wb") as handle:  # garbage: a parser would say so, the size check first
        handle.write(b"\x00{[" * 10)
        handle.truncate(50 * 1024 * 1024)
    out, code = _run(str(path))
    assert code == 1
    assert "the document is 50.0 MiB; at most 10 MiB are read" in out
    with pytest.raises(openapi_document.OpenApiError, match="is 50.0 MiB"):
        openapi_document.parse_document(path.read_bytes())


def test_it_refuses_yaml_bombs_without_expanding_them() -> None:
    with pytest.raises(openapi_document.OpenApiError, match="line 3: YAML anchors and aliases"):
        openapi_document.parse_document(("openapi: 3.0.0\npaths: {}\n" + BOMB).encode())


def test_it_refuses_documents_nested_too_deep() -> None:
    deep = '{"openapi": "3.0.0", "paths": {}, "x": ' + "[" * 5000 + "]" * 5000 + "}"
    with pytest.raises(openapi_document.OpenApiError, match="nested deeper than"):
        openapi_document.parse_document(deep.encode())
    deep_yaml = "openapi: 3.0.0\npaths: {}\nx: " + "[" * 500 + "]" * 500 + "\n"
    with pytest.raises(openapi_document.OpenApiError, match="nested deeper than 64 levels"):
        openapi_document.parse_document(deep_yaml.encode())


# --- The console's import page ------------------------------------------------------------

PAGE = "/tools/-/import-openapi/"


def _read(client, changes: dict):
    from tests.support.forms import submit

    return submit(client, PAGE, changes, button="Read document")


def _choose(client, response, chosen: list[str] | None = None):
    from tests.support.forms import find_form

    form = find_form(response.content.decode(), button="Create drafts")
    data = form.data()
    if chosen is not None:
        data["operations"] = chosen
    return client.post(form.attrs.get("action") or PAGE, data)


def test_it_imports_petstore_on_the_page_choosing_operations(developer_client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("petstore.yaml", PETSTORE.read_bytes(), "application/yaml")
    response = _read(
        developer_client, {"document": upload, "server": "https://petstore.swagger.io/api"}
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "Choose operations of petstore.yaml" in page
    assert "no outputs: the response is undocumented" in page  # deletePet, listed as such
    assert not Tool.objects.exists()  # reading imports nothing

    response = _choose(developer_client, response, ["findPets", "deletePet"])
    assert response.status_code == 200
    assert sorted(Tool.objects.values_list("name", flat=True)) == ["delete_pet", "find_pets"]
    assert 'href="/tools/find_pets/"' in response.content.decode()
    version = Tool.objects.get(name="find_pets").versions.get()
    assert version.author is not None and version.published_at is None


def test_it_imports_a_pasted_spec_with_every_operation_ticked(developer_client):
    response = _read(developer_client, {"text": USPTO.read_text(), "prefix": "uspto"})
    assert response.status_code == 200
    response = _choose(developer_client, response)  # as rendered: the importable ones ticked
    assert response.status_code == 200
    assert Tool.objects.count() == 3


def test_it_shows_bad_documents_on_the_page_never_a_500(developer_client):
    for text, message in [
        ('{"swagger": "2.0", "paths": {}}', "Swagger 2.0 (OpenAPI 2) is not supported"),
        ("openapi: 3.0.0\npaths: {}\n" + BOMB, "anchors and aliases"),
        ("openapi: 3.0.0\n", "&#x27;paths&#x27; is missing"),
    ]:
        response = _read(developer_client, {"text": text})
        assert response.status_code == 400
        assert message in response.content.decode()
    response = _read(developer_client, {})
    assert response.status_code == 400
    assert "Upload a document, paste one or give its URL" in response.content.decode()
    assert not Tool.objects.exists()


def test_it_refuses_a_50_mb_upload_by_its_size(developer_client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("huge.json", b"{" + b" " * (50 * 1024 * 1024), "application/json")
    response = _read(developer_client, {"document": upload})
    assert response.status_code == 400
    assert "The file is 50 MiB; at most 10 MiB are read." in response.content.decode()


def test_it_imports_nothing_when_a_chosen_operation_is_refused(developer_client, make_tool):
    response = _read(
        developer_client,
        {"text": PETSTORE.read_text(), "server": "https://petstore.swagger.io/api"},
    )
    make_tool("find_pets")  # created between reading and choosing
    response = _choose(developer_client, response, ["findPets", "addPet"])
    assert response.status_code == 422
    page = response.content.decode()
    assert "Nothing imported" in page and "exists already" in page
    assert list(Tool.objects.values_list("name", flat=True)) == ["find_pets"]
    response = _choose(developer_client, _read(developer_client, {"text": USPTO.read_text()}), [])
    assert response.status_code == 400  # nothing chosen


def test_it_refuses_a_damaged_document_sent_back(developer_client):
    response = _read(developer_client, {"text": USPTO.read_text()})
    from tests.support.forms import find_form

    form = find_form(response.content.decode(), button="Create drafts")
    # A tampered hidden field: only a forged (or corrupted) POST sends this back.
    response = developer_client.post(PAGE, form.filled({"source": "%%% not base64"}))
    assert response.status_code == 400
    assert "the document sent back is damaged" in response.content.decode()
    response = developer_client.post(PAGE, form.filled({"prefix": "Bad-Prefix!"}))
    assert response.status_code == 400
    assert "prefix &#x27;Bad-Prefix!&#x27;: lowercase letters" in response.content.decode()
    assert not Tool.objects.exists()


def test_it_lets_only_developers_import_and_links_the_page(viewer_client, developer_client):
    assert viewer_client.get(PAGE).status_code == 403
    assert viewer_client.post(PAGE, {"text": USPTO.read_text()}).status_code == 403
    assert not Tool.objects.exists()
    assert f'href="{PAGE}"' in developer_client.get("/tools/").content.decode()
    assert f'href="{PAGE}"' in developer_client.get("/tools/-/import/").content.decode()


# --- An imported tool runs ----------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_an_imported_uspto_tool_runs_against_a_stand_in_server(settings):
    from tools_app.audit import Actor
    from tools_app.catalog.versions import publish_version
    from tools_app.models.runs import RunStatus, RunVia
    from tools_app.runs import execute, start

    example = json.loads(USPTO.read_text())["paths"]["/"]["get"]["responses"]["200"]
    body = json.dumps(example["content"]["application/json"]["example"]).encode()
    seen = []

    def answer(path: str) -> bytes:
        seen.append(path)
        return body

    with json_server(answer) as port:
        settings.ALLOWED_HOSTS = ["console.test"]
        settings.TOOL_NETWORK_ALLOW = f"127.0.0.1:{port}"
        out, code = _run(str(USPTO), "--server", f"http://127.0.0.1:{port}/ds-api",
                         "--operation", "list-data-sets")  # fmt: skip
        assert code == 0, out
        version = Tool.objects.get(name="list_data_sets").versions.get()
        publish_version(version, actor=Actor.system())
        run = start.start_run(version, {}, actor=Actor.system(), via=RunVia.API, enqueue=False)
        run = execute.execute_run(run.pk)
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert seen == ["/ds-api/"]
    assert run.result["structuredContent"]["total"] == 2
    assert run.result["structuredContent"]["apis"][0]["apiKey"] == "oa_citations"


ARRAY_QUERY = {
    "get": {
        "operationId": "listItems",
        "parameters": [
            # form + explode (the default): ?ids=1&ids=2, one key per item
            {"name": "ids", "in": "query",
             "schema": {"type": "array", "items": {"type": "integer"}}},
            {"name": "tags", "in": "query", "style": "form", "explode": False, "required": True,
             "schema": {"type": "array", "items": {"type": "string"}}},
            {"name": "kinds", "in": "query", "style": "pipeDelimited", "explode": False,
             "schema": {"type": "array", "items": {"type": "string"}}},
            {"name": "state", "in": "query", "required": True, "explode": True,
             "schema": {"type": "array", "items": {"type": "string", "enum": ["on", "off"]}}},
        ],
        "responses": {
            "200": {
                "description": "Items",
                "content": {"application/json": {"example": {"count": 2}}},
            }
        },
    }
}  # fmt: skip


def test_it_sends_array_query_parameters_as_the_api_reads_them(db, settings, tmp_path):
    from urllib.parse import urlsplit

    from tools_app.audit import Actor
    from tools_app.catalog.versions import publish_version
    from tools_app.models.runs import RunStatus, RunVia
    from tools_app.runs import execute, start

    seen = []

    def answer(path: str) -> bytes:
        seen.append(urlsplit(path).query)  # the raw query string, as sent
        return b'{"count": 2}'

    with json_server(answer) as port:
        settings.ALLOWED_HOSTS = ["console.test"]
        settings.TOOL_NETWORK_ALLOW = f"127.0.0.1:{port}"
        spec = _spec({"/items": ARRAY_QUERY}, servers=[{"url": f"http://127.0.0.1:{port}"}])
        out, code = _run(_write(tmp_path, spec))
        assert code == 0, out
        manifest = _manifest("list_items")
        # Delimited: one string of joined values, as the API reads it.
        assert manifest.inputs["tags"].type == "string" and not manifest.inputs["tags"].optional
        assert "Values separated by ','" in manifest.inputs["tags"].description
        assert "Values separated by '|'" in manifest.inputs["kinds"].description
        # Exploded: a list input of the item type, repeated per item; nothing is lost.
        assert manifest.inputs["ids"].type == "integer[]" and manifest.inputs["ids"].optional
        assert manifest.inputs["state"].type == "string[]"
        assert not manifest.inputs["state"].optional
        assert 'Items are one of: "on", "off".' in manifest.inputs["state"].description
        assert manifest.request["query"]["ids"] == "{{ids}}"
        assert "array query parameter" not in manifest.body
        from tools_app.manifest import schema

        props = schema.input_schema(manifest)["properties"]
        assert props["ids"]["type"] == "array"
        assert props["ids"]["items"] == {"type": "integer"}
        version = Tool.objects.get(name="list_items").versions.get()
        publish_version(version, actor=Actor.system())
        params = {"ids": [1, 2], "tags": "red,blue", "kinds": "a|b", "state": ["on"]}
        run = start.start_run(version, params, actor=Actor.system(), via=RunVia.API, enqueue=False)
        run = execute.execute_run(run.pk)
        assert run.status == RunStatus.SUCCEEDED, run.result
        params = {"ids": [], "tags": "red", "state": ["on", "off"]}
        run = start.start_run(version, params, actor=Actor.system(), via=RunVia.API, enqueue=False)
        run = execute.execute_run(run.pk)
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert seen == [
        "ids=1&ids=2&tags=red%2Cblue&kinds=a%7Cb&state=on",
        "tags=red&state=on&state=off",  # an empty list is left out
    ]


# --- Security schemes: HTTP Basic and an API key in a cookie ------------------------------

BASIC = base64.b64encode(b"ada:pa55-w0rd-basic").decode()
COOKIE_KEY = "c00kie-key-9d1e7"


@pytest.mark.django_db(transaction=True)
def test_it_sends_basic_and_cookie_credentials_and_redacts_them(
    settings,
    tmp_path,
    fernet_keys,  # noqa: F811
):
    from tools_app.audit import Actor
    from tools_app.catalog.versions import publish_version
    from tools_app.integrations.service import create_integration
    from tools_app.models import Run
    from tools_app.models.runs import RunStatus, RunVia
    from tools_app.runs import execute, start

    fernet_keys("A")
    for slug, env, value in (
        ("basic-login", "BASIC_CRED", BASIC),
        ("session", "SESSION_KEY", COOKIE_KEY),
    ):
        create_integration(
            slug, "custom", actor=Actor.system(), custom_fields=f"{env} secret required",
            secrets={env.lower(): value},
        )  # fmt: skip
    headers: list[dict] = []

    def answer(path: str) -> bytes:  # an API that echoes the credentials it was sent
        auth = headers[-1].get("Authorization", "")
        login = base64.b64decode(auth.removeprefix("Basic ")).decode()
        return json.dumps({"auth": auth, "cookie": headers[-1].get("Cookie"),
                           "login": login}).encode()  # fmt: skip

    operation = {
        "get": {
            "operationId": "whoAmI",
            "security": [{"basicLogin": [], "session": [], "prefs": []}],
            "responses": {"200": {"description": "Me", "content": {"application/json": {
                "example": {"auth": "Basic x", "cookie": "sid=x", "login": "u:p"}}}}},
        }
    }  # fmt: skip
    schemes = {
        "basicLogin": {"type": "http", "scheme": "basic"},
        "session": {"type": "apiKey", "in": "cookie", "name": "sid"},
        "prefs": {"type": "apiKey", "in": "cookie", "name": "lang"},  # no integration
    }
    with json_server(answer, headers) as port:
        settings.ALLOWED_HOSTS = ["console.test"]
        settings.TOOL_NETWORK_ALLOW = f"127.0.0.1:{port}"
        spec = _spec({"/me": operation}, servers=[{"url": f"http://127.0.0.1:{port}"}],
                     components={"securitySchemes": schemes})  # fmt: skip
        out, code = _run(_write(tmp_path, spec))
        assert code == 0, out
        manifest = _manifest("who_am_i")
        assert manifest.integrations == ("basic-login", "session")
        assert manifest.request["headers"] == {
            "Authorization": "Basic {{basic-login.BASIC_CRED}}",
            "Cookie": "sid={{session.SESSION_KEY}}",
        }
        assert "base64 of `user:password`" in manifest.body
        assert "security scheme `prefs` (apiKey) has no integration" in manifest.body
        version = Tool.objects.get(name="who_am_i").versions.get()
        publish_version(version, actor=Actor.system())
        run = start.start_run(version, {}, actor=Actor.system(), via=RunVia.API, enqueue=False)
        run = execute.execute_run(run.pk)
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert headers[-1]["Authorization"] == f"Basic {BASIC}"
    assert headers[-1]["Cookie"] == f"sid={COOKIE_KEY}"
    stored = json.dumps(Run.objects.get(pk=run.pk).result) + json.dumps(run.response or {})
    for secret in (BASIC, COOKIE_KEY, "pa55-w0rd-basic"):  # the password decoded too
        assert secret not in stored
    assert run.result["structuredContent"] == {
        "auth": "Basic {{basic-login.basic_cred}}", "cookie": "sid={{session.session_key}}",
        "login": "{{basic-login.basic_cred}}",
    }  # fmt: skip


# --- FILE_OR_URL: a URL goes through the egress policy ------------------------------------


@pytest.fixture
def spec_server():
    body = USPTO.read_bytes()
    with json_server(lambda path: body) as port:
        yield f"http://127.0.0.1:{port}/uspto.json"


def test_it_refuses_to_fetch_a_document_from_loopback_unless_allowed(db, settings, spec_server):
    settings.TOOL_NETWORK_ALLOW = ""
    out, code = _run(spec_server)
    assert code == 1
    assert "cannot be fetched" in out and "refused by the egress policy" in out
    assert not Tool.objects.exists()

    settings.TOOL_NETWORK_ALLOW = spec_server.split("/")[2]  # the admin allowed it
    out, code = _run(spec_server, "--operation", "list-data-sets")
    assert code == 0, out
    assert "list-data-sets: created list_data_sets (outputs: total, apis)" in out


def test_an_object_bodys_properties_become_typed_inputs(db, tmp_path):
    schema = {
        "type": "object",
        "required": ["title", "count"],
        "properties": {
            "id": {"type": "string", "readOnly": True},
            "title": {"type": "string", "description": "What to call it."},
            "count": {"type": "integer"},
            "kind": {"type": "string", "enum": ["a", "b"]},
            "labels": {"type": "array", "items": {"type": "string"}},
            "owner": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
    }
    op = {
        "operationId": "makeThing",
        "summary": "Make a thing",
        "description": "Creates a thing and returns it",
        "requestBody": {"required": True, "content": {"application/json": {"schema": schema}}},
        "responses": {"204": {"description": "made"}},
    }
    out, code = _run(_write(tmp_path, _spec({"/things": {"post": op}})))
    assert code == 0, out
    thing = _manifest("make_thing")

    assert thing.request["body"] == {
        "title": "{{title}}",
        "count": "{{count}}",
        "kind": "{{kind}}",
        "labels": "{{labels}}",
        "owner": "{{owner}}",
    }
    inputs = thing.inputs
    assert "id" not in inputs  # readOnly: the server's to fill
    assert (inputs["title"].type, inputs["title"].optional) == ("string", False)
    assert inputs["title"].description == "What to call it."
    assert (inputs["count"].type, inputs["count"].optional) == ("integer", False)
    assert inputs["kind"].type == "enum" and inputs["kind"].values == ("a", "b")
    assert inputs["labels"].type == "string[]" and inputs["labels"].optional
    assert inputs["owner"].type == "json"  # nested objects stay one input
    # No filler text: what the document says, or the field's place and type.
    assert inputs["count"].description == "The request body's `count` field (integer)."
    assert not any("No description" in spec.description for spec in inputs.values())
    # The operation's own description reaches agents, not only the page.
    assert thing.description == "Make a thing. Creates a thing and returns it."


def test_a_body_that_takes_other_keys_stays_one_json_input(db, tmp_path):
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    schema["additionalProperties"] = True
    op = {
        "operationId": "open",
        "requestBody": {"content": {"application/json": {"schema": schema}}},
        "responses": {"204": {"description": "ok"}},
    }
    out, code = _run(_write(tmp_path, _spec({"/open": {"post": op}})))
    assert code == 0, out
    manifest = _manifest("open")
    assert manifest.request["body"] == "{{body}}" and manifest.inputs["body"].type == "json"


def test_the_page_reads_a_document_from_a_url_through_the_egress_policy(developer_client):
    """A local document server is a private destination: refused until an admin allows
    it on the System page, then read, previewed and imported."""
    from tools_app.models import EgressException

    ping = {"get": {"operationId": "ping", "responses": {"204": {"description": "ok"}}}}
    document = json.dumps(_spec({"/ping": ping})).encode()
    with json_server(lambda path: document) as port:
        url = f"http://127.0.0.1:{port}/openapi.json"
        refused = _read(developer_client, {"url": url})
        assert refused.status_code == 400
        page = refused.content.decode()
        assert "refused by the egress policy" in page and "System page" in page

        EgressException.objects.create(entry=f"127.0.0.1:{port}")
        read = _read(developer_client, {"url": url})
        page = read.content.decode()
        assert read.status_code == 200, page[-2000:]
        assert f"Choose operations of {url}" in page
        assert "becomes a draft" in page and "created:" not in page
        assert "Nothing is created until you press" in page
        assert 'data-select-all="operations"' in page
    assert not Tool.objects.exists()
    done = _choose(developer_client, read)
    assert done.status_code == 200
    assert Tool.objects.filter(name="ping").exists()


UNDOCUMENTED = {
    "get": {
        "operationId": "listThings",
        "parameters": [
            {"name": "q", "in": "query", "schema": {"type": "string"}},
            {"name": "page", "in": "query", "description": "Which page.", "schema": {}},
        ],
        "responses": {"204": {"description": "ok"}},
    }
}


def test_undocumented_parameters_are_left_empty_with_a_warning(db, tmp_path):
    out, code = _run(_write(tmp_path, _spec({"/things": UNDOCUMENTED})))

    assert code == 0, out
    assert out.splitlines() == [
        "listThings: created list_things (no outputs: the response is undocumented)",
        "  warning: description: the operation has neither summary nor description, so the "
        "tool's is only 'GET /things of Test API'",
        "  warning: inputs.q.description: is empty: say what the input is for (models read it "
        "to fill the input in)",
    ]
    toolmd_text = _files("list_things")["TOOL.md"].decode()
    assert "No description" not in toolmd_text
    assert "description: ''" in toolmd_text  # a slot to fill in, where it belongs
    inputs = _manifest("list_things").inputs
    assert inputs["q"].description == "" and inputs["page"].description == "Which page."


def test_the_page_previews_the_warnings_and_lists_them_after_importing(developer_client):
    response = _read(developer_client, {"text": json.dumps(_spec({"/things": UNDOCUMENTED}))})

    assert response.status_code == 200
    page = response.content.decode()
    assert "warning: inputs.q.description: is empty" in page
    assert "warning: description: the operation has neither summary nor description" in page
    assert "No description" not in page
    response = _choose(developer_client, response)
    assert response.status_code == 200
    assert "warning: inputs.q.description: is empty" in response.content.decode()
    assert Tool.objects.filter(name="list_things").exists()
