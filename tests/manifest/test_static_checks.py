"""Static checks: warnings on save, in the editor and in `manage.py check --tag tools`."""

from __future__ import annotations

import io
import subprocess

import pytest
from django.core import checks as django_checks
from django.core.management import call_command

from tests.support import REPO, console_env, manage, tool_files
from tools_app import checks
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.http_tools.checks import ValidationContext
from tools_app.http_tools.context import validation_context
from tools_app.integrations.environment import integration_env
from tools_app.lib import strictyaml
from tools_app.manifest import languages, staticcheck
from tools_app.manifest.folder import validate_files
from tools_app.models import Integration

FULL_BODY = (
    "# Tool\n\n## Authentication\n\nNone.\n\n## Usage\n\nCall it.\n\n## Examples\n\n"
    "```json\n{}\n```\n\n## Errors\n\nNone.\n\n## Notes\n\nNone.\n"
)


def _warnings(language: str, source: str, **kw) -> list[strictyaml.Problem]:
    kw.setdefault("body", FULL_BODY)
    files = tool_files("alpha", language, source=source, **kw)
    result = validate_files(files, "alpha", context=validation_context())
    assert result.ok, result.problems
    env = integration_env(result.manifest.integrations)
    problems = staticcheck.check_tool("alpha", files, result.manifest, env=env)
    assert all(p.severity == "warning" for p in problems)
    return problems


def _keys(problems: list[strictyaml.Problem]) -> list[tuple[str, int]]:
    return [(p.key, p.line) for p in problems]


# --- Environment variables ----------------------------------------------------------------

ENV_READS = {
    "typescript": "const a = process.env.API_TOKEN;\nconst b = process.env['OTHER_KEY'];\n",
    "javascript": "const { API_TOKEN, OTHER_KEY: k } = process.env;\n",
    "python": "import os\na = os.environ['API_TOKEN']\nb = os.getenv('OTHER_KEY', '')\n",
    "bash": 'curl_opts="-s"\necho "$API_TOKEN"\necho "${OTHER_KEY:-none}"\n',
}


@pytest.mark.parametrize("language", ENV_READS)
def test_env_vars_no_integration_provides_are_reported(db, language):
    problems = _warnings(language, ENV_READS[language])

    env = [p for p in problems if p.key == "env"]
    assert [p.message.split()[3] if language != "bash" else p.message for p in env]
    names = {var for p in env for var in ("API_TOKEN", "OTHER_KEY") if var in p.message}
    assert names == {"API_TOKEN", "OTHER_KEY"}
    assert all(p.path == f"alpha/{languages.ENTRY_FILES[language][0]}" for p in env)
    assert "no declared integration provides (integrations: none)" in env[0].message
    assert str(env[0]).startswith(f"alpha/{languages.ENTRY_FILES[language][0]}:")


def test_the_line_of_the_read_is_reported(db):
    problems = _warnings("python", "import os\n\n\nkey = os.environ.get('API_TOKEN')\n")
    assert _keys(problems) == [("env", 4)]


def test_variables_of_declared_integrations_are_fine(db):
    source = "const url = process.env.SEARXNG_URL;\nconst t = process.env.SEARXNG_TOKEN;\n"
    assert _warnings("typescript", source, integrations=["searxng"]) == []
    assert _keys(_warnings("typescript", source)) == [("env", 1), ("env", 2)]


def test_a_console_integration_with_its_own_slug_and_custom_fields(db):
    Integration.objects.create(
        slug="crm-prod",
        type_slug="custom",
        custom_fields=[{"name": "crm_key", "env": "CRM_KEY", "secret": True}],
    )
    source = "import os\nkey = os.environ['CRM_KEY']\n"
    assert _warnings("python", source, integrations=["crm-prod"]) == []


def test_an_unknown_integration_is_reported_instead_of_guessing(db):
    problems = _warnings("python", "import os\nos.environ['X_KEY']\n", integrations=["nowhere"])
    assert _keys(problems) == [("integrations", 1)]
    assert "'nowhere' is not a known integration type" in problems[0].message


