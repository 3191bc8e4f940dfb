"""docs/commands.md "Exit codes": exit 0 success, 1 a reported failure, 2 bad usage. Every
command the README lists, run the way a person runs it (`manage.py ...` in its own process,
a file database), with the exit status and the message each case must give."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support import REPO, console_env, tool_files
from tests.support import integrations as support

# A child per case, forked from one process that loaded Django once (a process per case
# would spend most of the test starting Python). Each child runs manage.py's own entry
# point, so argparse errors exit as on a terminal.
DRIVER = """
import json, os, sys
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
django.setup()
from django.core.management import execute_from_command_line
results = []
for argv in json.load(sys.stdin):
    out, err = os.open(os.devnull, os.O_RDONLY), None
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(write_end, 1)
        os.dup2(write_end, 2)
        code = 0
        try:
            execute_from_command_line(["manage.py", *argv])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    results.append([os.waitstatus_to_exitcode(status), b"".join(chunks).decode("utf-8", "replace")])
print(json.dumps(results))
"""


def write_tool(folder: Path, name: str, text: str | None = None) -> Path:
    """A tool folder; `text` replaces its TOOL.md (an invalid tool)."""
    (folder / name).mkdir(parents=True)
    for path, data in tool_files(name).items():
        if text is not None and path == "TOOL.md":
            data = text.encode()
        (folder / name / path).write_bytes(data)
    return folder / name


READER = ["create_agent_token", "bot", "--scope", "registry:read"]
CREATE_ANN = "from django.contrib.auth.models import User; User.objects.create_user('ann')"


def test_every_readme_command_exits_as_the_readme_says(tmp_path):
    good, bad, empty = tmp_path / "good", tmp_path / "bad", tmp_path / "empty"
    write_tool(good, "greet")
    write_tool(bad, "broken", "no frontmatter")
    empty.mkdir()
    not_openapi = tmp_path / "not-openapi.json"
    not_openapi.write_text(json.dumps({"hello": "world"}))
    nope = str(tmp_path / "nope")
    # (argv, exit status, what the output must say)
    cases: list[tuple[list[str], int, str]] = [
        (["migrate", "-v", "0"], 0, ""),
        # signing_keys ACTION (docs/signing.md): sync_tools and import publish, which signs
        (["signing_keys"], 2, "the following arguments are required: ACTION"),
        (["signing_keys", "list"], 1, "no signing key: run `python manage.py signing_keys"),
        (["sync_tools", "--seed", str(good)], 1, "1 not imported for want of a signing key"),
        (["signing_keys", "create", "--if-missing"], 0, "created"),
        (["signing_keys", "create", "--if-missing"], 0, "nothing to do"),
        (["signing_keys", "create"], 1, "has signing keys already: use rotate"),
        (["signing_keys", "retire", "0" * 16], 1, f"no signing key {'0' * 16}"),
        (["signing_keys", "rotate", "--root-key", nope], 2, f"--root-key {nope}: no such file"),
        (["signing_keys", "list"], 0, "keys.json #1"),
        # sync_tools [--seed DIR] [--data-path DIR]
        (["sync_tools", "--bogus"], 2, "unrecognized arguments: --bogus"),
        (["sync_tools", "--seed", nope], 2, f"--seed {nope}: no such folder"),
        (["sync_tools", "--seed", str(bad)], 1, "1 invalid seed tool(s) skipped"),
        (["sync_tools", "--seed", str(good)], 0, "greet"),
        # validate_tools PATH...
        (["validate_tools"], 2, "the following arguments are required: PATH"),
        (["validate_tools", nope], 2, f"{nope}: no such file or folder"),
        (["validate_tools", str(bad / "broken")], 1, "1 invalid tool(s)"),
        (["validate_tools", str(good / "greet")], 0, ""),
        # run_tool NAME [--version N] [--params JSON] [--timeout S]
        (["run_tool"], 2, "the following arguments are required: NAME"),
        (["run_tool", "nope"], 2, "no tool is named 'nope'"),
        (["run_tool", "greet", "--version", "7"], 2, "greet has no version 7"),
        (["run_tool", "greet", "--params", "{"], 2, "--params is not valid JSON"),
        (["run_tool", "greet", "--timeout", "0"], 2, "--timeout must be between"),
        (["run_tool", "greet", "--timeout", "soon"], 2, "invalid float value: 'soon'"),
        # test_tools [NAME...] [--version N] [--junit FILE] [--timeout S] [--worker]
        (["test_tools", "nope"], 2, "no tool is named 'nope'"),
        (["test_tools", "greet", "--version", "7"], 2, "greet has no version 7"),
        (["test_tools", "--version", "1"], 2, "--version takes exactly one tool NAME"),
        (["test_tools", "greet", "--timeout", "0"], 2, "--timeout must be between"),
        (["test_tools", "greet", "--junit", f"{nope}/r.xml"], 2, "--junit: no folder"),
        (["test_tools", "greet"], 0, "greet v1: no cases"),
        # create_agent_token NAME --scope ...
        (["create_agent_token"], 2, "the following arguments are required"),
        (["create_agent_token", "bot", "--scope", "root"], 2, "unknown scope root"),
        (["create_agent_token", "bot", "--scope", "registry:read"], 0, "shown once"),
        (
            ["create_agent_token", "b", "--scope", "registry:read", "--expires-in", "0"],
            2,
            "1..3650",
        ),
        (
            ["create_agent_token", "b", "--scope", "registry:read", "--expires-in", "x"],
            2,
            "invalid int",
        ),
        (
            ["create_agent_token", "b", "--scope", "registry:read", "--expires-in", "7"],
            0,
            "shown once",
        ),
        (
            ["create_agent_token", "b", "--scope", "registry:read", "--pin", "nope"],
            1,
            "no published tool is named 'nope'",
        ),
        # pin_token PREFIX --approve NAME... | --all | --show
        (["pin_token"], 2, "the following arguments are required: prefix"),
        (["pin_token", "tc_nothere"], 2, "one of the arguments --approve --all --show"),
        (["pin_token", "tc", "--all"], 2, "PREFIX must be at least 4 characters"),
        (["pin_token", "tc_nothere", "--show"], 1, "no agent token has the prefix"),
        # set_integration SLUG --type TYPE [--field NAME=VALUE ...] [--secret-stdin NAME]
        (["set_integration"], 2, "the following arguments are required: slug"),
        (["set_integration", "s", "--type", "searxng", "--field", "url"], 2, "--field needs"),
        (["set_integration", "s", "--type", "searxng", "--field", "=x"], 2, "--field needs"),
        (["set_integration", "s", "--type", "nosuch"], 2, "unknown integration type 'nosuch'"),
        (["set_integration", "s"], 2, "give --type TYPE to create it"),
        (["set_integration", "s", "--type", "searxng"], 1, "url: Base URL is required"),
        (["set_integration", "s", "--type", "searxng", "--field", "url=https://a.example"], 0, ""),
        # verify_ledger (docs/security.md "The secret-usage ledger")
        (["verify_ledger"], 0, "0 rows, chain intact"),
        # rotate_encryption_keys
        (["rotate_encryption_keys", "--batch-size", "0"], 2, "--batch-size must be at least 1"),
        (["rotate_encryption_keys", "--batch-size", "x"], 2, "invalid int value: 'x'"),
        (["rotate_encryption_keys"], 0, "re-encrypted"),
        # import_tools DIR_OR_ZIP [--publish]
        (["import_tools"], 2, "the following arguments are required: DIR_OR_ZIP"),
        (["import_tools", nope], 2, f"{nope}: no such file or folder"),
        (["import_tools", str(empty)], 1, "no tool folders found; nothing imported"),
        (["import_tools", str(bad)], 1, "nothing imported"),
        # import_openapi FILE_OR_URL [--prefix P] [--operation ID ...] [--server URL]
        (["import_openapi"], 2, "the following arguments are required: FILE_OR_URL"),
        (["import_openapi", nope], 2, f"{nope}: no such file"),
        (["import_openapi", str(not_openapi)], 1, ""),
        # grant_role USER ROLE
        (["grant_role", "ann"], 2, "the following arguments are required: ROLE"),
        (["grant_role", "ann", "root"], 2, "unknown role 'root'"),
        (["grant_role", "ann", "auditor"], 1, "no user 'ann'"),
        (["shell", "-c", CREATE_ANN], 0, ""),
        (["grant_role", "ann", "auditor"], 0, "ann is now auditor"),
        (["grant_role", "ann", "none"], 0, "ann is now none"),
    ]
    env = console_env(
        tmp_path, CONSOLE_ENCRYPTION_KEYS=support.new_key(), DJANGO_SETTINGS_MODULE=None
    )
    done = subprocess.run(
        [sys.executable, "-c", DRIVER],
        input=json.dumps([argv for argv, _, _ in cases]),
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.splitlines()[-1])
    wrong = [
        f"manage.py {' '.join(argv)}: exit {code} (docs/commands.md: {expected}), "
        f"said: {said[-400:]}"
        for (argv, expected, message), (code, said) in zip(cases, results, strict=True)
        if code != expected or message not in said
    ]
    assert not wrong, "\n".join(wrong)
