"""The OpenAPI import page (/tools/-/import-openapi/) in a real browser: upload a document,
choose operations with the mouse and the keyboard, create the drafts, and land on the list
of what was made, with no errors on the browser's console."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.browser import ARTIFACTS, browser_context
from tools_app.models import Tool

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PETSTORE = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "openapi"
    / "petstore-expanded"
    / "petstore-expanded.yaml"
)


def test_it_imports_chosen_operations_as_drafts(live_server, developer) -> None:
    from playwright.sync_api import expect

    with browser_context(live_server, user=developer) as context:
        page = context.new_page()
        problems: list[str] = []
        page.on("console", lambda m: m.type == "error" and problems.append(m.text))
        page.on("pageerror", lambda exc: problems.append(str(exc)))

        page.goto("/tools/-/import-openapi/")
        page.get_by_label("OpenAPI document").set_input_files(PETSTORE)
        # The document's own server is plain http: the import names another.
        page.get_by_label("Server URL").fill("https://petstore.swagger.io/api")
        page.get_by_role("button", name="Read document").click()

        expect(page.get_by_role("heading", name="Choose operations of petstore-expanded.yaml"))
        expect(page.locator("#openapi-choose input[name=operations]:checked")).to_have_count(4)
        assert not Tool.objects.exists()  # reading imports nothing
        # Select all: every operation that can be imported, off and on again.
        every = page.get_by_label("Select every operation that can be imported")
        expect(every).to_be_checked()
        every.click()
        expect(page.locator("#openapi-choose input[name=operations]:checked")).to_have_count(0)
        every.click()
        expect(page.locator("#openapi-choose input[name=operations]:checked")).to_have_count(4)

        page.get_by_label("POST /pets", exact=True).click()  # addPet: off, by mouse
        by_id = page.get_by_label("GET /pets/{id}", exact=True)
        by_id.focus()
        page.keyboard.press("Space")  # find pet by id: off, by keyboard
        expect(by_id).not_to_be_checked()
        page.keyboard.press("Tab")  # on to deletePet, left ticked
        expect(page.get_by_label("DELETE /pets/{id}", exact=True)).to_be_focused()
        page.keyboard.press("Tab")
        expect(page.get_by_role("button", name="Create drafts")).to_be_focused()
        page.keyboard.press("Enter")

        result = page.get_by_role("status")
        expect(result.get_by_role("heading")).to_have_text("Imported from petstore-expanded.yaml")
        expect(result.get_by_role("listitem")).to_have_count(2)
        expect(result).to_contain_text("findPets: created find_pets (draft)")
        expect(result).to_contain_text("deletePet: created delete_pet (draft)")
        assert sorted(Tool.objects.values_list("name", flat=True)) == ["delete_pet", "find_pets"]
        assert all(t.published_version is None for t in Tool.objects.all())

        result.get_by_role("link", name="find_pets").click()
        expect(page).to_have_url(f"{live_server.url}/tools/find_pets/")
        expect(page.get_by_role("heading", level=1, name="findPets draft")).to_be_visible()
        assert problems == []


SECURED_ARRAYS = {
    "openapi": "3.1.0",
    "info": {"title": "Secured API", "version": "1"},
    "servers": [{"url": "https://api.example.com/v1"}],
    "paths": {"/items": {"get": {
        "operationId": "listItems",
        "security": [{"basicLogin": [], "session": []}],
        "parameters": [
            {"name": "ids", "in": "query",
             "schema": {"type": "array", "items": {"type": "integer"}}},
            {"name": "state", "in": "query", "required": True, "explode": True,
             "schema": {"type": "array", "items": {"type": "string", "enum": ["on", "off"]}}},
        ],
        "responses": {"200": {"description": "Items", "content": {
            "application/json": {"example": {"count": 2}}}}},
    }}},
    "components": {"securitySchemes": {
        "basicLogin": {"type": "http", "scheme": "basic"},
        "session": {"type": "apiKey", "in": "cookie", "name": "sid"},
    }},
}  # fmt: skip


def test_it_shows_a_draft_with_basic_cookie_security_and_exploded_arrays(
    live_server, console_admin, tmp_path
) -> None:
    """The draft an import makes of an operation with HTTP Basic and cookie apiKey schemes
    and exploded array parameters: its tool page, inputs tab and run form (list inputs, one
    item per line) read well and pass axe, at 1280 and 390 px."""
    import json

    from playwright.sync_api import expect

    from tests.support.browser import axe_violations, dangling_references

    document = tmp_path / "secured.json"
    document.write_text(json.dumps(SECURED_ARRAYS))
    for width in (1280, 390):
        Tool.objects.all().delete()
        viewport = {"width": width, "height": 900}
        with browser_context(live_server, user=console_admin, viewport=viewport) as context:
            page = context.new_page()
            page.goto("/tools/-/import-openapi/")
            page.get_by_label("OpenAPI document").set_input_files(document)
            page.get_by_role("button", name="Read document").click()
            page.get_by_role("button", name="Create drafts").click()
            page.get_by_role("status").get_by_role("link", name="list_items").click()

            problems: list[str] = []
            expect(page.get_by_role("heading", name="Notes")).to_be_visible()
            expect(page.locator("main")).to_contain_text("base64 of user:password")
            for tab, path in [("overview", ""), ("inputs", "inputs/"), ("run", "run/")]:
                page.goto(f"/tools/list_items/{path}")
                page.screenshot(
                    path=str(ARTIFACTS / f"openapi-secured-{tab}-{width}.png"), full_page=True
                )
                problems += axe_violations(page) + dangling_references(page)
                if page.evaluate("document.documentElement.scrollWidth") > width:
                    problems.append(f"{tab}: wider than {width} px")
                if tab == "inputs":
                    expect(page.get_by_role("row", name=re.compile("^ids"))).to_contain_text(
                        "integer[]"
                    )
                    expect(page.get_by_role("row", name=re.compile("^state"))).to_contain_text(
                        "string[]"
                    )
            ids = page.get_by_label("ids")
            expect(ids).to_have_attribute("aria-describedby", "id_ids_helptext")
            expect(page.locator("#id_ids_helptext")).to_contain_text("One integer per line.")
            assert problems == [], problems
