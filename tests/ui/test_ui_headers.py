"""Security headers of the UI's pages, of the API and of the API documentation (in-process app, no browser)."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from jobpulse.store import Job, Store


@pytest.fixture
def signed(app, admin_token: str, store: Store) -> TestClient:  # noqa: ANN001
    """A browser-like client: a session cookie, no Authorization header."""
    store.jobs.create(Job(job="run-1", project="vision", name="</script><script>alert(1)</script>"))
    client = TestClient(app)
    client.cookies.set("jobpulse_session", app.state.ctx.access.session_for(store.keys.verify(admin_token).key_id))
    return client


def policy(response) -> dict[str, str]:  # noqa: ANN001
    """The directives of a response's Content-Security-Policy, by name."""
    parts = (part.strip().split(" ", 1) for part in response.headers["content-security-policy"].split(";"))
    return {part[0]: part[1] if len(part) > 1 else "" for part in parts}


@pytest.mark.parametrize("path", ["/", "/jobs/run-1", "/jobs/run-1/logs", "/compare?jobs=run-1", "/jobs/nope"])
def test_every_page_forbids_inline_script_and_framing(signed: TestClient, path: str) -> None:
    response = signed.get(path)
    assert response.headers["content-type"].startswith("text/html")
    directives = policy(response)
    assert directives["script-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["object-src"] == "'none'" and directives["base-uri"] == "'none'"
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "same-origin"


def test_the_sign_in_page_carries_the_same_policy(anonymous: TestClient) -> None:
    response = anonymous.get("/jobs/run-1")
    assert response.status_code == 401
    assert policy(response)["script-src"] == "'self'" and policy(response)["frame-ancestors"] == "'none'"
    assert response.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("path", ["/", "/jobs/run-1", "/jobs/run-1/logs", "/compare?jobs=run-1", "/jobs/nope"])
def test_no_page_holds_an_inline_script(signed: TestClient, anonymous: TestClient, path: str) -> None:
    for response in (signed.get(path), anonymous.get(path)):
        for attributes, body in re.findall(r"<script([^>]*)>(.*?)</script>", response.text, re.S):
            assert 'type="application/json"' in attributes or ("src=" in attributes and not body), attributes


def test_a_job_name_cannot_close_the_boot_data_block(signed: TestClient) -> None:
    text = signed.get("/jobs/run-1").text
    assert "alert(1)" in text  # the name is there, escaped inside the JSON data block
    assert text.count("</script>") == text.count("<script")
    assert "\\u003c/script\\u003e\\u003cscript\\u003e" in text


def test_api_answers_are_inert_to_a_browser(signed: TestClient) -> None:
    response = signed.get("/jp/v1/jobs/run-1")
    assert response.headers["content-type"] == "application/json"
    assert response.headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'"
    assert response.headers["x-content-type-options"] == "nosniff"
    error = signed.get("/jp/v1/jobs/nope")
    assert error.status_code == 404 and error.headers["x-content-type-options"] == "nosniff"


def test_static_files_are_not_sniffed(signed: TestClient) -> None:
    prefix = re.search(r"/ui/static/[0-9a-f]{12}", signed.get("/").text).group(0)
    response = signed.get(f"{prefix}/head.js")
    assert response.headers["content-type"].startswith("text/javascript")
    assert response.headers["x-content-type-options"] == "nosniff"


def test_the_api_documentation_runs_this_servers_scripts_only(anonymous: TestClient) -> None:
    response = anonymous.get("/docs")
    directives = policy(response)
    assert directives["default-src"] == "'none'" and directives["script-src"] == "'self'"
    assert directives["connect-src"] == "'self'" and directives["frame-ancestors"] == "'none'"
    assert re.findall(r'(?:src|href)="(https?://[^"]+)', response.text) == []
