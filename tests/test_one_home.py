"""Each concept is defined once: the other places take it from its home."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tools_app.integrations
from tools_app.integrations import types, validation
from tools_app.manifest import languages, toolmd
from tools_app.models.tools import Language
from tools_app.runner import core, standby
from tools_app.runs import progress

APP = Path(__file__).resolve().parents[1] / "tools_app"


def definitions(name: str) -> list[str]:
    """The modules of tools_app that bind `name` at module level (class, def or assignment)."""
    found = []
    for path in sorted(APP.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            targets: list[ast.expr] = []
            if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name == name:
                found.append(str(path.relative_to(APP)))
                continue
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign):
                targets = [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                found.append(str(path.relative_to(APP)))
    return found


def test_it_takes_every_list_of_languages_from_the_parser():
    assert Language.values == [*languages.LANGUAGES, "http"]
    assert core.LANGUAGES is languages.LANGUAGES
    assert set(standby.STANDBY_LANGUAGES) == set(languages.LANGUAGES) - {"bash"}
    assert definitions("LANGUAGES") == ["manifest/languages.py"]


def test_it_has_one_pattern_for_integration_slugs():
    assert validation.SLUG_RE is toolmd.SLUG_RE
    assert definitions("SLUG_RE") == ["manifest/toolmd.py"]


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("Checker", "manifest/document.py"),
        ("InputSpec", "manifest/inputs.py"),
        ("MAX_VERSION", "manifest/limits.py"),
        ("entry_problems", "manifest/entry.py"),
        ("Manifest", "manifest/toolmd.py"),
        ("validate_files", "manifest/folder.py"),
        ("scan", "manifest/folder.py"),
        ("parse_cases", "cases/document.py"),
        ("evaluate", "cases/evaluate.py"),
        ("propose", "cases/propose.py"),
        ("add_case", "cases/write.py"),
        ("check_request", "http_tools/spec.py"),
        ("TEMPLATE_RE", "http_tools/spec.py"),
        ("parse_document", "http_tools/openapi/document.py"),
        ("Resolver", "http_tools/openapi/refs.py"),
        ("Builder", "http_tools/openapi/build.py"),
        ("import_document", "http_tools/openapi/plan.py"),
        ("start_run", "runs/start.py"),
        ("Supervisor", "runs/execute.py"),
        ("cancel_run", "runs/cancel.py"),
        ("reap_dead_runs", "runs/reaper.py"),
        ("open_artifact", "runs/artifacts.py"),
        ("manifest_of", "runs/setup.py"),
        ("IntegrationEnv", "manifest/staticcheck.py"),
        ("integration_env", "integrations/environment.py"),
        ("check_tools", "checks.py"),
        ("ConsoleWarning", "config_warnings.py"),
        ("warning_source", "config_warnings.py"),
    ],
)
def test_it_defines_each_part_of_a_split_module_in_its_module(name, home):
    """The split modules (toolmd.py and folder.py, openapi/plan.py, runs/execute.py,
    staticcheck.py and checks.py, the cases): one home per part."""
    assert definitions(name) == [home]


def test_it_declares_the_htmx_request_type_once():
    assert definitions("HtmxHttpRequest") == ["views/htmx.py"]


def test_it_names_each_list_of_kinds_for_what_it_lists():
    assert definitions("KINDS") == []
    assert languages.TOOL_KINDS == ("code", "http")
    assert types.FIELD_KINDS is validation.FIELD_KINDS == ("string", "url", "path")
    assert progress.VALUE_KIND_NAMES["NaN"] == "NaN"


def test_it_reexports_nothing_from_the_integrations_package():
    public = {
        name
        for name, value in vars(tools_app.integrations).items()
        if not name.startswith("_") and not isinstance(value, type(tools_app))
    }
    assert public == set()


def connected_signals(tree: ast.Module) -> bool:
    """True when a module connects a receiver: @receiver, or .connect() on a signal it
    imports (sending one, as api/errors.py does, is not wiring)."""
    signals = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module
        and (node.module.endswith(".signals") or node.module == "django.dispatch")
        for alias in node.names
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "receiver" and "receiver" in signals:
            return True
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "connect"
            and isinstance(node.value, ast.Name)
            and node.value.id in signals
        ):
            return True
    return False


def test_it_connects_every_signal_receiver_in_one_module():
    """Receivers are wired when ready() imports tools_app/signals.py, not as a side effect
    of importing whichever module holds the work."""
    wiring = {
        str(path.relative_to(APP))
        for path in sorted(APP.rglob("*.py"))
        if "migrations" not in path.parts and connected_signals(ast.parse(path.read_text()))
    }
    assert wiring == {"signals.py"}
