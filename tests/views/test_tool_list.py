"""The tool list: search, filters, sorting, pagination, htmx partials and bad input."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.support import ENTRY_SOURCE, toolmd_text
from tools_app.audit import Actor
from tools_app.catalog.versions import set_enabled
from tools_app.models import Tool, ToolVersion
from tools_app.models.tools import VersionSource, encode_files
from tools_app.views.tools import PER_PAGE

URL = "/tools/"
HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "tool-results"}


def bulk_tools(count: int, prefix: str = "bulk", language: str = "python") -> list[Tool]:
    """`count` published tools in a handful of queries (save_version would validate and
    mirror each one to DATA_PATH, which takes seconds for 200)."""
    entry, source = ENTRY_SOURCE[language]
    now = timezone.now()
    tools = Tool.objects.bulk_create(
        Tool(
            name=f"{prefix}_{i:03d}",
            label=f"Bulk {i}",
            description=f"Bulk tool number {i}.",
            language=language,
            integration_slugs=",github," if i % 2 else ",slack,github,",
            latest_number=1,
        )
        for i in range(count)
    )
    versions = []
    for tool in tools:
        text = toolmd_text(tool.name, language=language, version=1)
        versions.append(
            ToolVersion(
                tool=tool,
                number=1,
                toolmd=text,
                manifest={"name": tool.name, "description": tool.description},
                files=encode_files({"TOOL.md": text.encode(), entry: source.encode()}),
                sha256="0" * 64,
                source=VersionSource.SEED,
                published_at=now,
            )
        )
    ToolVersion.objects.bulk_create(versions)
    for tool, version in zip(tools, versions, strict=True):
        tool.published_version = version
    Tool.objects.bulk_update(tools, ["published_version"])
    return tools


def names(response) -> list[str]:
    return [tool.name for tool in response.context["page"]]


def test_it_redirects_anonymous_users_to_login(client, db):
    response = client.get(URL)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/tools/")


def test_it_forbids_users_without_a_role(client, nobody):
    client.force_login(nobody)
    assert client.get(URL).status_code == 403


def test_it_lists_tools_with_their_status(viewer_client, make_tool):
    make_tool("alpha", integrations=["github"])
    make_tool("beta", language="python", publish=False)
    gamma = make_tool("gamma")
    set_enabled(gamma, False, actor=Actor.system())

    response = viewer_client.get(URL)

    assert response.status_code == 200
    assert names(response) == ["alpha", "beta", "gamma"]
    html = response.content.decode()
    assert '<a href="/tools/alpha/">alpha</a>' in html
    assert '<span class="badge published">published</span>' in html
    assert '<span class="badge draft">draft</span>' in html
    assert '<span class="badge disabled">disabled</span>' in html
    assert ">github (missing or disabled)</span>" in html  # declared, never configured
    assert "3 tools" in html


def test_it_searches_names_and_descriptions(viewer_client, make_tool):
    make_tool("web_fetch", description="Reads one page.")
    make_tool("web_search", description="Finds pages.")
    make_tool("email_db", description="Searches the mail archive.")

    assert names(viewer_client.get(URL, {"q": "web_"})) == ["web_fetch", "web_search"]
    assert names(viewer_client.get(URL, {"q": "MAIL ARCH"})) == ["email_db"]
    assert names(viewer_client.get(URL, {"q": "pages"})) == ["web_search"]
    assert names(viewer_client.get(URL, {"q": "  "})) == ["email_db", "web_fetch", "web_search"]


def test_it_finds_every_word_in_any_order_over_name_label_and_description(viewer_client, make_tool):
    make_tool("web_search", description="Search the web through a SearXNG instance.")
    make_tool("web_fetch", description="Reads one page.", extra={"label": "Page reader"})
    make_tool("email_db", description="Searches the mail archive.")

    assert names(viewer_client.get(URL, {"q": "searxng web"})) == ["web_search"]
    assert names(viewer_client.get(URL, {"q": "web searxng"})) == ["web_search"]
    assert names(viewer_client.get(URL, {"q": "reader page"})) == ["web_fetch"]  # the label
    # Every word must be there: one missing word leaves a tool out.
    assert names(viewer_client.get(URL, {"q": "searxng mail"})) == []
    assert names(viewer_client.get(URL, {"q": "web  web"})) == ["web_fetch", "web_search"]


def test_it_treats_like_wildcards_literally(viewer_client, make_tool):
    make_tool("alpha")
    make_tool("beta")
    assert names(viewer_client.get(URL, {"q": "%"})) == []
    assert names(viewer_client.get(URL, {"q": "_"})) == []


def test_it_says_when_nothing_matches(viewer_client, make_tool):
    make_tool("alpha")
    response = viewer_client.get(URL, {"q": "zzz"})
    assert response.status_code == 200
    assert "No tools match this search." in response.content.decode()


def test_it_filters_by_language(viewer_client, make_tool):
    make_tool("ts_tool")
    make_tool("py_tool", language="python")
    make_tool("sh_tool", language="bash")

    assert names(viewer_client.get(URL, {"language": "python"})) == ["py_tool"]
    assert names(viewer_client.get(URL, {"language": "bash"})) == ["sh_tool"]


def test_it_filters_by_status(viewer_client, make_tool):
    make_tool("live")
    make_tool("draft_only", publish=False)
    off = make_tool("switched_off")
    set_enabled(off, False, actor=Actor.system())

    assert names(viewer_client.get(URL, {"status": "published"})) == ["live"]
    assert names(viewer_client.get(URL, {"status": "draft"})) == ["draft_only"]
    assert names(viewer_client.get(URL, {"status": "disabled"})) == ["switched_off"]


def test_it_filters_by_integration(viewer_client, make_tool):
    make_tool("gh_tool", integrations=["github"])
    make_tool("both", integrations=["slack", "github"])
    make_tool("lonely")
    make_tool("gh_like", integrations=["github_enterprise"])

    assert names(viewer_client.get(URL, {"integration": "github"})) == ["both", "gh_tool"]
    assert names(viewer_client.get(URL, {"integration": "slack"})) == ["both"]
    # An integration no tool uses yet is an empty result, not an error.
    response = viewer_client.get(URL, {"integration": "jira"})
    assert response.status_code == 200
    assert names(response) == []


def test_it_offers_the_integrations_tools_use(viewer_client, make_tool):
    make_tool("gh_tool", integrations=["github"])
    make_tool("both", integrations=["slack", "github"])

    form = viewer_client.get(URL).context["form"]

    assert form.fields["integration"].widget.choices == [
        ("", "Any integration"),
        ("github", "github"),
        ("slack", "slack"),
    ]


def test_it_combines_search_and_filters(viewer_client, make_tool):
    make_tool("web_fetch", language="python", integrations=["proxy"])
    make_tool("web_search", language="python")
    make_tool("web_other", integrations=["proxy"])

    response = viewer_client.get(URL, {"q": "web", "language": "python", "integration": "proxy"})

    assert names(response) == ["web_fetch"]


def test_it_sorts_by_whitelisted_keys(viewer_client, make_tool):
    make_tool("alpha", language="python")
    make_tool("beta", language="bash")
    make_tool("gamma", language="javascript")
    make_tool("gamma", language="javascript", description="Second version.", publish=False)

    assert names(viewer_client.get(URL, {"sort": "-name"})) == ["gamma", "beta", "alpha"]
    assert names(viewer_client.get(URL, {"sort": "language"})) == ["beta", "gamma", "alpha"]
    assert names(viewer_client.get(URL, {"sort": "-versions"})) == ["gamma", "alpha", "beta"]
    assert names(viewer_client.get(URL, {"sort": "-updated"}))[0] == "gamma"


def test_it_falls_back_to_name_order_for_unknown_sorts(viewer_client, make_tool):
    make_tool("beta")
    make_tool("alpha")
    for sort in ("password", "-id; DROP TABLE", "enabled", "__class__"):
        response = viewer_client.get(URL, {"sort": sort})
        assert response.status_code == 200
        assert names(response) == ["alpha", "beta"]


def test_it_paginates(viewer_client, db):
    bulk_tools(PER_PAGE + 5)

    first = viewer_client.get(URL)
    second = viewer_client.get(URL, {"page": "2"})

    assert len(names(first)) == PER_PAGE
    assert names(second) == [f"bulk_{i:03d}" for i in range(PER_PAGE, PER_PAGE + 5)]
    html = first.content.decode()
    assert f"{PER_PAGE + 5} tools, showing 1–{PER_PAGE}" in html
    assert 'href="/tools/?page=2"' in html


def test_pagination_links_keep_the_filters(viewer_client, db):
    bulk_tools(PER_PAGE + 5)

    html = viewer_client.get(URL, {"q": "bulk", "sort": "-name"}).content.decode()

    assert 'href="/tools/?q=bulk&amp;sort=-name&amp;page=2"' in html


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        ("abc", 1),
        ("", 1),
        ("1.5", 1),
        ("0", 2),
        ("-1", 2),
        ("999", 2),
        ("9" * 5000, 1),  # more digits than int() accepts from a string
        ("\x00", 1),
    ],
)
def test_it_turns_bad_page_numbers_into_first_or_last(viewer_client, db, page, expected):
    bulk_tools(PER_PAGE + 1)

    response = viewer_client.get(URL, {"page": page})

    assert response.status_code == 200
    assert response.context["page"].number == expected


def test_it_returns_only_the_results_to_htmx(viewer_client, make_tool):
    make_tool("alpha")

    response = viewer_client.get(URL, {"q": "alp"}, **HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="tool-results"')
    assert "<html" not in html
    assert 'id="tool-filters"' not in html
    assert "alpha" in html
    assert "HX-Request" in response["Vary"]


def test_it_returns_the_whole_page_for_htmx_history_restores(viewer_client, make_tool):
    make_tool("alpha")

    response = viewer_client.get(
        URL, HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true"
    )

    html = response.content.decode()
    assert "<html" in html
    assert 'id="tool-filters"' in html


def test_the_filter_form_drives_htmx(viewer_client, db):
    html = viewer_client.get(URL).content.decode()
    assert 'hx-get="/tools/"' in html
    assert 'hx-target="#tool-results"' in html
    assert 'hx-swap="outerHTML"' in html  # the partial brings its own container
    assert 'hx-push-url="true"' in html
    assert '<div id="tool-results"' in html


def test_it_refuses_a_huge_search_with_400(viewer_client, make_tool):
    make_tool("alpha")

    response = viewer_client.get(URL, {"q": "x" * 100_000})

    assert response.status_code == 400
    html = response.content.decode()
    assert "This search cannot be run" in html
    assert "at most 200 characters" in html
    assert "x" * 201 not in html  # the form shows only the first 200 characters back


@pytest.mark.parametrize(
    "params",
    [
        {"q": "web\x00"},
        {"language": "cobol"},
        {"status": "deleted"},
        {"integration": "../etc"},
        {"integration": "a\x00b"},
        {"integration": "x" * 65},
    ],
)
def test_it_refuses_bad_filters_with_400(viewer_client, make_tool, params):
    make_tool("alpha")

    response = viewer_client.get(URL, params)

    assert response.status_code == 400
    assert "This search cannot be run" in response.content.decode()


def test_it_answers_too_many_parameters_with_400(viewer_client, db):
    query = "&".join(f"f{i}=1" for i in range(2000))
    assert viewer_client.get(f"{URL}?{query}").status_code == 400


def test_it_escapes_tool_text(viewer_client, make_tool):
    make_tool("alpha", description="<script>alert(1)</script> & more")

    html = viewer_client.get(URL).content.decode()

    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in html


def test_it_only_answers_get(viewer_client, db):
    assert viewer_client.post(URL).status_code == 405


def test_query_count_does_not_grow_with_the_number_of_tools(
    viewer_client, db, django_assert_max_num_queries
):
    bulk_tools(1, prefix="one")
    viewer_client.get(URL)  # warm up once-per-process work (sessions, checks)
    with CaptureQueriesContext(connection) as one:
        assert viewer_client.get(URL).status_code == 200

    bulk_tools(200)
    with CaptureQueriesContext(connection) as many:
        assert viewer_client.get(URL).status_code == 200
    assert len(many) == len(one)
    for params in (
        {"q": "bulk", "sort": "-updated", "page": "3"},
        {"status": "published", "language": "python", "sort": "-versions"},
        {"page": "last"},
    ):
        with django_assert_max_num_queries(len(one)):
            assert viewer_client.get(URL, params).status_code == 200
    with django_assert_max_num_queries(len(one)):
        assert viewer_client.get(URL, {"integration": "github"}, **HTMX).status_code == 200


def test_it_offers_new_and_import_to_developers(viewer_client, developer_client, db):
    assert 'href="/tools/-/new/"' not in viewer_client.get(URL).content.decode()
    as_developer = developer_client.get(URL).content.decode()
    assert 'href="/tools/-/new/"' in as_developer
    assert 'href="/tools/-/import/"' in as_developer
