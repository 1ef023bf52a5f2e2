"""Cross-site requests: a change made on the strength of the session cookie must come from this server's pages."""

from __future__ import annotations

import base64
from dataclasses import replace

import pytest
from starlette.testclient import TestClient

from helpers import lines
from jobpulse.server import create_app
from jobpulse.server.access import SESSION_COOKIE

EVIL = "http://evil.example"
LINE = lines({"kind": "scalar", "metric": "m", "iter": 1, "value": 0.5})


@pytest.fixture
def signed(app, admin_token: str) -> TestClient:  # noqa: ANN001 - FastAPI
    """A browser signed in as an admin: the session cookie, no API key."""
    client = TestClient(app)
    answer = client.post("/jp/v1/session", data={"api_key": admin_token}, follow_redirects=False)
    assert answer.status_code == 303
    return client


def ingest(client: TestClient, headers: dict[str, str], job: str = "c"):  # noqa: ANN201 - httpx response
    return client.post(
        f"/jp/v1/ingest?project=P&job={job}", content=LINE, headers={"Content-Type": "text/plain", **headers}
    )


def assert_refused(answer, why: str) -> None:  # noqa: ANN001 - httpx response
    assert answer.status_code == 403, answer.text
    error = answer.json()["error"]
    assert error["code"] == "cross_site_request" and why in error["message"]


def test_a_cookie_post_from_another_origin_is_refused(signed, client):
    assert_refused(ingest(signed, {"Origin": EVIL}), f"Origin: {EVIL}")
    assert client.get("/jp/v1/jobs/c").status_code == 404  # nothing was stored


@pytest.mark.parametrize("site", ["cross-site", "same-site"])
def test_a_cookie_post_another_site_made_the_browser_send_is_refused(signed, site):
    assert_refused(ingest(signed, {"Sec-Fetch-Site": site}), f"Sec-Fetch-Site: {site}")


def test_sec_fetch_site_outweighs_an_origin_that_looks_like_ours(signed):
    assert_refused(ingest(signed, {"Sec-Fetch-Site": "cross-site", "Origin": "http://testserver"}), "cross-site")


@pytest.mark.parametrize("origin", ["null", "http://testserver:8080", "https://testserver", "not a url"])
def test_a_cookie_post_from_a_near_miss_origin_is_refused(signed, origin):
    assert_refused(ingest(signed, {"Origin": origin}), "another origin")


def test_a_cookie_post_without_origin_or_fetch_metadata_is_refused(signed):
    assert_refused(ingest(signed, {}), "neither an Origin nor a Sec-Fetch-Site")


@pytest.mark.parametrize(
    "headers",
    [{"Origin": "http://testserver"}, {"Origin": "http://TestServer:80"}, {"Sec-Fetch-Site": "same-origin"}],
)
def test_a_cookie_post_from_this_servers_pages_is_accepted(signed, headers):
    answer = ingest(signed, headers)
    assert answer.status_code == 200 and answer.json()["accepted"] == 1


def test_the_public_url_is_this_servers_origin_behind_a_proxy(store, settings, admin_token):
    app = create_app(store, replace(settings, public_url="https://jobs.example.com/"))
    with TestClient(app) as browser:  # the proxy ends TLS: the server is reached over plain HTTP
        login = browser.post("/jp/v1/session", data={"api_key": admin_token}, follow_redirects=False)
        browser.cookies.set(SESSION_COOKIE, login.cookies[SESSION_COOKIE])  # a Secure cookie, sent by the browser
        assert ingest(browser, {"Origin": "https://jobs.example.com"}).status_code == 200
        assert_refused(ingest(browser, {"Origin": "https://other.example.com"}), "another origin")


def test_a_cookie_read_from_another_origin_is_answered(signed):
    # reads change nothing, and the browser keeps their answers from the other site
    assert signed.get("/jp/v1/keys", headers={"Origin": EVIL}).status_code == 200


def test_minting_or_revoking_keys_across_sites_is_refused(signed, client):
    admin = {"name": "x", "projects": ["*"], "role": "admin"}
    minted = signed.post("/jp/v1/keys", json=admin, headers={"Origin": EVIL})
    assert_refused(minted, "another origin")
    assert "x" not in [k["name"] for k in client.get("/jp/v1/keys").json()["keys"]]
    key_id = client.get("/jp/v1/keys").json()["keys"][0]["key_id"]
    assert_refused(signed.delete(f"/jp/v1/keys/{key_id}", headers={"Sec-Fetch-Site": "cross-site"}), "another site")
    assert client.get("/jp/v1/keys").json()["keys"][0]["revoked"] is None


@pytest.mark.parametrize("credential", ["Authorization", "X-API-Key"])
def test_a_key_post_with_a_foreign_origin_is_accepted(app, admin_token, credential):
    value = f"Bearer {admin_token}" if credential == "Authorization" else admin_token
    with TestClient(app, headers={credential: value}) as script:
        answer = ingest(script, {"Origin": EVIL, "Sec-Fetch-Site": "cross-site"})
    assert answer.status_code == 200 and answer.json()["accepted"] == 1


def test_a_key_outweighs_a_session_cookie_sent_along(signed, admin_token):
    answer = ingest(signed, {"Origin": EVIL, "Authorization": f"Bearer {admin_token}"})
    assert answer.status_code == 200


def test_a_compatible_api_credential_with_a_foreign_origin_is_accepted(anonymous, admin_token):
    basic = base64.b64encode(f"{admin_token.split('_')[1]}:{admin_token}".encode()).decode()
    answer = anonymous.post("/auth.login", json={}, headers={"Authorization": f"Basic {basic}", "Origin": EVIL})
    assert answer.status_code == 200 and answer.json()["data"]["token"]


@pytest.mark.parametrize("headers", [{"Origin": EVIL}, {"Sec-Fetch-Site": "cross-site"}])
def test_a_sign_in_posted_by_another_site_is_refused(anonymous, admin_token, headers):
    answer = anonymous.post("/jp/v1/session", data={"api_key": admin_token}, headers=headers, follow_redirects=False)
    assert_refused(answer, "another")
    assert SESSION_COOKIE not in answer.cookies


@pytest.mark.parametrize("headers", [{"Origin": "http://testserver"}, {"Sec-Fetch-Site": "same-origin"}, {}])
def test_a_sign_in_from_this_servers_page_or_a_script_is_accepted(anonymous, admin_token, headers):
    answer = anonymous.post("/jp/v1/session", data={"api_key": admin_token}, headers=headers, follow_redirects=False)
    assert answer.status_code == 303 and SESSION_COOKIE in answer.cookies


def test_a_sign_out_posted_by_another_site_is_refused_and_the_session_lasts(signed):
    assert_refused(signed.post("/jp/v1/session/logout", headers={"Origin": EVIL}), "another origin")
    assert signed.get("/jp/v1/keys").status_code == 200