def test_it_takes_what_the_integrations_provide_as_an_argument():
    # No database: the variables and the unknown slugs come in an IntegrationEnv.
    files = tool_files(
        "alpha",
        "python",
        source="import os\nos.environ['X_KEY']\n",
        body=FULL_BODY,
        integrations=["crm"],
    )
    manifest = validate_files(files, "alpha", context=ValidationContext()).manifest

    def check(env: staticcheck.IntegrationEnv) -> list[tuple[str, int]]:
        return _keys(staticcheck.check_tool("alpha", files, manifest, env=env))

    assert check(staticcheck.IntegrationEnv(provided=frozenset({"X_KEY"}))) == []
    assert check(staticcheck.NO_INTEGRATIONS) == [("env", 2)]
    assert check(staticcheck.IntegrationEnv(unknown=("crm",))) == [("integrations", 1)]


def test_runtime_variables_inputs_locals_and_comments_are_not_reported(db):
    bash = (
        "#!/bin/bash\n"
        "# uses $NOT_READ_IN_A_COMMENT\n"
        'OUT="${TOOL_OUTPUT_DIR:-.}"\n'
        'CITY="${INPUT_CITY:-}"\n'
        'for ITEM in a b; do echo "$ITEM $OUT $CITY $HOME $1 $? ${#CITY}"; done\n'
        "read -r FIRST SECOND <<< 'a b'\n"
        'echo "$FIRST $SECOND $RANDOM"\n'
        "echo '$SINGLE_QUOTED is not an expansion'\n"
    )
    inputs = {"city": {"type": "string", "description": "A city."}}
    assert _warnings("bash", bash, inputs=inputs) == []


def test_bash_input_variables_for_undeclared_inputs(db):
    problems = _warnings("bash", 'echo "${INPUT_TOWN:-}"\n')
    assert _keys(problems) == [("env", 1)]
    assert "declares no input 'town'" in problems[0].message


# --- Network ------------------------------------------------------------------------------

NETWORK = {
    "typescript": ("const page = await fetch(url);\n", "fetch()", 1),
    "javascript": ("// fetch it\nimport https from 'node:https';\n", "the https module", 2),
    "python": ("import json\nimport requests\n", "the requests module", 2),
    "bash": ('set -e\nbody="$(curl -s https://example.com)"\n', "curl", 2),
}


@pytest.mark.parametrize("language", NETWORK)
def test_network_use_with_network_false(db, language):
    source, what, line = NETWORK[language]

    problems = _warnings(language, source, extra={"network": False})

    [network] = [p for p in problems if p.key == "network"]
    assert f"uses the network ({what}) but TOOL.md says network: false" in network.message
    assert network.line == line
    assert _warnings(language, source) == []  # network: true (the default) is fine


def test_network_words_in_comments_are_not_network_use(db):
    source = "// no fetch(here) at all\n/* curl or fetch(x) */\nconst s = 'fetch(';\n"
    assert _warnings("typescript", source, extra={"network": False}) == []
    assert _warnings("python", "# import requests\n", extra={"network": False}) == []


# --- Inputs -------------------------------------------------------------------------------


def test_inputs_declared_but_never_read(db):
    inputs = {
        "city": {"type": "string", "description": "A city."},
        "units": {"type": "string", "description": "Units.", "optional": True},
    }
    source = "export async function execute(id, params) {\n  return params.city;\n}\n"

    problems = _warnings("typescript", source, inputs=inputs)

    text = tool_files("alpha", inputs=inputs)["TOOL.md"].decode()
    units_line = text.splitlines().index("  units:") + 1
    assert _keys(problems) == [("inputs.units", units_line)]
    assert problems[0].path == "alpha/TOOL.md"
    assert problems[0].message == "input 'units' is declared but the code never reads it"


