"""Every page of the console, for the browser tests that walk them all (phones, axe,
screenshots): a small site to show (`make_site`) and the list of pages (`PAGES`).

A new page is one line in PAGES. `path` may name the site's objects ({run}, {token}); a
page reached by doing something (posting a form) gives `then`, which does it on the page
`path` opened and leaves the browser on the page to check."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.utils import timezone

from tests.support import tool_files
from tests.support.integrations import create as create_integration
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.models import AgentToken, CaseCheck, CaseRun, Run, Tool
from tools_app.models.cases import CaseOutcome, CheckStatus
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import start

INPUTS = {
    "query": {"type": "string", "description": "What to look for."},
    "limit": {"type": "integer", "description": "At most this many.", "optional": True,
              "default": 10},
    "mode": {"type": "enum", "values": "fast,thorough", "description": "How hard to try.",
             "optional": True, "default": "fast"},
    "exact": {"type": "boolean", "description": "Exact matches only.", "optional": True,
              "default": False},
}  # fmt: skip

# List inputs take one item per line; "team" is user-only, so the presets page has a form.
LIST_INPUTS = {
    "names": {"type": "string[]", "description": "Whom to greet."},
    "greeting": {"type": "string", "description": "How to greet.", "optional": True,
                 "default": "hello"},
    "counts": {"type": "integer[]", "description": "Numbers to add up.", "optional": True},
    "weights": {"type": "number[]", "description": "Weights.", "optional": True,
                "default": [1.5, 2]},
    "flags": {"type": "boolean[]", "description": "Flags.", "optional": True},
    "team": {"type": "string[]", "description": "Who is on the team.", "optional": True,
             "visibility": "user-only"},
}  # fmt: skip

# Long enough to overflow a phone if anything on the page refuses to wrap or scroll.
LONG_LINE = "const endpoint = 'https://search.example.org/api/v1/" + "x" * 120 + "';\n"


def make_site(admin) -> dict[str, str]:
    """A tool with a published and a draft version, a finished run, an integration and a
    token: enough for every page to show its content. Returns the objects' ids."""
    files = tool_files("alpha", inputs=INPUTS, integrations=["search"])
    save_version("alpha", files, actor=Actor.system(), publish=True)
    source = files["index.ts"].decode() + LONG_LINE
    changed = tool_files("alpha", inputs=INPUTS, integrations=["search"], source=source)
    save_version("alpha", changed, actor=Actor.system())
    save_version("lists", tool_files("lists", inputs=LIST_INPUTS), actor=Actor.system(),
                 publish=True)  # fmt: skip
    create_integration("search", "searxng", values={"url": "http://127.0.0.1:9/"})
    run = start.start_run(
        Tool.objects.get(name="alpha").published_version,
        {"query": "cats", "limit": 10},
        actor=Actor(user=admin),
        via=RunVia.BROWSER,
        enqueue=False,
    )
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.SUCCEEDED,
        started_at=now,
        finished_at=now,
        heartbeat_at=now,
        isolation="bwrap",
        duration=0.5,
        exit_code=0,
        result={"content": [{"type": "text", "text": "all good " * 40}], "isError": False},
    )
    token, _raw = AgentToken.issue("builder", ["registry"], created_by=admin)
    return {"run": str(run.pk), "token": str(token.pk), "check": str(failed_check(admin).pk)}


def failed_check(admin) -> CaseCheck:
    """A finished check of alpha's draft that asked to publish: one case passed, one failed
    with expected, actual and a diff (the check page's every part)."""
    tool = Tool.objects.get(name="alpha")
    check = CaseCheck.objects.create(
        tool=tool, version=tool.versions.get(number=2), user=admin, via=RunVia.BROWSER,
        status=CheckStatus.FAILED, total=2, passed=1, failed=1, publish_requested=True,
        finished_at=timezone.now(),
    )  # fmt: skip
    passed = {"kind": "is_error", "verdict": "passed", "message": "isError is false", "line": 4}
    failed = {
        "kind": "json_equals", "verdict": "failed", "message": "structuredContent differs",
        "expected": {"title": "Cats", "count": 3}, "actual": {"title": "Cats", "count": 4},
        "diff": '--- expected\n+++ actual\n-  "count": 3\n+  "count": 4\n', "line": 12,
    }  # fmt: skip
    CaseRun.objects.create(
        case_check=check, position=0, name="finds_cats", outcome=CaseOutcome.PASSED,
        checks=[passed],
    )  # fmt: skip
    CaseRun.objects.create(
        case_check=check, position=1, name="counts_cats", outcome=CaseOutcome.FAILED,
        checks=[passed, failed],
    )  # fmt: skip
    return check


def create_token(page) -> None:
    page.fill("input[name=name]", "second")
    page.locator("input[name=scopes]").first.check()
    page.get_by_role("button", name="Create token").click()
    page.locator("#raw-token").wait_for()


def submit_bad_list(page) -> None:
    """The run form sent back with an item that is not an integer (on line 3)."""
    page.fill("textarea[name=names]", "Ann\nBob")
    page.fill("textarea[name=counts]", "1\n\nmany")
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_text("must be an integer").wait_for()


def type_bad_json(page) -> None:
    """The raw JSON editor showing schema problems as they are typed (no post)."""
    page.locator("#raw-json summary").click()
    page.locator("#raw-json .cm-content").click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text('{"query": 3, "colour": "red"}')
    page.locator("#raw-json .json-status.error").wait_for()


