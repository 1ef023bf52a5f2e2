"""ClearML's transport: paths and versions, the {meta, data} envelope, error codes, credentials."""

from __future__ import annotations

import base64
import hashlib
import hmac

import orjson
import pytest
from clearml_support import call, fails, ok

ERROR_CALLS = [
    ("events.get_task_log", {}, "2.23", 400, 11),
    ("events.get_task_log", {"task": "0" * 32}, "2.23", 400, 101),
    ("events.get_task_log", {"task": "bad id!"}, "2.23", 400, 101),
    ("events.get_task_log", {"task": "{task}", "batch_size": "many"}, "2.23", 400, 20),
    ("events.scalar_metrics_iter_histogram", {"task": "{task}", "key": "nope"}, "2.23", 400, 16),
    ("events.get_task_log", {"task": "{task}", "scroll_id": "forged"}, "1.7", 400, 1104),
    (
        "events.scalar_metrics_iter_raw",
        {"task": "{task}", "metric": {"metric": "m"}, "batch_size": -1},
        "2.23",
        400,
        16,
    ),
    ("events.download_task_log", {"task": "{task}", "line_type": "text", "line_format": "{nope}"}, "2.23", 400, 16),
    ("events.get_task_log", {"task": "x"}, "1.0", 400, 2),
    ("events.get_task_log", {"task": "x"}, "two", 400, 2),
    ("events.no_such_action", {}, "2.23", 404, 0),
    ("events.get_task_log", {"task": "x", "scroll_id": "forged"}, "1.7", 400, 101),
    ("events.add_batch", None, "2.23", 400, 17),
    ("tasks.enqueue", {"task": "x"}, "2.23", 400, 1),
    ("projects.get_all", {"name": "(unclosed"}, "2.23", 400, 21),
]


@pytest.mark.parametrize(("endpoint", "body", "version", "code", "subcode"), ERROR_CALLS)
def test_every_error_has_clearml_shape_and_code(client, task, endpoint, body, version, code, subcode):
    if body:
        body = {k: task if v == "{task}" else v for k, v in body.items()}
    meta = fails(client, endpoint, body, version=version, code=code, subcode=subcode)
    assert set(meta) == {
        "id",
        "trx",
        "endpoint",
        "result_code",
        "result_subcode",
        "result_msg",
        "error_stack",
        "error_data",
    }
    assert meta["endpoint"]["name"] == endpoint


def test_unknown_path_of_a_clearml_service_is_a_clearml_404(client):
    answer = client.get("/v2.23/events/not-an-endpoint")
    assert answer.status_code == 404
    answer = client.get("/clearml/files/project/no-task-here/file.png")
    assert answer.status_code == 400 and set(answer.json()) == {"meta", "data"}


def test_answers_are_wrapped_with_the_endpoint_and_versions(client, task):
    status, meta, data = call(client, "events.get_task_log", {"task": task}, version="2.23")
    assert status == 200 and meta["result_code"] == 200 and meta["result_subcode"] == 0
    assert meta["result_msg"] == "OK"
    assert meta["endpoint"] == {"name": "events.get_task_log", "requested_version": "2.23", "actual_version": "2.9"}
    assert len(meta["id"]) == 32 and len(meta["trx"]) == 32 and meta["id"] != meta["trx"]
    assert data == {"events": [], "returned": 0, "total": 0}


@pytest.mark.parametrize(
    ("requested", "actual"),
    [("1.5", "1.5"), ("1.6", "1.5"), ("1.7", "1.7"), ("2.8", "1.7"), ("2.9", "2.9"), ("2.13", "2.9")],
)
def test_the_newest_version_not_newer_than_the_requested_one_answers(client, task, requested, actual):
    _, meta, data = call(client, "events.get_task_log", {"task": task}, version=requested)
    assert meta["endpoint"]["actual_version"] == actual
    assert ("scroll_id" in data) == (actual != "2.9")


def test_a_path_without_version_gets_the_newest(client, task):
    _, meta, _ = call(
        client, "events.add_batch", version=None, raw=orjson.dumps({"type": "log", "task": task, "msg": "m"})
    )
    assert meta["endpoint"] == {"name": "events.add_batch", "requested_version": "2.31", "actual_version": "2.22"}


def test_a_version_older_than_the_endpoints_first_answers_with_its_first(client, task):
    _, meta, _ = call(client, "events.get_task_single_value_metrics", {"tasks": [task]}, version="1.5")
    assert meta["endpoint"]["actual_version"] == "2.20"


