"""Integration types: the shipped seed types and validation of type files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tools_app.integrations.errors import InvalidIntegration, UnknownType
from tools_app.integrations.fields import format_custom_fields, parse_custom_fields
from tools_app.integrations.types import (
    IntegrationType,
    get_type,
    integration_type_warnings,
    load_types,
    parse_type,
)

REPO = Path(__file__).resolve().parents[2]


def parse(text: str, slug: str = "demo") -> tuple[IntegrationType | None, list[str]]:
    itype, problems = parse_type(text, f"seed/integrations/{slug}.yaml", slug)
    return itype, [str(p) for p in problems]


GOOD = """\
label: Demo
description: A demo service.
fields:
  - name: url
    env: DEMO_URL
    kind: url
    required: true
  - name: token
    env: DEMO_TOKEN
    secret: true
test:
  url: "{url}/ping"
  headers:
    Authorization: "Bearer {token}"
  expect: [200, 204]
"""


def test_it_ships_the_required_types():
    registry = load_types(REPO / "seed" / "integrations")
    assert [str(p) for p in registry.problems] == []
    types = registry.types
    assert {"searxng", "email_db", "apify", "openai", "custom"} <= set(types)

    def envs(slug: str) -> dict[str, tuple[str, bool, bool]]:
        return {f.env: (f.name, f.secret, f.required) for f in types[slug].fields}

    assert envs("searxng") == {
        "SEARXNG_URL": ("url", False, True),
        "SEARXNG_TOKEN": ("token", True, False),
    }
    assert envs("email_db") == {"EMAIL_DB_PATH": ("path", False, True)}
    assert envs("apify") == {"APIFY_TOKEN": ("token", True, True)}
    assert envs("openai") == {
        "OPENAI_API_KEY": ("api_key", True, True),
        "OPENAI_BASE_URL": ("base_url", False, False),
    }
    assert types["custom"].custom and types["custom"].fields == ()
    assert types["searxng"].test.url == "{url}/search?q=test&format=json"
    assert types["apify"].test.url == "https://api.apify.com/v2/users/me"
    assert types["openai"].test.url == "{base_url}/models"
    assert types["email_db"].test is None and types["custom"].test is None


def test_it_provides_every_integration_the_seed_tools_declare():
    """Each slug a seed tool declares is a type slug (an integration's default slug), and
    the variables the tool reads (its code, or a kind: http tool's request templates) are
    that type's variables."""
    types = load_types(REPO / "seed" / "integrations").types
    for toolmd in sorted((REPO / "seed" / "tools").glob("*/TOOL.md")):
        front = yaml.safe_load(toolmd.read_text().split("---")[1])
        source = "".join(
            p.read_text() for p in toolmd.parent.iterdir() if p.name.startswith("index.")
        )
        if front.get("kind") == "http":  # no code: its request's templates read the fields
            source = str(front.get("request"))
        for slug in front.get("integrations") or []:
            assert slug in types, f"{toolmd}: integration {slug!r} has no type"
            for spec in types[slug].fields:
                if spec.required:
                    assert spec.env in source, f"{toolmd.parent.name} does not read {spec.env}"


def test_it_accepts_a_good_type():
    itype, problems = parse(GOOD)
    assert problems == []
    assert [f.name for f in itype.fields] == ["url", "token"]
    assert itype.test.expect == (200, 204)
    assert itype.test.headers == (("Authorization", "Bearer {token}"),)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            GOOD.replace("    env: DEMO_URL\n", "    env: demo url\n"),
            "seed/integrations/demo.yaml:5: fields[0].env: 'demo url' is not a valid "
            "environment variable name",
        ),
        (
            GOOD.replace("    env: DEMO_URL\n", "    env: LD_PRELOAD\n"),
            "seed/integrations/demo.yaml:5: fields[0].env: 'LD_PRELOAD' is reserved",
        ),
        (
            GOOD.replace("    kind: url\n", "    kind: uri\n"),
            "seed/integrations/demo.yaml:6: fields[0].kind: 'uri' is not one of string, url, path",
        ),
        (
            GOOD.replace("    required: true\n", "    required: true\n    secrte: true\n"),
            "seed/integrations/demo.yaml:8: fields[0].secrte: unknown key",
        ),
        (
            GOOD.replace("  - name: token\n", "  - name: url\n"),
            "seed/integrations/demo.yaml:8: fields[1].name: duplicate field 'url'",
        ),
        (
            GOOD.replace("    env: DEMO_TOKEN\n", "    env: DEMO_URL\n"),
            "seed/integrations/demo.yaml:8: fields[1].env: DEMO_URL is already used by 'url'",
        ),
        (
            GOOD.replace('"{url}/ping"', '"{url}/ping?k={key}"'),
            "seed/integrations/demo.yaml:12: test.url: {key} is not a field of this type",
        ),
        (
            GOOD.replace('"{url}/ping"', '"ftp://example.org/{url}"'),
            "seed/integrations/demo.yaml:12: test.url: must start with http://, https:// or "
            "a {field} of kind url",
        ),
        (
            GOOD.replace("  expect: [200, 204]\n", "  expect: [200, 999]\n"),
            "seed/integrations/demo.yaml:15: test.expect: 999 is not an HTTP status",
        ),
        (
            GOOD.replace("test:\n", "test:\n  method: DELETE\n"),
            "seed/integrations/demo.yaml:12: test.method: 'DELETE' is not one of GET, HEAD, POST",
        ),
        (
            GOOD.replace("label: Demo\n", ""),
            "seed/integrations/demo.yaml:1: label: is required",
        ),
        (
            GOOD.replace("    secret: true\n", "    secret: yes please\n"),
            "seed/integrations/demo.yaml:10: fields[1].secret: must be true or false",
        ),
        (
            GOOD.replace("    secret: true\n", "    secret: true\n    kind: url\n"),
            "seed/integrations/demo.yaml:11: fields[1].kind: secret fields must be of kind string",
        ),
        (
            "label: x\ndescription: y\nfields: &f\n  - {name: a, env: A}\nagain: *f\n",
            "seed/integrations/demo.yaml:3: yaml: YAML anchors and aliases (& and *) are not "
            "allowed",
        ),
        (
            "label: x\ndescription: y\nfields:\n  - name: a\n   env: A\n",
            "seed/integrations/demo.yaml:5: yaml:",
        ),
        ("- just\n- a list\n", "seed/integrations/demo.yaml:1: file: must be a YAML mapping"),
        (
            "label: x\ndescription: y\ncustom: true\nfields:\n  - {name: a, env: A}\n",
            "seed/integrations/demo.yaml:4: fields: a custom type has no fields",
        ),
        ("label: x\ndescription: y\n", "seed/integrations/demo.yaml:1: fields: is required"),
        (
            GOOD + "egress: closed\n",
            "seed/integrations/demo.yaml:16: egress: 'closed' is not one of open, confined",
        ),
        (
            GOOD.replace("    kind: url\n", "") + "egress: confined\n",
            "seed/integrations/demo.yaml:15: egress: confined needs a url field",
        ),
        (
            "label: x\ndescription: y\ncustom: true\negress: confined\n",
            "seed/integrations/demo.yaml:4: egress: a custom type cannot confine egress",
        ),
    ],
)
def test_it_reports_bad_types_with_file_line_and_key(text, expected):
    itype, problems = parse(text)
    assert itype is None
    assert any(p.startswith(expected) for p in problems), problems


