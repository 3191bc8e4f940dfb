"""The proof: a canary secret planted through the form and through set_integration appears
nowhere it must not: no console page or its source, no API answer, no Django admin page
(the secret-usage ledger's too, its CSV/JSONL exports and the find-by-value page), no
dumpdata output, no backup archive, not the raw database, no log line, no audit event,
nothing in DATA_PATH."""

from __future__ import annotations

import base64
import gzip
import io
import itertools
import json
import logging
import sqlite3
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection, transaction
from django.test import Client
from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, reverse

from tests.support import integrations as support
from tests.support import tool_files
from tests.support.forms import submit
from tools_app.integrations.environment import environment_for
from tools_app.integrations.types import integration_types
from tools_app.models import (
    AgentToken,
    AuditEvent,
    Integration,
    IntegrationSecret,
    Run,
    RunArtifact,
    Tool,
)

pytestmark = pytest.mark.django_db(transaction=True)

fake_provider = support.fake_provider
fast_passwords = support.fast_passwords

CANARY_FORM = f"canary-form-{uuid.uuid4().hex}"
CANARY_CLI = f"canary-cli-{uuid.uuid4().hex}"
# A sensitive input sealed in a case (cases.yaml `sealed:`), replayed by a check.
CANARY_CASE = f"canary-case-{uuid.uuid4().hex}"
CANARIES = (CANARY_FORM, CANARY_CLI, CANARY_CASE)
# Smaller pieces too: a page that showed a "masked" secret's ends would leak these.
PIECES = tuple(c[-12:] for c in CANARIES)


def encodings(canary: str) -> dict[str, str]:
    """The forms a tool could print a canary in (computed here, not by the redactor): hex,
    reversed, URL-encoded, and for base64 a stretch from the middle of the encoding at each
    of the three byte alignments, standard and URL-safe, which any base64 text holding the
    canary contains."""
    raw = canary.encode()
    forms = {
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
        "reversed": canary[::-1],
        "url": quote(canary, safe=""),
    }
    for offset, prefix in enumerate((b"", b"a", b"ab")):
        for name, encode in (("b64", base64.b64encode), ("b64url", base64.urlsafe_b64encode)):
            encoded = encode(prefix + raw + b"zz").decode()
            forms[f"{name}@{offset}"] = encoded[4:-8]
    return forms


ENCODED = {f"{c[:11]} {kind}": form for c in CANARIES for kind, form in encodings(c).items()}


def leaks(text: str | bytes) -> list[str]:
    if isinstance(text, bytes):
        found = [c for c in CANARIES + PIECES if c.encode() in text]
        found += [k for k, form in ENCODED.items() if form.encode() in text]
    else:
        found = [c for c in CANARIES + PIECES if c in text]
        found += [k for k, form in ENCODED.items() if form in text]
    return found


# A published tool that leaks both canaries in every form through every channel a run has:
# its result, progress, stderr, an artifact's name and a text artifact's content.
LEAKY_PY = """
import base64, os, sys
from urllib.parse import quote

def execute(tool_call_id, params, signal, on_update):
    lines = []
    for name in ("SEARXNG_TOKEN", "APIFY_TOKEN"):
        s = os.environ.get(name, "")
        raw = s.encode()
        lines += [s, raw.hex(), raw.hex().upper(), s[::-1], quote(s, safe=""),
                  base64.b64encode(raw).decode(), base64.urlsafe_b64encode(b"ab" + raw).decode(),
                  base64.b64encode(b"Bearer " + raw).decode()]
    for line in lines:
        on_update({"content": [{"type": "text", "text": line}]})
        print(line, file=sys.stderr)
    out = os.environ["TOOL_OUTPUT_DIR"]
    name = os.environ.get("APIFY_TOKEN", "").encode().hex()
    with open(os.path.join(out, "leak-" + name + ".txt"), "w") as f:
        f.write("\\n".join(lines))
    return {"content": [{"type": "text", "text": " ".join(lines)}]}
"""


