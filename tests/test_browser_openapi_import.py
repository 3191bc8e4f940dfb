"""The OpenAPI import page (/tools/-/import-openapi/) in a real browser: upload a document,
choose operations with the mouse and the keyboard, create the drafts, and land on the list
of what was made, with no errors on the browser's console."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser_support import browser_context
from tools_app.models import Tool

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PETSTORE = (
    Path(__file__).parent / "data" / "openapi" / "petstore-expanded" / "petstore-expanded.yaml"
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