def submit_bad_preset(page) -> None:
    """The presets form sent back without a value."""
    page.select_option("select[name=input]", "team")
    page.get_by_role("button", name="Save preset").click()
    page.get_by_text("This field is required.").wait_for()


def find_a_value(page) -> None:
    """Find by value, answered: the results (here none) below the form."""
    page.fill("input[name=value]", "not-a-secret-anyone-used")
    page.get_by_role("button", name="Find runs").click()
    page.locator("#secret-find-results").wait_for()


def test_connection(page) -> None:
    page.get_by_role("button", name="Test connection").click()
    page.locator("#test-result :first-child").wait_for()


@dataclass(frozen=True)
class Page:
    name: str  # screenshots are test-artifacts/<name>-<width>.png
    path: str
    viewer: bool = True  # False: admins only (a viewer gets 403 there)
    then: Callable | None = None
    logged_in: bool = True


PAGES = [
    Page("home", "/"),
    Page("tools", "/tools/"),
    Page("tool", "/tools/alpha/"),
    Page("tool-inputs", "/tools/alpha/inputs/"),
    Page("tool-source", "/tools/alpha/source/"),
    Page("tool-registry", "/tools/alpha/registry/?format=openai"),
    Page("tool-analytics", "/tools/alpha/analytics/"),
    Page("analytics", "/analytics/"),
    Page("tool-presets", "/tools/alpha/presets/", viewer=False),
    Page("tool-import-openapi", "/tools/-/import-openapi/", viewer=False),
    Page("confirm-rollback", "/tools/alpha/rollback/1/", viewer=False),
    Page("confirm-integration-disable", "/integrations/search/disable/", viewer=False),
    Page("tool-edit", "/tools/alpha/edit/", viewer=False),
    Page("tool-new", "/tools/-/new/", viewer=False),
    Page("tool-import", "/tools/-/import/", viewer=False),
    Page("tool-versions", "/tools/alpha/versions/"),
    Page("tool-cases", "/tools/alpha/versions/2/cases/"),
    Page("check", "/checks/{check}/"),
    Page("tool-diff", "/tools/alpha/diff/?a=1&b=2"),
    Page("confirm-publish", "/tools/alpha/publish/2/", viewer=False),
    Page("confirm-unpublish", "/tools/alpha/unpublish/", viewer=False),
    Page("confirm-disable", "/tools/alpha/disable/", viewer=False),
    Page("run-form", "/tools/alpha/run/", viewer=False),
    Page("run-form-json-errors", "/tools/alpha/run/", viewer=False, then=type_bad_json),
    Page("run-form-lists", "/tools/lists/run/", viewer=False),
    Page("run-form-lists-errors", "/tools/lists/run/", viewer=False, then=submit_bad_list),
    Page("tool-presets-lists", "/tools/lists/presets/", viewer=False),
    Page(
        "tool-presets-lists-errors", "/tools/lists/presets/", viewer=False, then=submit_bad_preset
    ),  # fmt: skip
    Page("tool-inputs-lists", "/tools/lists/inputs/"),
    Page("run", "/runs/{run}/"),
    Page("run-save-case", "/runs/{run}/case/", viewer=False),
    Page("runs", "/runs/"),
    Page("integrations", "/integrations/"),
    Page("integration-new", "/integrations/new/", viewer=False),
    Page("integration-new-type", "/integrations/new/searxng/", viewer=False),
    Page("integration", "/integrations/search/"),
    Page("integration-edit", "/integrations/search/edit/", viewer=False),
    Page("integration-test", "/integrations/search/edit/", viewer=False, then=test_connection),
    Page("confirm-integration-delete", "/integrations/search/delete/", viewer=False),
    Page("integration-environment", "/integrations/environment/"),
    Page("tokens", "/tokens/", viewer=False),
    Page("token-new", "/tokens/new/", viewer=False),
    Page("token-created", "/tokens/new/", viewer=False, then=create_token),
    Page("confirm-token-revoke", "/tokens/{token}/revoke/", viewer=False),
    Page("docs", "/docs/"),
    Page("docs-page", "/docs/tool-format/"),
    Page("system", "/system/", viewer=False),
    Page("audit", "/audit/", viewer=False),
    Page("secret-find", "/audit/secrets/find/", viewer=False),
    Page("secret-find-results", "/audit/secrets/find/", viewer=False, then=find_a_value),
    Page("forbidden", "/tokens/", viewer=True),
    Page("not-found", "/no/such/page/"),
    Page("login", "/accounts/login/", logged_in=False),
]


def pages_for(role: str) -> list[Page]:
    """The pages a user of `role` ("admin", "viewer" or "anonymous") can open; a viewer
    also gets the 403 page, an admin never does."""
    if role == "anonymous":
        return [page for page in PAGES if not page.logged_in]
    chosen = [page for page in PAGES if page.logged_in]
    if role == "viewer":
        return [page for page in chosen if page.viewer]
    return [page for page in chosen if page.name != "forbidden"]


def visit(page, tour_page: Page, site: dict[str, str]) -> None:
    """Open `tour_page` in the Playwright `page` (loaded, scripts run) and do its
    `then`, which waits for what it does."""
    response = page.goto(tour_page.path.format(**site))
    assert response is not None
    if tour_page.then is not None:
        tour_page.then(page)