def leaky_runs(admin_user, raw_token: str) -> list[Run]:
    """Real runs of LEAKY_PY: one from the browser, one through the agent API."""
    from tools_app.audit import Actor
    from tools_app.catalog.versions import save_version
    from tools_app.runs import execute as run_execute
    from tools_app.runs import start

    files = tool_files("leaky", "python", LEAKY_PY, integrations=["searxng", "apify"])
    save_version("leaky", files, actor=Actor(user=admin_user), publish=True)
    version = Tool.objects.get(name="leaky").published_version
    started = [start.start_run(version, {}, actor=Actor(user=admin_user), via="browser",
                              enqueue=False)]  # fmt: skip
    api = Client(HTTP_AUTHORIZATION=f"Bearer {raw_token}")
    # The invoke queues its task when the transaction commits: this test runs it here
    # first, so a Celery worker another test started (with other keys) finds it taken.
    with transaction.atomic():
        answer = api.post("/api/v1/tools/leaky/invoke", {}, content_type="application/json")
        assert answer.status_code == 202, answer.content
        started.append(Run.objects.get(pk=answer.json()["run"]))
        done = [run_execute.execute_run(run.pk) for run in started]
    for run in done:
        assert run.status == "succeeded", run.result
        assert run.artifacts.count() == 1
        assert "{{apify.token}}" in run.result["content"][0]["text"]
    return done


# A tool that leaks its sensitive input in every form, like LEAKY_PY its integrations.
KEYED_PY = """
import base64
from urllib.parse import quote

def execute(tool_call_id, params, signal, on_update):
    s = params["key"]
    raw = s.encode()
    lines = [s, raw.hex(), s[::-1], quote(s, safe=""), base64.b64encode(b"ab" + raw).decode()]
    for line in lines:
        on_update({"content": [{"type": "text", "text": line}]})
    return {"content": [{"type": "text", "text": " ".join(lines)}]}
"""
KEYED_INPUTS = {"key": {"type": "string", "description": "A key.", "sensitive": True}}


def case_checks(admin_user, raw_token: str) -> tuple[list, dict[str, bytes]]:
    """A run of KEYED_PY with CANARY_CASE saved as a case (sealed), replayed from the page's
    core, by `test_tools`, and through the agent API; returns the checks and what the
    command and the API answered."""
    from tools_app.audit import Actor
    from tools_app.catalog.versions import save_version
    from tools_app.models import CaseCheck
    from tools_app.runs import execute as run_execute
    from tools_app.runs import replay, start

    actor = Actor(user=admin_user)
    files = tool_files("keyed", "python", KEYED_PY, inputs=KEYED_INPUTS)
    version = save_version("keyed", files, actor=actor, publish=True).version
    run = start.start_run(version, {"key": CANARY_CASE}, actor=actor, via="browser",
                          enqueue=False)  # fmt: skip
    run = run_execute.execute_run(run.pk)
    saved = replay.save_case_from_run(
        run, name="leaks_its_key", description="", sealed_values={"key": CANARY_CASE},
        expect=[{"contains": "{{input.key}}"}, {"not_contains": "canary-case-"}], actor=actor,
    )  # fmt: skip
    assert CANARY_CASE not in saved.version.files["cases.yaml"]
    check = replay.start_check(saved.version, actor=actor, via="browser", enqueue=False)
    for run_id in check.case_runs.values_list("run_id", flat=True):
        run_execute.execute_run(run_id)
    check = replay.refresh(CaseCheck.objects.get(pk=check.pk))
    assert check.status == "passed", replay.check_json(check)
    # Published: DATA_PATH then holds its cases.yaml, sealed token and all.
    from tools_app.catalog.versions import publish_version

    publish_version(saved.version, actor=actor)
    answers: dict[str, bytes] = {}
    output = io.StringIO()
    call_command("test_tools", "keyed", stdout=output, stderr=output)
    answers["test_tools output"] = output.getvalue().encode()
    api = Client(HTTP_AUTHORIZATION=f"Bearer {raw_token}")
    path = f"/api/v1/tools/keyed/versions/{saved.version.number}/check"
    # The published version: the token's runs get the sealed input. As in leaky_runs, the
    # runs are executed here before their queued tasks are sent.
    with transaction.atomic():
        answer = api.post(path, {}, content_type="application/json")
        assert answer.status_code == 202, answer.content
        api_check = CaseCheck.objects.get(pk=answer.json()["id"])
        for run_id in api_check.case_runs.values_list("run_id", flat=True):
            run_execute.execute_run(run_id)
    answers["API check start"] = answer.content
    polled = api.get(answer.json()["url"])
    assert polled.json()["status"] == "passed", polled.content
    answers["API check"] = polled.content
    return list(CaseCheck.objects.all()), answers


def walk(resolvers=None, prefix: str = "", namespace: str = ""):
    """Every named URL pattern: (qualified name, parameter names)."""
    for entry in resolvers if resolvers is not None else get_resolver().url_patterns:
        if isinstance(entry, URLResolver):
            ns = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from walk(entry.url_patterns, prefix, ns)
        elif isinstance(entry, URLPattern) and entry.name:
            pattern = entry.pattern
            names = list(getattr(pattern, "converters", {}) or pattern.regex.groupindex)
            yield f"{namespace}{entry.name}", names


