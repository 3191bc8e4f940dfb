"""The generated OpenAPI document and the docs page, served without any CDN."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from tools_app.api.schemas import Format
from tools_app.manifest.schema import FORMATS

PATHS = {
    "/api/v1/registry",
    "/api/v1/tools/{name}",
    "/api/v1/tools/{name}/versions/{number}",
    "/api/v1/sync/manifest",
    "/api/v1/tools/{name}/versions/{number}/bundle",
}


@pytest.fixture
def openapi(db) -> dict:
    response = Client().get("/api/openapi.json")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    return response.json()


def test_it_serves_an_openapi_document_listing_the_agent_endpoints(openapi):
    assert openapi["openapi"].startswith("3.")
    assert openapi["info"]["title"] == "Tool Console agent API"
    assert set(openapi["paths"]) >= PATHS
    for path in PATHS:
        operation = openapi["paths"][path]["get"]
        assert operation["security"] == [{"TokenAuth": []}], path
        for status in ("200", "401", "403", "404", "422"):
            assert status in operation["responses"], (path, status)
    scheme = openapi["components"]["securitySchemes"]["TokenAuth"]
    assert scheme == {"type": "http", "scheme": "bearer"}


def test_it_documents_the_format_strict_and_signatures_parameters(openapi):
    param, strict, signatures = openapi["paths"]["/api/v1/registry"]["get"]["parameters"]
    assert param["name"] == "format"
    assert param["in"] == "query"
    assert strict["name"] == "strict" and strict["schema"]["type"] == "boolean"
    assert signatures["name"] == "signatures" and signatures["schema"]["type"] == "boolean"
    enum = openapi["components"]["schemas"]["Format"]["enum"]
    assert enum == list(FORMATS) == [f.value for f in Format]


def test_it_resolves_every_schema_reference(openapi):
    schemas = openapi["components"]["schemas"]
    refs = re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', json.dumps(openapi))
    assert refs
    assert all(ref in schemas for ref in refs)


def test_it_serves_the_docs_page_from_local_static_files(db, settings):
    # Deploys serve collected files; the test has no collectstatic, so use the finders.
    settings.WHITENOISE_USE_FINDERS = True
    client = Client()
    response = client.get("/api/docs")
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html
    assert "cdn" not in html.lower()
    assert "/api/openapi.json" in html
    urls = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert urls
    for url in urls:
        # Same-origin paths only: the page works offline and leaks nothing to a third party.
        assert url.startswith("/static/") and not url.startswith("//"), url
        asset = client.get(url)
        assert asset.status_code == 200, url
        body = b"".join(asset.streaming_content) if asset.streaming else asset.content
        assert body
    assert '"validatorUrl": null' in html
