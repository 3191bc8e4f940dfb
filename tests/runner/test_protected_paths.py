"""Integration `path` fields are bound read-only into the sandbox: a path that contains a
protected path (the state dir, the project, DATA_PATH, the encryption key, the SQLite
database) or lies inside one is refused in the form, in set_integration, and again when a
run starts (the reported attack: encryption.key read through a parent of the state dir)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.urls import reverse

from tests.support import integrations as support
from tests.support import require
from tests.support.forms import submit
from tools_app.audit import Actor
from tools_app.integrations.environment import readable_paths_for
from tools_app.integrations.validation import value_problem
from tools_app.models import Integration, Tool
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runner import isolation_level
from tools_app.runs import execute as run_execute
from tools_app.runs import start

pytestmark = pytest.mark.django_db

fast_passwords = support.fast_passwords

READ_PY = """
import os

def execute(tool_call_id, params, signal, on_update):
    target = os.path.join(os.environ.get("EMAIL_DB_PATH", "/nowhere"), params["rel"])
    try:
        with open(target) as f:
            return {"content": [{"type": "text", "text": "READ " + f.read()}]}
    except OSError as exc:
        return {"content": [{"type": "text", "text": "DENIED " + type(exc).__name__}]}
"""


def protected_examples(tmp_path: Path) -> dict[str, str]:
    """Paths to refuse, each with the words its message must hold."""
    examples = {
        "/": "contains the console's state directory",
        str(Path(django_settings.BASE_DIR).parent): "contains the console's",
        str(django_settings.STATE_DIR): "is the console's state directory",
        str(Path(django_settings.STATE_DIR) / "broker"): "lies inside the console's state",
        str(tmp_path): "contains DATA_PATH",
        str(Path(django_settings.DATA_PATH) / "tools"): "lies inside DATA_PATH",
        str(django_settings.ENCRYPTION_KEY_FILE): "is the encryption key file",
        str(django_settings.ENCRYPTION_KEY_FILE.parent / "x" / ".." / ".."): "contains DATA_PATH",
    }
    link = tmp_path / "innocent"
    link.symlink_to(django_settings.ENCRYPTION_KEY_FILE.parent)
    examples[str(link)] = "contains the encryption key file"
    if connection.vendor == "sqlite":
        examples[str(connection.settings_dict["NAME"])] = "the SQLite database"
    return examples


def test_it_refuses_protected_paths_in_the_domain(tmp_path):
    for value, words in protected_examples(tmp_path).items():
        problem = value_problem("path", value)
        assert problem is not None and words in problem, (value, problem)
    fine = tmp_path / "mail" / "archive.sqlite3"
    assert value_problem("path", str(fine)) is None
    assert value_problem("path", "/srv/mail/archive.sqlite3") is None


def test_the_form_refuses_a_parent_of_the_state_dir(console_admin_client, tmp_path):
    url = reverse("integration_create", args=["email_db"])

    button = "Create integration"
    changes = {"slug": "mail", "enabled": "on", "field_path": str(tmp_path)}
    refused = submit(console_admin_client, url, changes, button=button)

    assert refused.status_code == 400
    assert "contains DATA_PATH" in refused.content.decode()
    assert not Integration.objects.exists()
    fine = str(tmp_path / "mail.sqlite3")
    created = submit(console_admin_client, url, {**changes, "field_path": fine}, button=button)
    assert created.status_code == 302
    assert Integration.objects.get(slug="mail").values == {"path": fine}


def test_set_integration_exits_1_on_a_protected_path(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    stdin, sys.stdin = sys.stdin, io.StringIO("")
    try:
        with pytest.raises(CommandError) as caught:
            call_command(
                "set_integration", "mail", "--type", "email_db",
                "--field", f"path={django_settings.ENCRYPTION_KEY_FILE.parent.parent}",
                stdout=out, stderr=err,
            )  # fmt: skip
    finally:
        sys.stdin = stdin

    assert caught.value.returncode == 1
    assert "contains DATA_PATH" in str(caught.value)
    assert not Integration.objects.exists()


@pytest.fixture
def reader(make_tool) -> Tool:
    inputs = {"rel": {"type": "string", "description": "A path under EMAIL_DB_PATH."}}
    return make_tool(
        "reader", language="python", source=READ_PY, inputs=inputs, integrations=["email_db"]
    )


def host_secret(tmp_path: Path) -> str:
    """A readable file inside DATA_PATH: what a tool must not reach through a parent."""
    folder = Path(django_settings.DATA_PATH) / "tools"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "inside.txt").write_text("protected-content")
    (folder / "inside.txt").chmod(0o644)
    for path in (tmp_path, Path(django_settings.DATA_PATH), folder):
        path.chmod(0o755)  # the sandbox's unprivileged uid could read it, if it were bound
    return "data/tools/inside.txt"


def test_a_path_stored_before_the_rule_is_not_bound_at_run_time(reader, tmp_path):
    require(isolation_level()[0] != "bwrap", "binds exist only under bubblewrap")
    rel = host_secret(tmp_path)
    support.create("email_db", values={"path": str(tmp_path / "mail.sqlite3")})
    # Stored before the rule existed: straight into the row, past validation.
    Integration.objects.filter(slug="email_db").update(values={"path": str(tmp_path)})

    run = start.start_run(
        reader.published_version, {"rel": rel}, actor=Actor.system(), via=RunVia.COMMAND,
        enqueue=False,
    )  # fmt: skip
    run = run_execute.execute_run(run.pk)

    assert run.status == RunStatus.SUCCEEDED
    assert run.result["content"][0]["text"].startswith("DENIED"), run.result
    assert any(
        "integration 'email_db' field 'path'" in n and "contains DATA_PATH" in n
        for n in run.notices
    ), run.notices


def test_a_harmless_path_is_bound(reader, tmp_path):
    require(isolation_level()[0] != "bwrap", "binds exist only under bubblewrap")
    shared = tmp_path / "mail"
    shared.mkdir()
    (shared / "note.txt").write_text("hello mail")
    for path in (tmp_path, shared, shared / "note.txt"):
        path.chmod(0o755)
    support.create("email_db", values={"path": str(shared)})

    run = start.start_run(
        reader.published_version, {"rel": "note.txt"}, actor=Actor.system(),
        via=RunVia.COMMAND, enqueue=False,
    )  # fmt: skip
    run = run_execute.execute_run(run.pk)

    assert run.result["content"][0]["text"] == "READ hello mail"
    assert run.notices == []


def test_console_tool_input_dirs_are_checked_too(reader, tmp_path, settings):
    settings.TOOL_INPUT_DIRS = [str(tmp_path), "/"]
    notices: list[str] = []

    assert run_execute.readable_paths([], notices) == ()
    assert len(notices) == 2 and all("CONSOLE_TOOL_INPUT_DIRS" in n for n in notices)


def test_the_sandbox_refuses_a_parent_of_the_project_too(tmp_path):
    """The runner's own last check (no settings there): a parent of the console's files."""
    from tools_app.runner import Limits, RunRequest, run

    require(isolation_level()[0] != "bwrap", "binds exist only under bubblewrap")
    tool = tmp_path / "tool"
    tool.mkdir()
    (tool / "index.sh").write_text('#!/bin/bash\nls "$INPUT_DIR" 2>&1 | head -3\n')
    project = Path(__file__).resolve().parents[2]
    parent = project.parent
    outcome = run(
        RunRequest(
            tool_dir=tool, language="bash", entry="index.sh",
            params={"dir": str(project / "console")},
            tool_call_id="t", env={}, secrets={}, limits=Limits(timeout=10, grace_seconds=1),
            ro_binds=(parent,),
        )
    )  # fmt: skip
    assert "settings.py" not in outcome.result["content"][0]["text"]
    assert any("contains the console's own files" in n for n in outcome.notices)
    assert (project / "console" / "settings.py").is_file()


def as_sqlite(monkeypatch, database: Path) -> None:
    """The console's database seen as the SQLite file `database`, whatever engine this
    run of the suite uses (only the settings the check reads change; the open connection
    stays as it is)."""
    monkeypatch.setitem(connection.settings_dict, "ENGINE", "django.db.backends.sqlite3")
    monkeypatch.setitem(connection.settings_dict, "NAME", str(database))


def test_run_notices_name_no_host_path(tmp_path, settings, monkeypatch):
    """A refused path is named by its setting or integration field and its position,
    never by a host path: run notices reach viewers and the tool itself. The SQLite
    database, the state dir and a folder holding them were all named in full before."""
    database = tmp_path / "var" / "console.sqlite3"
    database.parent.mkdir()
    database.touch()
    as_sqlite(monkeypatch, database)
    state = Path(django_settings.STATE_DIR)
    settings.TOOL_INPUT_DIRS = [str(database), str(database.parent), str(state), "/"]
    notices: list[str] = []

    assert run_execute.readable_paths([], notices) == ()

    assert len(notices) == 4, notices
    assert notices[0] == (
        "CONSOLE_TOOL_INPUT_DIRS path 1 was not made readable: it is the SQLite database: "
        "tools must never read it."
    )
    shown = "\n".join(notices)
    for host_path in (database, database.parent, state, tmp_path, django_settings.BASE_DIR):
        assert str(host_path) not in shown, shown
    assert "'/'" not in shown


def test_an_integrations_refused_path_is_named_by_its_field(tmp_path, monkeypatch):
    database = tmp_path / "console.sqlite3"
    database.touch()
    support.create("email_db", values={"path": str(tmp_path / "mail.sqlite3")})
    Integration.objects.filter(slug="email_db").update(values={"path": str(database)})
    as_sqlite(monkeypatch, database)
    notices: list[str] = []

    assert readable_paths_for(["email_db"], notices) == []

    assert notices == [
        "integration 'email_db' field 'path': path was not made readable: it is the SQLite "
        "database: tools must never read it."
    ]