def candidates() -> dict[str, list[str]]:
    tools = list(Tool.objects.values_list("name", flat=True))
    numbers = sorted({str(n) for n in Tool.objects.values_list("versions__number", flat=True) if n})
    runs = [str(pk) for pk in Run.objects.values_list("pk", flat=True)]
    values = {
        "name": tools,
        "tool": tools,
        "slug": list(Integration.objects.values_list("slug", flat=True)),
        "type_slug": sorted(integration_types()),
        "pk": [str(pk) for pk in AgentToken.objects.values_list("pk", flat=True)],
        "artifact_id": [str(pk) for pk in RunArtifact.objects.values_list("pk", flat=True)],
        "number": numbers,
        "n": numbers,
        "version": numbers,
        "run_id": runs,
        "id": runs,
    }
    from tools_app.models import CaseCheck

    checks = [str(pk) for pk in CaseCheck.objects.values_list("pk", flat=True)]
    values |= {"check_id": checks, "check": checks, "position": ["0"], "pos": ["0"]}
    values["*"] = sorted({v for vs in values.values() for v in vs})
    return values


def urls(skip_namespaces: tuple[str, ...] = ("admin:",)) -> list[str]:
    found = []
    values = candidates()
    for name, params in walk():
        if name.startswith(skip_namespaces):
            continue
        options = [values.get(p, values["*"][:3]) for p in params]
        for combo in itertools.islice(itertools.product(*options), 40):
            try:
                found.append(reverse(name, kwargs=dict(zip(params, combo, strict=True))))
            except NoReverseMatch:
                continue
    return sorted(set(found))


def body(response) -> bytes:
    if getattr(response, "streaming", False):
        return b"".join(itertools.islice(response.streaming_content, 200))
    return response.content


