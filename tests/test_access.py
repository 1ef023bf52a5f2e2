"""Access rules: 401 without a valid key, 404 outside the key's projects, 403 without the role."""

from __future__ import annotations

from dataclasses import replace

import pytest
from starlette.testclient import TestClient

from helpers import post_columns, scalar_series
from jobpulse.server import create_app
from jobpulse.server.access import SESSION_COOKIE
from jobpulse.store import Store


def as_key(app, token: str | None) -> TestClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return TestClient(app, headers=headers)


def test_missing_key_is_401(anonymous):
    answer = anonymous.get("/jp/v1/jobs")
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized"
    assert answer.headers["www-authenticate"] == "Bearer"


def test_unknown_or_malformed_key_is_401(app):
    for token in ("jp_000000000000_" + "x" * 40, "not-a-key"):
        assert as_key(app, token).get("/jp/v1/jobs").status_code == 401


def test_revoked_key_is_401_at_once(app, client, make_key):
    token = make_key(["proj"], "read")
    reader = as_key(app, token)
    assert reader.get("/jp/v1/jobs").status_code == 200
    key_id = token.split("_")[1]
    assert client.delete(f"/jp/v1/keys/{key_id}").json()["key"]["revoked"] is not None
    assert reader.get("/jp/v1/jobs").status_code == 401


def test_a_key_seen_before_is_not_looked_up_again(app, store, make_key):
    token = make_key(["proj"], "read")
    lookups = []
    verify = store.keys.verify
    store.keys.verify = lambda presented: lookups.append(presented) or verify(presented)
    reader = as_key(app, token)
    assert [reader.get("/jp/v1/jobs").status_code for _ in range(3)] == [200, 200, 200]
    assert lookups == [token]
    assert as_key(app, "X" + token[1:]).get("/jp/v1/jobs").status_code == 401  # another token is looked up
    assert len(lookups) == 2