def test_inputs_read_in_each_language(db):
    inputs = {"city": {"type": "string", "description": "A city."}}
    source = "def execute(i, params, s, u):\n    return params['city']\n"
    assert _warnings("python", source, inputs=inputs) == []
    assert _warnings("bash", 'echo "$INPUT_CITY"\n', inputs=inputs) == []
    assert _warnings("bash", "jq -r .city\n", inputs=inputs) == []
    # A mention in a comment is not a read.
    [unread] = _warnings("python", "# params['city']\n", inputs=inputs)
    assert unread.key == "inputs.city"


# --- Body sections ------------------------------------------------------------------------


def test_missing_body_sections(db):
    body = "# Tool\n\n## Usage\n\nCall it.\n\n```md\n## Examples\n```\n\n## Error handling\n\nx\n"

    problems = _warnings("typescript", "// ok\n", body=body)

    [missing] = problems
    assert missing.key == "body"
    assert missing.message.startswith("missing sections ## Authentication, ## Examples, ## Notes")
    assert missing.line == 6  # where the body starts


def test_the_seed_tools_pass_every_static_check(db):
    from tools_app.catalog import bundle

    for folder in sorted((REPO / "seed" / "tools").iterdir()):
        files = bundle.read_tool_dir(folder)
        result = validate_files(files, str(folder), context=validation_context())
        env = integration_env(result.manifest.integrations)
        assert staticcheck.check_tool(folder.name, files, result.manifest, env=env) == [], (
            folder.name
        )


# --- Where the warnings show --------------------------------------------------------------


def test_the_editor_shows_the_warnings_of_the_saved_version(developer_client, db):
    save_version(
        "alpha",
        tool_files("alpha", source="const k = process.env.API_TOKEN;\n", body=FULL_BODY),
        actor=Actor.system(),
    )
    html = developer_client.get("/tools/alpha/edit/").content.decode()
    assert "alpha/index.ts:1: env: warning: reads environment variable API_TOKEN" in html
    assert "Warnings never block saving." in html


def test_check_tag_tools_reports_every_latest_version(db):
    assert django_checks.tag_exists("tools")
    save_version("alpha", tool_files("alpha", body=FULL_BODY), actor=Actor.system())
    save_version(
        "alpha",
        tool_files("alpha", source="fetch(u)\n", extra={"network": False}, body=FULL_BODY),
        actor=Actor.system(),
    )
    save_version("beta", tool_files("beta", body="# Beta\n"), actor=Actor.system())

    messages = checks.check_tools()

    assert [(m.id, m.obj.name) for m in messages] == [
        ("tools_app.W102", "alpha"),
        ("tools_app.W104", "beta"),
    ]
    assert messages[0].msg.startswith("alpha/index.ts:1: network: warning: uses the network")
    out, err = io.StringIO(), io.StringIO()
    call_command("check", "--tag", "tools", stdout=out, stderr=err)  # warnings never fail
    assert "tools_app.W102" in out.getvalue() + err.getvalue()


def test_check_tag_tools_from_the_command_line(tmp_path):
    env = console_env(tmp_path)

    def command(*args: str) -> subprocess.CompletedProcess:
        return manage(*args, env=env, timeout=120)

    # Before the tables exist, the check has nothing to say (and does not crash).
    assert command("check", "--tag", "tools").returncode == 0
    assert command("migrate", "-v", "0").returncode == 0
    folder = tmp_path / "src" / "alpha"
    folder.mkdir(parents=True)
    for rel, data in tool_files("alpha", source="const t = process.env.SECRET;\n").items():
        (folder / rel).write_bytes(data)
    assert command("import_tools", str(folder)).returncode == 0

    done = command("check", "--tag", "tools")

    assert done.returncode == 0
    output = done.stdout + done.stderr
    assert (
        "(tools_app.W101) alpha/index.ts:1: env: warning: reads environment variable SECRET"
        in output
    )
    assert "(tools_app.W104)" in output