def test_it_reads_whether_a_type_confines_egress():
    assert parse(GOOD)[0].confines_egress is False
    assert parse(GOOD + "egress: open\n")[0].confines_egress is False
    assert parse(GOOD + "egress: confined\n")[0].confines_egress is True
    # The seed's browser type: its CDP endpoint is all the browser tool reaches.
    assert load_types(REPO / "seed" / "integrations").types["browser"].confines_egress


def test_it_only_warns_about_unknown_top_level_keys():
    itype, problems = parse(GOOD + "icon: star\n")
    assert itype is not None
    assert problems == [
        "seed/integrations/demo.yaml:16: icon: warning: unknown key, ignored "
        "(known: label, description, custom, fields, test, oauth, egress)"
    ]


def test_it_names_unknown_field_and_test_keys_as_written_with_the_allowed_ones():
    text = GOOD.replace("    kind: url\n", "    kind: url\n    two words: x\n").replace(
        "test:\n", "test:\n  verb: GET\n"
    )
    _, problems = parse(text)
    assert problems == [
        "seed/integrations/demo.yaml:7: fields[0].two words: unknown key "
        "(allowed: name, label, env, kind, secret, required, default, help)",
        "seed/integrations/demo.yaml:13: test.verb: unknown key "
        "(allowed: method, url, headers, body, expect)",
    ]