def test_get_with_a_json_body_and_post_both_work(client, task):
    for method in ("GET", "POST"):
        assert ok(client, "tasks.get_by_id", {"task": task}, method=method)["task"]["id"] == task


def test_query_string_parameters_are_read_too(client, task):
    answer = client.get(f"/v2.23/tasks.get_by_id?task={task}")
    assert answer.json()["data"]["task"]["id"] == task


def _claims(token: str) -> dict:
    body = token.split(".")[1]
    return orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def _basic(user: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()}


def test_login_with_key_id_and_token_answers_a_jwt_that_authenticates(anonymous, admin_token):
    key_id = admin_token.split("_")[1]
    token = ok(anonymous, "auth.login", version=None, method="GET", headers=_basic(key_id, admin_token))["token"]
    claims = _claims(token)
    assert claims["api_version"] == "2.31" and claims["feature_set"] == "basic"
    assert claims["exp"] - claims["iat"] >= 3600 and claims["user_key"] == key_id
    bearer = {"Authorization": f"Bearer {token}"}
    assert ok(anonymous, "users.get_current_user", headers=bearer)["user"]["id"] == key_id


def test_login_honours_a_shorter_expiration(anonymous, admin_token):
    key_id = admin_token.split("_")[1]
    token = ok(anonymous, "auth.login", {"expiration_sec": 600}, headers=_basic(key_id, admin_token))["token"]
    claims = _claims(token)
    assert claims["exp"] - claims["iat"] == 600


@pytest.mark.parametrize(
    ("headers", "subcode"),
    [
        ({}, 20),
        ({"Authorization": "Basic not-base64!"}, 21),
        ({"Authorization": "Token abc"}, 21),
        ({"Authorization": "Bearer jp_000000000000_notavalidsecretatallxx"}, 22),
        ({"Authorization": "Bearer a.b.c"}, 30),
    ],
)
def test_bad_credentials_are_401_with_clearml_subcodes(anonymous, headers, subcode):
    fails(anonymous, "tasks.get_all", {}, headers=headers, code=401, subcode=subcode)


def test_a_wrong_secret_or_mismatched_access_key_fails_login(anonymous, admin_token):
    key_id = admin_token.split("_")[1]
    fails(anonymous, "auth.login", headers=_basic(key_id, admin_token + "x"), code=401, subcode=22)
    fails(anonymous, "auth.login", headers=_basic("000000000000", admin_token), code=401, subcode=22)


def test_a_revoked_key_stops_its_tokens_at_once(client, store, anonymous):
    key, secret = store.keys.create("ci", ["*"], "write")
    token = ok(anonymous, "auth.login", headers=_basic(key.key_id, secret))["token"]
    headers = {"Authorization": f"Bearer {token}"}
    ok(anonymous, "tasks.get_all", {}, headers=headers)  # the key is remembered now
    assert client.delete(f"/jp/v1/keys/{key.key_id}").status_code == 200
    fails(anonymous, "tasks.get_all", {}, headers=headers, code=401, subcode=30)


def test_a_token_from_another_server_is_refused(anonymous):
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signed = b64(b'{"alg":"HS256","typ":"JWT"}') + "." + b64(b'{"exp":2000000000,"jp":"x"}')
    foreign = signed + "." + b64(hmac.new(b"other-secret", signed.encode(), hashlib.sha256).digest())
    fails(anonymous, "tasks.get_all", {}, headers={"Authorization": f"Bearer {foreign}"}, code=401, subcode=30)


def test_a_read_key_cannot_write(client, make_key, task):
    reader = make_key(["*"], "read")
    headers = {"Authorization": f"Bearer {reader}"}
    assert ok(client, "tasks.get_by_id", {"task": task}, headers=headers)["task"]["id"] == task
    fails(client, "tasks.edit", {"task": task, "comment": "x", "force": True}, headers=headers, code=403)


def test_a_key_of_another_project_does_not_see_the_task(client, make_key, task):
    other = make_key(["elsewhere"], "admin")
    fails(
        client, "tasks.get_by_id", {"task": task}, headers={"Authorization": f"Bearer {other}"}, code=400, subcode=101
    )


def test_server_info_needs_no_credentials(anonymous):
    info = ok(anonymous, "server.info")
    assert info["api_version"] == "2.31" and info["version"]