@pytest.mark.parametrize("sees_every_write", [True, False])
def test_a_key_is_trusted_for_the_key_cache_time_only_over_a_shared_server(
    embedded_engine, store, settings, make_key, sees_every_write
):
    token = make_key(["proj"], "read")
    replica = Store(embedded_engine, store.database, sees_every_write=sees_every_write)
    lookups = []
    verify = replica.keys.verify
    replica.keys.verify = lambda presented: lookups.append(presented) or verify(presented)
    with TestClient(create_app(replica, replace(settings, key_cache_seconds=0))) as reader:
        for _ in range(3):
            assert reader.get("/jp/v1/jobs", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    # every revocation passes through the embedded engine's process; replicas over a server may miss one
    assert lookups == ([token] if sees_every_write else [token] * 3)


def test_a_ui_session_looks_its_key_up_once_and_fails_at_once_when_it_is_revoked(app, client, store, make_key):
    token = make_key(["proj"], "read")
    key_id = token.split("_")[1]
    browser = TestClient(app, cookies={SESSION_COOKIE: app.state.ctx.access.session_for(key_id)})
    lookups = []
    get = store.keys.get
    store.keys.get = lambda wanted: lookups.append(wanted) or get(wanted)
    assert [browser.get("/jp/v1/jobs").status_code for _ in range(3)] == [200, 200, 200]
    assert lookups == [key_id]
    assert client.delete(f"/jp/v1/keys/{key_id}").status_code == 200
    answer = browser.get("/jp/v1/jobs")
    assert answer.status_code == 401 and "revoked" in answer.json()["error"]["message"]


def test_a_read_right_after_ingest_needs_no_lookup_of_the_job(client, store):
    post_columns(client, scalar_series("fresh", "loss", [1.0, 2.0]))
    lookups = []
    get = store.jobs.get
    store.jobs.get = lambda job: lookups.append(job) or get(job)
    answer = client.get("/jp/v1/jobs/fresh/scalars/points", params={"metric": "loss"})
    assert answer.status_code == 200 and answer.json()["value"] == [1.0, 2.0]
    assert lookups == []  # ingest noted the job and its project
    assert client.get("/jp/v1/jobs/other/scalars/points", params={"metric": "loss"}).status_code == 404
    assert lookups == ["other"]


@pytest.mark.parametrize("sees_every_write", [True, False])
def test_a_jobs_project_is_trusted_for_the_key_cache_time_only_over_a_shared_server(
    embedded_engine, store, settings, admin_token, sees_every_write
):
    replica = Store(embedded_engine, store.database, sees_every_write=sees_every_write)
    app = create_app(replica, replace(settings, key_cache_seconds=0))
    with TestClient(app, headers={"Authorization": f"Bearer {admin_token}"}) as client:
        post_columns(client, scalar_series("j", "loss", [1.0]))
        lookups = []
        get = replica.jobs.get
        replica.jobs.get = lambda job: lookups.append(job) or get(job)
        for _ in range(2):
            assert client.get("/jp/v1/jobs/j/scalars/points", params={"metric": "loss"}).status_code == 200
    # the embedded engine's process sees every change of a job; replicas over a server do not
    assert lookups == ([] if sees_every_write else ["j", "j"])


def test_a_created_job_that_was_read_still_starts_on_its_first_events(client):
    assert client.post("/jp/v1/jobs", json={"job": "planned", "project": "proj"}).status_code == 201
    assert client.get("/jp/v1/jobs/planned").json()["job"]["status"] == "created"
    assert client.get("/jp/v1/jobs/planned/scalars/points", params={"metric": "loss"}).status_code == 200
    post_columns(client, scalar_series("planned", "loss", [1.0]))
    assert client.get("/jp/v1/jobs/planned").json()["job"]["status"] == "running"


def test_a_deleted_job_is_forgotten_at_once(client):
    post_columns(client, scalar_series("gone", "loss", [1.0]))
    assert client.delete("/jp/v1/jobs/gone").status_code == 200
    assert client.get("/jp/v1/jobs/gone/scalars/points", params={"metric": "loss"}).status_code == 404


def test_job_outside_the_keys_projects_is_404(app, client, make_key):
    post_columns(client, scalar_series("secret", "loss", [1.0], project="other"))
    reader = as_key(app, make_key(["proj"], "read"))
    answer = reader.get("/jp/v1/jobs/secret")
    assert answer.status_code == 404 and answer.json()["error"]["message"] == "job 'secret' does not exist"
    assert reader.get("/jp/v1/jobs/secret/scalars/points", params={"metric": "loss"}).status_code == 404
    assert [j["job"] for j in reader.get("/jp/v1/jobs").json()["jobs"]] == []


def test_read_key_cannot_write_403(app, client, make_key):
    post_columns(client, scalar_series("j1", "loss", [1.0]))
    reader = as_key(app, make_key(["proj"], "read"))
    assert reader.get("/jp/v1/jobs/j1").status_code == 200
    answer = post_columns(reader, scalar_series("j1", "loss", [2.0]))
    assert answer.status_code == 403 and "may not write" in answer.json()["error"]["message"]
    assert reader.patch("/jp/v1/jobs/j1", json={"name": "x"}).status_code == 403
    assert reader.delete("/jp/v1/jobs/j1").status_code == 403


def test_write_key_of_another_project_cannot_ingest_there(app, make_key):
    writer = as_key(app, make_key(["proj"], "write"))
    answer = post_columns(writer, scalar_series("j9", "loss", [1.0], project="other"))
    assert answer.status_code == 403 and answer.json()["error"]["field"] == "project"


def test_listing_a_project_outside_the_key_is_403(app, make_key):
    reader = as_key(app, make_key(["proj"], "read"))
    assert reader.get("/jp/v1/jobs", params={"project": "other"}).status_code == 403


def test_keys_are_managed_by_admins_only(app, client, make_key):
    writer = as_key(app, make_key(["proj"], "write"))
    assert writer.get("/jp/v1/keys").status_code == 403
    created = client.post("/jp/v1/keys", json={"name": "ci", "projects": ["proj"], "role": "write"})
    assert created.status_code == 201 and created.json()["token"].startswith("jp_")
    listed = client.get("/jp/v1/keys").json()["keys"]
    assert "ci" in [k["name"] for k in listed] and all("secret_hash" not in k for k in listed)
    bad = client.post("/jp/v1/keys", json={"name": "x", "projects": ["proj"], "role": "owner"})
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "role"
    assert client.delete("/jp/v1/keys/000000000000").status_code == 404


def test_a_project_admin_lists_only_keys_within_its_projects(app, client, make_key):
    make_key(["other"], "write")
    make_key(["proj", "other"], "read")
    mine = make_key(["proj"], "read")
    project_admin = as_key(app, make_key(["proj"], "admin"))
    listed = project_admin.get("/jp/v1/keys").json()["keys"]
    assert {tuple(k["projects"]) for k in listed} == {("proj",)}
    assert mine.split("_")[1] in {k["key_id"] for k in listed}


def test_a_project_admin_cannot_revoke_a_key_of_another_project_or_of_all(app, client, store, make_key):
    project_admin = as_key(app, make_key(["proj"], "admin"))
    server_admin = store.keys.create("server admin", ["*"], "admin")[0]
    other = store.keys.create("other writer", ["other"], "write")[0]
    for target in (server_admin, other):
        refused = project_admin.delete(f"/jp/v1/keys/{target.key_id}")
        assert refused.status_code == 404 and refused.json()["error"]["field"] == "key_id"
        assert store.keys.get(target.key_id) is not None  # still valid
    own = store.keys.create("proj reader", ["proj"], "read")[0]
    assert project_admin.delete(f"/jp/v1/keys/{own.key_id}").status_code == 200


def test_secrets_are_stored_hashed(store, make_key):
    token = make_key(["proj"], "read")
    stored = store.engine.query(f"SELECT secret_hash FROM {store.database}.api_keys").column(0).to_pylist()
    assert token not in stored and all(len(h) == 64 for h in stored)


def test_one_time_login_link_opens_a_session(app, anonymous, store, admin_token):
    from jobpulse.server.access import ADMIN_KEY_STATE

    store.state.set(ADMIN_KEY_STATE, admin_token.split("_")[1])
    url = app.state.ctx.access.login_url()
    path = url.split("127.0.0.1:8642", 1)[1]
    first = anonymous.get(path, follow_redirects=False)
    assert first.status_code == 303 and "jobpulse_session" in first.cookies
    assert anonymous.get("/jp/v1/jobs").status_code == 200  # the cookie authenticates
    anonymous.cookies.clear()
    again = anonymous.get(path, follow_redirects=False)
    assert again.status_code == 401 and "used already" in again.text


def test_a_session_ends_when_its_key_is_revoked(app, anonymous, client, make_key):
    token = make_key(["proj"], "read")
    login = anonymous.post("/jp/v1/session", data={"api_key": token}, follow_redirects=False)
    assert login.status_code == 303
    assert anonymous.get("/jp/v1/jobs").status_code == 200
    client.delete(f"/jp/v1/keys/{token.split('_')[1]}")
    assert anonymous.get("/jp/v1/jobs").status_code == 401