def test_it_refuses_oversized_files_and_bad_file_names():
    _, problems = parse("label: x\n" + "#" * (64 * 1024))
    assert problems == ["seed/integrations/demo.yaml:1: file: is larger than 64 KiB"]
    _, problems = parse(GOOD, slug="Bad-Name")
    assert problems[0].startswith("seed/integrations/Bad-Name.yaml:1: file: the file name")


def test_it_loads_a_folder_and_reports_invalid_files(tmp_path, settings):
    (tmp_path / "good.yaml").write_text(GOOD)
    (tmp_path / "broken.yaml").write_text(GOOD.replace("DEMO_URL", "lower"))
    (tmp_path / "notes.txt").write_text("ignored")
    settings.INTEGRATION_TYPES_PATH = tmp_path
    registry = load_types()
    assert list(registry.types) == ["good"]
    assert len(registry.problems) == 1 and "broken.yaml:5: fields[0].env" in str(
        registry.problems[0]
    )
    warnings = integration_type_warnings()
    assert len(warnings) == 1 and "broken.yaml:5" in warnings[0].text
    with pytest.raises(UnknownType, match="unknown integration type 'broken'"):
        get_type("broken")
    # Edits are picked up without a restart.
    (tmp_path / "broken.yaml").write_text(GOOD)
    assert set(load_types().types) == {"good", "broken"}


def test_it_shows_invalid_type_files_in_the_banner(tmp_path, settings, console_admin_client):
    (tmp_path / "broken.yaml").write_text("label: [unclosed\n")
    settings.INTEGRATION_TYPES_PATH = tmp_path
    page = console_admin_client.get("/integrations/").content.decode()
    assert "An integration type file is invalid" in page.split("<main")[0]
    page = console_admin_client.get("/system/").content.decode()  # the banner's details
    assert "Integration type file: " in page and "broken.yaml:2: yaml:" in page


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("my token", "'my' is not a valid environment variable name"),
        ("MY_TOKEN secrett", "unknown flag 'secrett'"),
        ("MY_URL secret url", "a secret field cannot be a url or path"),
        ("PATH", "'PATH' is reserved"),
        ("NODE_OPTIONS secret", "'NODE_OPTIONS' is reserved"),
        ("A\nA secret", "A is listed twice"),
        ("# only a comment", "define at least one field"),
    ],
)
def test_it_validates_custom_field_lists(text, error):
    with pytest.raises(InvalidIntegration) as caught:
        parse_custom_fields(text)
    assert error in str(caught.value)


def test_it_parses_custom_field_lists():
    specs = parse_custom_fields("MY_URL url required\n\nMY_TOKEN secret  # the key\n")
    assert [(s.name, s.env, s.kind, s.secret, s.required) for s in specs] == [
        ("my_url", "MY_URL", "url", False, True),
        ("my_token", "MY_TOKEN", "string", True, False),
    ]
    assert format_custom_fields(specs) == "MY_URL required url\nMY_TOKEN secret"
