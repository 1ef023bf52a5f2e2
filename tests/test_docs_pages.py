"""The API documentation (/docs, /redoc) is served from this server's own files, under a 'self'-only policy."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient

from jobpulse.server.docs_pages import assets_built, install

needs_assets = pytest.mark.skipif(
    not assets_built(), reason="Swagger UI and ReDoc are not built: run python web-assets/build.py"
)


def policy(response) -> dict[str, str]:  # noqa: ANN001
    parts = (part.strip().split(" ", 1) for part in response.headers["content-security-policy"].split(";"))
    return {part[0]: part[1] if len(part) > 1 else "" for part in parts}


def references(html: str) -> list[str]:
    return re.findall(r'(?:src|href|spec-url|data-spec)="([^"]+)"', html)


@needs_assets
@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_a_documentation_page_loads_only_this_servers_files(anonymous: TestClient, path: str) -> None:
    page = anonymous.get(path)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    urls = references(page.text)
    assert any(url.endswith(".js") for url in urls)
    for url in urls:
        assert not urlsplit(url).netloc and url.startswith("/"), url
        assert anonymous.get(url).status_code == 200, url


@needs_assets
def test_the_assets_answer_with_their_types(anonymous: TestClient) -> None:
    assert anonymous.get("/docs/assets/swagger-ui-bundle.js").headers["content-type"].startswith("text/javascript")
    assert anonymous.get("/docs/assets/swagger-ui.css").headers["content-type"].startswith("text/css")
    assert anonymous.get("/docs/assets/redoc.standalone.js").headers["content-type"].startswith("text/javascript")


@needs_assets
def test_an_asset_is_sent_compressed_and_revalidated_without_its_body(anonymous: TestClient) -> None:
    first = anonymous.get("/docs/assets/redoc.standalone.js", headers={"Accept-Encoding": "gzip"})
    assert first.headers["content-encoding"] == "gzip" and first.headers["etag"]
    assert int(first.headers["content-length"]) < len(first.content) / 2  # what travelled, against its size
    again = anonymous.get("/docs/assets/redoc.standalone.js", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_the_documentation_runs_scripts_of_this_server_only(anonymous: TestClient, path: str) -> None:
    directives = policy(anonymous.get(path))
    assert directives["script-src"] == "'self'"
    assert directives["default-src"] == "'none'" and directives["connect-src"] == "'self'"
    assert "http" not in anonymous.get(path).headers["content-security-policy"]


def test_swagger_ui_is_started_by_a_script_file_not_inline(anonymous: TestClient) -> None:
    page = anonymous.get("/docs").text
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", page) == []
    init = anonymous.get("/docs/assets/swagger-init.js")
    assert init.status_code == 200 and "SwaggerUIBundle" in init.text


def test_an_unknown_asset_is_a_404_naming_it(anonymous: TestClient) -> None:
    response = anonymous.get("/docs/assets/../../openapi.json.js")
    assert response.status_code == 404
    response = anonymous.get("/docs/assets/index.html")
    assert response.status_code == 404 and "index.html" in response.json()["error"]["message"]


def test_without_built_assets_the_pages_say_how_to_build_them(tmp_path: Path) -> None:
    app = FastAPI(docs_url=None, redoc_url=None)
    install(app, assets=tmp_path)
    client = TestClient(app)
    for path in ("/docs", "/redoc"):
        page = client.get(path)
        assert page.status_code == 503 and "web-assets/build.py" in page.text and "/openapi.json" in page.text
    assert client.get("/docs/assets/swagger-ui-bundle.js").status_code == 404
