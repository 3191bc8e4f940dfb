"""Agent API: replaying a version's cases for CI (POST .../versions/{n}/check, GET
/checks/{id}; scope tools:invoke): the same core as the page, errors in the API's shape,
never a 500 on a bad body, and a check visible only to the token that started it."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.support.cases import GREET_TS, greet_files, run_in_process, save
from tools_app.audit import Actor
from tools_app.catalog.versions import set_enabled
from tools_app.models import AuditEvent, CaseCheck, Run, Tool
from tools_app.models.cases import CheckStatus
from tools_app.models.runs import RunVia
from tools_app.models.tokens import AgentToken, Scope
from tools_app.runs import replay

pytestmark = pytest.mark.django_db

BROKEN_TS = GREET_TS.replace("hello ", "bye ")


@pytest.fixture(autouse=True)
def fresh_parse_cache():
    replay._PARSED.clear()


def agent(*scopes: str, name: str = "ci") -> tuple[AgentToken, Client]:
    token, raw = AgentToken.issue(name, list(scopes or [Scope.TOOLS_INVOKE]))
    return token, Client(headers={"Authorization": f"Bearer {raw}"})


def post_check(client: Client, path: str, body=None, **kw):
    if body is None:
        return client.post(path, **kw)
    if isinstance(body, str | bytes):
        return client.post(path, body, content_type="application/json")
    return client.post(path, body, content_type="application/json")


def test_it_starts_a_check_of_a_draft_and_answers_202_with_the_cases(
    django_capture_on_commit_callbacks,
):
    save(greet_files(), publish=True)
    save(greet_files(source=BROKEN_TS))  # v2, a draft: CI checks it before anyone publishes
    token, client = agent()
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = post_check(client, "/api/v1/tools/greet/versions/2/check")
    assert response.status_code == 202, response.json()
    body = response.json()
    check = CaseCheck.objects.get()
    assert body["id"] == str(check.pk) and body["status"] == "running"
    assert body["url"] == f"/api/v1/checks/{check.pk}" == response["Location"]
    assert [c["name"] for c in body["cases"]] == ["greets_ada", "greets_bob"]
    assert body["tool"] == "greet" and body["version"] == 2
    assert check.token == token and check.via == RunVia.API and len(queued) == 2
    assert set(Run.objects.values_list("token", flat=True)) == {token.pk}
    assert AuditEvent.objects.filter(action="cases.check", actor="token:ci").exists()

    # (No worker here: the runs are executed in this process.)
    run_in_process(check)
    done = client.get(body["url"])
    assert done.status_code == 200
    data = done.json()
    assert data["status"] == "failed" and data["failed"] == 2
    assert data["cases"][0]["checks"][1]["actual"].startswith("bye Ada")


def test_it_runs_only_the_cases_named_and_422s_unknown_ones():
    save(greet_files(), publish=True)
    _, client = agent()
    response = post_check(client, "/api/v1/tools/greet/versions/1/check", {"cases": ["greets_bob"]})
    assert response.status_code == 202
    assert [c["name"] for c in response.json()["cases"]] == ["greets_bob"]

    response = post_check(client, "/api/v1/tools/greet/versions/1/check", {"cases": ["nope"]})
    assert response.status_code == 422
    assert response.json() == {"error": "unknown cases", "detail": ["nope"]}


def test_it_waits_for_the_result_when_asked(monkeypatch):
    save(greet_files(), publish=True)
    _, client = agent()
    # The runs finish "meanwhile": executed here when the API starts waiting.
    original = replay.wait

    def wait(check, timeout):
        run_in_process(check)
        return original(check, timeout)

    monkeypatch.setattr(replay, "wait", wait)
    response = post_check(client, "/api/v1/tools/greet/versions/1/check", {"wait": 5})
    assert response.status_code == 200
    assert response.json()["status"] == "passed" and response.json()["passed"] == 2


def test_a_version_without_cases_is_answered_empty_at_once():
    save(greet_files(cases=None), publish=True)
    _, client = agent()
    response = post_check(client, "/api/v1/tools/greet/versions/1/check")
    assert response.status_code == 200
    assert response.json()["status"] == CheckStatus.EMPTY and response.json()["cases"] == []


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ("{", 400),
        ("[1, 2]", 422),
        ('"text"', 422),
        ("null", 422),
        ('{"cases": "greets_ada"}', 422),
        ('{"cases": [1]}', 422),
        ('{"cases": ["../x"]}', 422),
        ('{"cases": ["a\\u0000b"]}', 422),
        ('{"wait": -1}', 422),
        ('{"wait": 121}', 422),
        ('{"wait": "soon"}', 422),
        ('{"wait": 1e999}', 422),
        ('{"cases": [' + ",".join(['"a"'] * 101) + "]}", 422),
        ('{"x": ' * 100 + "1" + "}" * 100, 400),
    ],
)
def test_a_bad_body_is_a_4xx_in_the_api_shape_never_a_500(body, status):
    save(greet_files(), publish=True)
    _, client = agent()
    response = post_check(client, "/api/v1/tools/greet/versions/1/check", body)
    assert response.status_code == status, response.content
    assert set(response.json()) == {"error", "detail"}
    assert not CaseCheck.objects.exists()


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/tools/nope/versions/1/check",
        "/api/v1/tools/greet/versions/9/check",
        "/api/v1/tools/greet/versions/0/check",
        "/api/v1/tools/greet/versions/99999999999/check",
        "/api/v1/tools/gr%00eet/versions/1/check",
        "/api/v1/tools/" + "x" * 5000 + "/versions/1/check",
    ],
)
def test_unknown_tools_and_versions_are_404s(path):
    save(greet_files(), publish=True)
    _, client = agent()
    response = post_check(client, path)
    assert response.status_code in (404, 422), response.content
    assert set(response.json()) == {"error", "detail"}


def test_a_disabled_tool_is_a_404():
    save(greet_files(), publish=True)
    set_enabled(Tool.objects.get(name="greet"), False, actor=Actor.system())
    _, client = agent()
    assert post_check(client, "/api/v1/tools/greet/versions/1/check").status_code == 404


def test_it_needs_the_tools_invoke_scope():
    save(greet_files(), publish=True)
    assert Client().post("/api/v1/tools/greet/versions/1/check").status_code == 401
    _, reader = agent(Scope.REGISTRY_READ)
    response = post_check(reader, "/api/v1/tools/greet/versions/1/check")
    assert response.status_code == 403
    _, client = agent()
    check_id = post_check(client, "/api/v1/tools/greet/versions/1/check").json()["id"]
    assert reader.get(f"/api/v1/checks/{check_id}").status_code == 403


def test_a_check_is_visible_only_to_the_token_that_started_it(console_admin):
    save(greet_files(), publish=True)
    _, mine = agent(name="mine")
    _, other = agent(name="other")
    check_id = post_check(mine, "/api/v1/tools/greet/versions/1/check").json()["id"]
    assert mine.get(f"/api/v1/checks/{check_id}").status_code == 202
    theirs = other.get(f"/api/v1/checks/{check_id}")
    assert theirs.status_code == 404 and theirs.json()["error"] == "unknown check"
    # A check a person started on the page is no token's either.
    page = replay.start_check(
        CaseCheck.objects.get().version, actor=Actor(user=console_admin), via=RunVia.BROWSER
    )
    assert mine.get(f"/api/v1/checks/{page.pk}").status_code == 404
    for bad in ("nope", "1" * 5000, "00000000-0000-0000-0000-000000000000"):
        response = mine.get(f"/api/v1/checks/{bad}")
        assert response.status_code == 404 and set(response.json()) == {"error", "detail"}
    for bad in ("-1", "121", "x"):
        assert mine.get(f"/api/v1/checks/{check_id}?wait={bad}").status_code == 422


def test_check_status_reads_a_bounded_number_of_queries(django_assert_max_num_queries):
    many = "cases:\n" + "".join(
        f"  - name: c{i}\n    inputs: {{name: N{i}}}\n    expect: [{{is_error: false}}]\n"
        for i in range(40)
    )
    save(greet_files(cases=many), publish=True)
    _, client = agent()
    check_id = post_check(client, "/api/v1/tools/greet/versions/1/check").json()["id"]
    # Token, check, refresh (lock, pending, counts), its cases: not one per case.
    with django_assert_max_num_queries(12):
        response = client.get(f"/api/v1/checks/{check_id}")
    assert response.status_code == 202 and len(response.json()["cases"]) == 40
