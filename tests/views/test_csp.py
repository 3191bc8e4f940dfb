"""Content-Security-Policy (django-csp): scripts come from the console's own static files
(or carry the request's nonce), never from inline code. The header is on every page, and
no template holds an inline script, an inline event handler or an htmx hx-on attribute
(which htmx runs as script). tests/browser/test_browser_csp.py checks the pages in Chromium."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

from tests.support import REPO
from tools_app.audit import Actor
from tools_app.runs import start

TEMPLATES = REPO / "templates"
SCRIPT_TAG = re.compile(r"<script\b([^>]*)>", re.IGNORECASE)
# An attribute whose value the browser runs as script: onclick=, onload=..., hx-on:click=,
# hx-on::after-request=, hx-on-click=; and javascript: URLs.
INLINE_HANDLER = re.compile(r"<[a-z][^>]*?\s(on[a-z]+|hx-on[^\s=]*)\s*=", re.IGNORECASE)
NONCE_ATTR = re.compile(r"""\bnonce\s*=\s*["']\{\{\s*(request\.csp_nonce|CSP_NONCE)\s*\}\}["']""")
JAVASCRIPT_URL = re.compile(r"""(href|src|action|formaction)\s*=\s*["']?\s*javascript:""", re.I)


def policy(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    directives = {}
    for part in header.split(";"):
        name, *values = part.split()
        directives[name] = values
    return directives


def assert_strict(response) -> None:
    directives = policy(response)
    script = directives.get("script-src", directives.get("default-src"))
    assert "'self'" in script
    assert "'unsafe-inline'" not in script and "'unsafe-eval'" not in script
    assert not any(source in ("*", "http:", "https:", "data:") for source in script)
    assert directives["object-src"] == ["'none'"] and directives["base-uri"] == ["'none'"]
    assert directives["frame-ancestors"] == ["'none'"]


def templates() -> list[Path]:
    found = sorted(TEMPLATES.rglob("*.html"))
    assert len(found) > 30
    return found


def inline_script_problems(text: str, label: str) -> list[str]:
    problems = []
    for match in SCRIPT_TAG.finditer(text):
        attrs = match.group(1)
        if re.search(r"\bsrc\s*=", attrs):
            continue
        if re.search(r"""\btype\s*=\s*["']application/(ld\+)?json["']""", attrs):
            continue  # data, never run
        if re.search(
            r"""\bnonce\s*=\s*["']\{\{\s*(request\.csp_nonce|CSP_NONCE)\s*\}\}["']""", attrs
        ):
            continue
        problems.append(f"{label}: inline <script{attrs}>")
    for regex in (INLINE_HANDLER, JAVASCRIPT_URL):
        for match in regex.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            problems.append(f"{label}:{line}: {match.group(0)[-40:]!r}")
    return problems


def test_no_template_holds_inline_script():
    problems = [
        problem
        for path in templates()
        for problem in inline_script_problems(path.read_text(), str(path.relative_to(REPO)))
    ]
    assert problems == []


@pytest.mark.parametrize(
    "snippet",
    [
        "<script>alert(1)</script>",
        '<script type="module">import("/x")</script>',
        '<button type="button" onclick="go()">Go</button>',
        '<body\n  onload="go()">',
        '<div hx-on:click="go()"></div>',
        '<div hx-on::after-request="go()"></div>',
        '<form hx-on--after-request="go()"></form>',
        '<a href="javascript:go()">go</a>',
    ],
)
def test_the_template_check_catches_inline_script(snippet):
    assert inline_script_problems("{% load static %}\n" + snippet + "\n", "probe.html")


def test_the_template_check_allows_scripts_from_files_and_nonces():
    text = (
        "<script src=\"{% static 'js/copy.js' %}\" defer></script>\n"
        '<script nonce="{{ request.csp_nonce }}">go()</script>\n'
        '<script type="application/json" id="data">{}</script>\n'
        '<p>Click on="x" content="y" data-on="z"</p>\n'
    )
    assert inline_script_problems(text, "probe.html") == []


@pytest.mark.django_db
def test_pages_carry_the_policy(console_admin_client, make_tool, console_admin):
    tool = make_tool("alpha", language="python")
    run = start.start_run(
        tool.published_version, {}, actor=Actor(user=console_admin), via="browser", enqueue=False
    )
    pages = [
        "/tools/",
        "/tools/alpha/",
        "/tools/alpha/edit/",
        "/tools/alpha/run/",
        f"/runs/{run.pk}/",
        "/runs/",
        "/integrations/",
        "/tokens/",
        "/api/docs",
        "/tools/no-such-tool/",
    ]
    for url in pages:
        response = console_admin_client.get(url)
        assert response.status_code in (200, 404), url
        assert_strict(response)
    assert_strict(Client().get("/accounts/login/"))
    assert_strict(Client().get("/admin/login/"))


def test_a_script_that_must_stay_inline_runs_with_the_requests_nonce(rf):
    """The escape hatch: `<script nonce="{{ CSP_NONCE }}">` gets the nonce the header
    allows, a fresh one per request."""
    from csp.middleware import CSPMiddleware
    from django.http import HttpResponse
    from django.template import engines

    template = engines["django"].from_string('<script nonce="{{ CSP_NONCE }}">go()</script>')
    nonces = []
    for _ in range(2):
        request = rf.get("/")
        middleware = CSPMiddleware(lambda request: HttpResponse())
        middleware.process_request(request)
        html = template.render({}, request)
        response = middleware.process_response(request, HttpResponse(html))
        nonce = re.search(r'nonce="([^"]+)"', html).group(1)
        assert f"'nonce-{nonce}'" in policy(response)["script-src"]
        nonces.append(nonce)
    assert nonces[0] != nonces[1] and len(nonces[0]) >= 20