def test_it_never_reveals_a_canary_secret(
    caplog, capsys, console_admin, console_admin_client, viewer_client, fake_provider, settings
):
    caplog.set_level(logging.DEBUG)
    # A connection test reaches the provider stand-in on 127.0.0.1 only when allowed (the
    # saved integration's URL is allowed to web_search by itself).
    settings.TOOL_NETWORK_ALLOW = "127.0.0.1:" + fake_provider.url.rsplit(":", 1)[1]
    from tools_app.catalog.sync import sync_tools

    sync_tools()  # the seed tools, published, and DATA_PATH written
    assert Tool.objects.filter(name="web_search").exists()

    # 1. Through the form, after a connection test that echoes the token back.
    new_page = reverse("integration_create", args=["searxng"])
    typed = {"field_url": fake_provider.url, "secret_token": CANARY_FORM}

    def press(page: str, button: str, changes: dict, **kw):
        return submit(console_admin_client, page, changes, form_id="integration-form",
                      button=button, **kw)  # fmt: skip

    tested = press(new_page, "Test connection", typed, HTTP_HX_REQUEST="true")
    fake_provider.echo_authorization = True
    fake_provider.status = 401
    echoed = press(new_page, "Test connection", typed)
    assert fake_provider.last.headers["authorization"] == f"Bearer {CANARY_FORM}"
    refused = press(new_page, "Create integration", {**typed, "slug": "searxng",
                                                     "field_url": "not a url"})  # fmt: skip
    assert refused.status_code == 400
    created = press(new_page, "Create integration", {**typed, "slug": "searxng"})
    assert created.status_code == 302
    edit_page = reverse("integration_edit", args=["searxng"])
    stored_test = press(edit_page, "Test connection", {"field_url": fake_provider.url})
    edited = press(edit_page, "Save", {"field_url": "ftp://x", "secret_token": CANARY_FORM})
    assert edited.status_code == 400

    # 2. Through set_integration, from standard input.
    command_output = io.StringIO()
    stdin, sys.stdin = sys.stdin, support.StdinText(CANARY_CLI + "\n")
    try:
        call_command(
            "set_integration", "apify", "--type", "apify", "--secret-stdin", "token",
            stdout=command_output, stderr=command_output,
        )  # fmt: skip
    finally:
        sys.stdin = stdin

    # The canaries really are stored, and a run would receive them.
    env, labels = environment_for(["searxng", "apify"])
    assert env["SEARXNG_TOKEN"] == CANARY_FORM and env["APIFY_TOKEN"] == CANARY_CLI
    assert set(labels) == {"{{searxng.token}}", "{{apify.token}}"}

    # Objects for every page to show: tools, versions, a finished run, a token.
    tool = Tool.objects.get(name="web_search")
    Run.objects.create(
        tool=tool, version=tool.published_version, via="browser", status="succeeded",
        user=console_admin, params={"query": "q"},
        result={"content": [{"type": "text", "text": "{{searxng.token}}"}], "isError": False},
    )  # fmt: skip
    _, raw_token = AgentToken.issue("canary-agent", ["registry:read", "sync:read", "tools:invoke"])
    leaky = leaky_runs(console_admin, raw_token)
    _checks, case_answers = case_checks(console_admin, raw_token)
    sync_tools()  # DATA_PATH after the integrations exist

    checked: dict[str, bytes] = {
        "connection test": tested.content,
        "echoing connection test": echoed.content,
        "refused create form": refused.content,
        "stored-secret test": stored_test.content,
        "refused edit form": edited.content,
        "set_integration output": command_output.getvalue().encode(),
        **case_answers,
    }
    assert b"{{searxng.token}}" in echoed.content  # redacted, not dropped silently

    # Every console page, as an admin and as a viewer, and its HTML source.
    statuses: dict[str, int] = {}
    for url in urls():
        if url.startswith("/api/"):
            continue
        for who, client in (("admin", console_admin_client), ("viewer", viewer_client)):
            response = client.get(url)
            statuses[f"{who} {url}"] = response.status_code
            checked[f"{who} GET {url}"] = body(response)
            if url.startswith("/integrations/"):
                partial = client.get(url, HTTP_HX_REQUEST="true")
                checked[f"{who} htmx GET {url}"] = body(partial)
    for url in [
        "/integrations/",
        "/integrations/searxng/",
        "/integrations/searxng/edit/",
        "/integrations/apify/edit/",
        "/integrations/environment/",
    ]:
        assert statuses[f"admin {url}"] == 200, url
    assert sum(1 for s in statuses.values() if s == 200) >= 20

    # The leaky runs' artifacts, downloaded and as stored.
    for run in leaky:
        for artifact in run.artifacts.all():
            url = reverse("run_artifact", args=[run.pk, artifact.pk])
            response = console_admin_client.get(url)
            assert response.status_code == 200
            checked[f"artifact download {url}"] = body(response)
            checked[f"artifact name {artifact.pk}"] = artifact.name.encode()
    # As stored: in the database (the default artifact store), and no file anywhere else.
    stored = RunArtifact.objects.filter(run__in=leaky)
    assert len(stored) == 2
    for artifact in stored:
        checked[f"stored artifact {artifact.name}"] = RunArtifact.objects.content_of(artifact.pk)
    assert not [p for p in Path(settings.ARTIFACTS_PATH).rglob("*") if p.is_file()]

    # Every agent API answer.
    api = Client(HTTP_AUTHORIZATION=f"Bearer {raw_token}")
    api_urls = [u for u in urls() if u.startswith("/api/")] + ["/api/openapi.json"]
    assert any(u.startswith("/api/v1/") for u in api_urls)
    for url in api_urls:
        checked[f"API GET {url}"] = body(api.get(url))
    for fmt in ("native", "openai", "openai-responses", "anthropic", "mcp"):
        checked[f"API registry {fmt}"] = body(api.get(f"/api/v1/registry?format={fmt}"))

    # The env bridge: the one answer that carries the secrets, only to a secrets:read
    # token and only when it is on. Every other token, and the bridge off, get nothing.
    settings.CONSOLE_ENV_BRIDGE = True
    checked["API env, token without secrets:read"] = body(api.get("/api/v1/env?tools=leaky"))
    _, raw_secrets = AgentToken.issue("canary-env", ["secrets:read"])
    env_api = Client(HTTP_AUTHORIZATION=f"Bearer {raw_secrets}")
    bridged = env_api.get("/api/v1/env?tools=leaky")
    assert bridged.status_code == 200
    assert bridged.json()["env"]["SEARXNG_TOKEN"] == CANARY_FORM
    assert bridged.json()["env"]["APIFY_TOKEN"] == CANARY_CLI
    settings.CONSOLE_ENV_BRIDGE = False
    checked["API env, bridge off"] = body(env_api.get("/api/v1/env?tools=leaky"))

    # Django admin: the index, and the list, add and change pages of every model.
    superuser = User.objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    staff = Client()
    staff.force_login(superuser)
    checked["admin index"] = staff.get(reverse("admin:index")).content
    for model in list(admin.site._registry):
        info = (model._meta.app_label, model._meta.model_name)
        changelist = reverse("admin:{}_{}_changelist".format(*info))
        response = staff.get(changelist)
        assert response.status_code == 200, changelist
        checked[f"admin {changelist}"] = response.content
        checked[f"admin search {changelist}"] = staff.get(changelist, {"q": "canary"}).content
        for obj in model._default_manager.all()[:3]:
            change = reverse("admin:{}_{}_change".format(*info), args=[obj.pk])
            checked[f"admin {change}"] = staff.get(change).content
            history = reverse("admin:{}_{}_history".format(*info), args=[obj.pk])
            checked[f"admin {history}"] = staff.get(history).content
    integration = Integration.objects.get(slug="searxng")
    assert (
        staff.get(reverse("admin:tools_app_integration_change", args=[integration.pk])).status_code
        == 200
    )

    # The secret-usage ledger: its rows (the leaky runs received both canaries), its
    # exports, filtered and not, and find by value with each canary pasted in.
    from tools_app.models import SecretUse

    assert SecretUse.objects.filter(integration__in=["searxng", "apify"]).count() >= 4
    for fmt in ("csv", "jsonl"):
        export = reverse(f"admin:tools_app_secretuse_{fmt}")
        for query in ({}, {"integration": "searxng"}, {"q": "canary"}):
            response = staff.get(export, query)
            assert response.status_code == 200, export
            checked[f"ledger export {fmt} {query}"] = body(response)
    find = reverse("secret_find")
    for canary in (CANARY_FORM, CANARY_CLI):
        found = console_admin_client.post(find, {"value": canary})
        assert found.status_code == 200 and b"2 uses of this value" in found.content
        checked[f"find by value {canary[:11]}"] = found.content

    # dumpdata, every model of every app.
    dump = io.StringIO()
    call_command("dumpdata", stdout=dump)
    checked["dumpdata"] = dump.getvalue().encode()
    assert b"tools_app.integrationsecret" in checked["dumpdata"]

    # A backup archive (manage.py backup): its bytes, and every member decompressed.
    archive = Path(settings.DATA_PATH).parent / "canary-backup.tar"
    call_command("backup", "--quiet", "--output", str(archive))
    checked["backup archive"] = archive.read_bytes()
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            data = tar.extractfile(member).read()
            gzipped = member.name.endswith(".gz")
            checked[f"backup {member.name}"] = gzip.decompress(data) if gzipped else data
    assert any(b"tools_app.integrationsecret" in checked[k] for k in checked if "backup" in k)
    archive.unlink()

    # The raw database. It holds the ciphertexts: proof that these are the real bytes.
    checked["database"] = raw_database(settings)
    for ciphertext in IntegrationSecret.objects.values_list("ciphertext", flat=True):
        assert ciphertext.encode() in checked["database"]

    # Audit events, every column.
    events = list(AuditEvent.objects.values())
    assert {e["action"] for e in events} >= {
        "integration.create",
        "integration.test",
    }
    checked["audit"] = json.dumps(events, default=str).encode()

    # DATA_PATH after a sync.
    data_path = Path(settings.DATA_PATH)
    files = [p for p in data_path.rglob("*") if p.is_file()]
    assert files, "sync wrote nothing to DATA_PATH"
    for path in files:
        checked[f"DATA_PATH {path.relative_to(data_path)}"] = path.read_bytes()
    assert any(p.name == "cases.yaml" and b"sealed:" in p.read_bytes() for p in files)

    # Logs captured at DEBUG during all of the above, and anything printed.
    captured = capsys.readouterr()
    checked["logs"] = caplog.text.encode()
    checked["stdout/stderr"] = (captured.out + captured.err).encode()
    assert caplog.records, "nothing was logged: the log check would prove nothing"

    leaked = {where: leaks(data) for where, data in checked.items() if leaks(data)}
    assert leaked == {}


def raw_database(settings) -> bytes:
    """The database's bytes: SQLite's file image (free pages included), or on PostgreSQL
    every row of every table."""
    if connection.vendor == "sqlite":
        name = str(connection.settings_dict["NAME"])
        if name and "memory" not in name and Path(name).exists():
            # Read in a child process: opening and closing the file here would drop this
            # process's POSIX locks on it (fcntl semantics) and corrupt SQLite's locking.
            files = [name, *map(str, Path(name).parent.glob(Path(name).name + "-*"))]
            return subprocess.run(["cat", *files], capture_output=True, check=True).stdout
        connection.ensure_connection()
        copy_path = Path(settings.DATA_PATH).parent / "database-copy.sqlite3"
        target = sqlite3.connect(copy_path)
        try:
            connection.connection.backup(target)
        finally:
            target.close()
        data = copy_path.read_bytes()
        copy_path.unlink()
        assert b"SQLite format 3" in data[:16]
        return data
    rows = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")  # noqa: S608
            rows.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(rows).encode()
