"""Web UI sessions live in the store: signing out or revoking the key ends them on every replica."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from urllib.parse import urlencode

import pytest
from starlette.testclient import TestClient

from jobpulse.server import create_app
from jobpulse.server.access import ADMIN_KEY_STATE, SESSION_COOKIE
from jobpulse.store import Store, schema

SAME_ORIGIN = {"Origin": "http://testserver"}


def sign_in(client: TestClient, token: str, **form: str) -> TestClient:
    """Sign ``client`` in with ``token`` through the login form's request; the cookie stays in ``client``."""
    answer = client.post("/jp/v1/session", data={"api_key": token, **form}, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    return client


def browser(app, cookie: str) -> TestClient:  # noqa: ANN001 - FastAPI
    return TestClient(app, cookies={SESSION_COOKIE: cookie})


def test_a_cookie_replayed_after_logout_is_refused(app, anonymous, admin_token):
    sign_in(anonymous, admin_token)
    cookie = anonymous.cookies[SESSION_COOKIE]
    assert anonymous.get("/jp/v1/keys").status_code == 200
    out = anonymous.post("/jp/v1/session/logout", headers=SAME_ORIGIN, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/"
    assert SESSION_COOKIE not in anonymous.cookies
    replayed = browser(app, cookie).get("/jp/v1/keys")
    assert replayed.status_code == 401
    assert "ended" in replayed.json()["error"]["message"]


def test_a_cookie_replayed_after_its_key_is_revoked_is_refused(app, anonymous, client, make_key, store):
    token = make_key(["proj"], "read")
    sign_in(anonymous, token)
    cookie = anonymous.cookies[SESSION_COOKIE]
    assert browser(app, cookie).get("/jp/v1/jobs").status_code == 200
    assert client.delete(f"/jp/v1/keys/{token.split('_')[1]}").status_code == 200
    assert browser(app, cookie).get("/jp/v1/jobs").status_code == 401
    key_id = token.split("_")[1]
    live = store.engine.query(
        f"SELECT count() AS n FROM {store.database}.sessions FINAL WHERE key_id = {{k:String}} AND ended IS NULL",
        {"k": key_id},
    )
    assert live.column("n")[0].as_py() == 0  # ended in the store, not only forgotten by this replica


def test_signing_out_ends_only_that_session(app, admin_token):
    first = sign_in(TestClient(app), admin_token)
    second = sign_in(TestClient(app), admin_token)
    assert first.post("/jp/v1/session/logout", headers=SAME_ORIGIN, follow_redirects=False).status_code == 303
    assert second.get("/jp/v1/keys").status_code == 200


def test_only_a_hash_of_the_session_id_is_stored(app, anonymous, admin_token, store):
    sign_in(anonymous, admin_token)
    cookie = anonymous.cookies[SESSION_COOKIE]
    session_id = app.state.ctx.signer.verify("session", cookie, field="session")["s"]
    stored = store.engine.query(f"SELECT session_hash FROM {store.database}.sessions").column(0).to_pylist()
    assert len(stored) == 1 and len(stored[0]) == 64 and session_id not in stored[0]


def test_a_forged_or_foreign_cookie_is_refused_without_a_lookup(app, store):
    lookups = []
    get = store.sessions.get
    store.sessions.get = lambda session_id: lookups.append(session_id) or get(session_id)
    cursor = app.state.ctx.signer.sign("cursor", {"s": "x"})
    for cookie in ("forged.token", cursor, "", "a" * 5000):
        answer = browser(app, cookie).get("/jp/v1/jobs")
        assert answer.status_code == 401, cookie
    assert lookups == []


def test_a_session_expires_in_the_store(store, admin_token):
    key = store.keys.verify(admin_token)
    session_id, session = store.sessions.open(key.key_id, 0)
    assert session.expires == session.created
    assert store.sessions.get(session_id) is None
    assert store.sessions.end(session_id) is False


@pytest.mark.parametrize(
    "target",
    ["https://evil.example/", "//evil.example", "/\\evil.example", "/\t/evil.example", "javascript:alert(1)", ""],
)
def test_login_redirects_only_to_a_path_on_this_server(anonymous, admin_token, target):
    answer = anonymous.post("/jp/v1/session", data={"api_key": admin_token, "next": target}, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/"


def test_login_keeps_a_path_on_this_server(anonymous, admin_token):
    answer = anonymous.post(
        "/jp/v1/session", data={"api_key": admin_token, "next": "/jobs/run-1/logs?level=error"}, follow_redirects=False
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/jobs/run-1/logs?level=error"


@pytest.mark.parametrize(
    ("target", "location"),
    [("https://evil.example/", "/"), ("//evil.example", "/"), ("/\\evil.example", "/"), ("/compare", "/compare")],
)
def test_a_login_link_redirects_only_to_a_path_on_this_server(app, anonymous, store, admin_token, target, location):
    store.state.set(ADMIN_KEY_STATE, admin_token.split("_")[1])
    path = app.state.ctx.access.login_url().split("127.0.0.1:8642", 1)[1]
    answer = anonymous.get(f"{path}&{urlencode({'next': target})}", follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == location


def test_the_cookie_is_http_only_same_site_and_secure_behind_an_https_public_url(store, settings, admin_token):
    app = create_app(store, replace(settings, public_url="https://jobs.example.com"))
    with TestClient(app) as anonymous:
        answer = anonymous.post("/jp/v1/session", data={"api_key": admin_token}, follow_redirects=False)
    attributes = answer.headers["set-cookie"].lower()
    assert "httponly" in attributes and "samesite=lax" in attributes and "secure" in attributes


def replica(embedded_engine, database: str, settings, **changes) -> TestClient:  # noqa: ANN001
    """One more server over the database ``database``, as a replica over a shared ClickHouse server sees it."""
    store = Store(embedded_engine, database, sees_every_write=False)
    return TestClient(create_app(store, replace(settings, **changes)))


def test_a_replica_refuses_a_session_ended_on_another_at_once_without_a_key_cache(
    embedded_engine, store, settings, admin_token
):
    first = replica(embedded_engine, store.database, settings, key_cache_seconds=0)
    second = replica(embedded_engine, store.database, settings, key_cache_seconds=0)
    sign_in(first, admin_token)
    cookie = first.cookies[SESSION_COOKIE]
    second.cookies.set(SESSION_COOKIE, cookie)
    assert second.get("/jp/v1/keys").status_code == 200
    first.post("/jp/v1/session/logout", headers=SAME_ORIGIN)
    assert second.get("/jp/v1/keys").status_code == 401


def test_a_replica_refuses_a_session_ended_on_another_within_the_key_cache_time(
    embedded_engine, store, settings, admin_token
):
    first = replica(embedded_engine, store.database, settings, key_cache_seconds=1)
    second = replica(embedded_engine, store.database, settings, key_cache_seconds=1)
    sign_in(first, admin_token)
    second.cookies.set(SESSION_COOKIE, first.cookies[SESSION_COOKIE])
    assert second.get("/jp/v1/keys").status_code == 200  # now remembered by the second replica
    first.post("/jp/v1/session/logout", headers=SAME_ORIGIN)
    ended = time.monotonic()
    assert first.get("/jp/v1/keys").status_code == 401  # the replica that ended it forgets it at once
    time.sleep(max(0.0, ended + 1.05 - time.monotonic()))
    assert second.get("/jp/v1/keys").status_code == 401


def test_two_apps_over_one_embedded_store_refuse_an_ended_session_at_once(store, settings, admin_token):
    first, second = TestClient(create_app(store, settings)), TestClient(create_app(store, settings))
    sign_in(first, admin_token)
    second.cookies.set(SESSION_COOKIE, first.cookies[SESSION_COOKIE])
    assert second.get("/jp/v1/keys").status_code == 200
    first.post("/jp/v1/session/logout", headers=SAME_ORIGIN)
    assert second.get("/jp/v1/keys").status_code == 401


def test_a_looked_up_session_is_remembered_until_one_ends(app, anonymous, store, admin_token):
    sign_in(anonymous, admin_token)
    mine = app.state.ctx.signer.verify("session", anonymous.cookies[SESSION_COOKIE], field="session")["s"]
    lookups = []
    get = store.sessions.get
    store.sessions.get = lambda session_id: lookups.append(session_id) or get(session_id)
    assert [anonymous.get("/jp/v1/jobs").status_code for _ in range(3)] == [200, 200, 200]
    assert lookups.count(mine) == 1
    other = sign_in(TestClient(app), admin_token)
    other.post("/jp/v1/session/logout", headers=SAME_ORIGIN)
    assert anonymous.get("/jp/v1/jobs").status_code == 200  # another session ended: this one is looked up again
    assert lookups.count(mine) == 2


def test_an_existing_database_gets_the_sessions_table_on_start(embedded_engine, monkeypatch):
    database = f"sessions_{uuid.uuid4().hex[:12]}"
    before = next(n for n, step in enumerate(schema.MIGRATIONS) if any(".sessions (" in s for s in step))
    with monkeypatch.context() as patch:
        patch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:before])
        patch.setattr(schema, "SCHEMA_VERSION", before)
        Store(embedded_engine, database)
    upgraded = Store(embedded_engine, database)
    assert upgraded.previous_version == before
    key, _ = upgraded.keys.create("admin", ["*"], "admin")
    session_id, _ = upgraded.sessions.open(key.key_id, 3600)
    assert upgraded.sessions.get(session_id).key_id == key.key_id
