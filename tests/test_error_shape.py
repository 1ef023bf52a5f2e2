"""Every native API error has one shape: {"error": {"status", "code", "message", "field"}}."""

from __future__ import annotations

import pytest

from helpers import post_columns, scalar_series

BAD_REQUESTS = [
    ("GET", "/jp/v1/jobs/missing", None),
    ("GET", "/jp/v1/jobs", {"limit": "many"}),
    ("GET", "/jp/v1/jobs/j1/scalars/chart", {"metric": "loss", "buckets": "-1"}),
    ("GET", "/jp/v1/jobs/j1/scalars/chart", None),
    ("GET", "/jp/v1/jobs/j1/logs", {"before": "garbage"}),
    ("GET", "/jp/v1/jobs/j1/system/series", {"metric": "x", "step": "soon"}),
    ("POST", "/jp/v1/ingest", None),
    ("PATCH", "/jp/v1/jobs/j1", None),
    ("DELETE", "/jp/v1/keys/nope", None),
    ("GET", "/jp/v1/nothing-here", None),
    ("PUT", "/jp/v1/projects", None),
]


@pytest.mark.parametrize(("method", "path", "params"), BAD_REQUESTS)
def test_native_errors_share_one_shape(client, method, path, params):
    post_columns(client, scalar_series("j1", "loss", [1.0]))
    answer = client.request(
        method,
        path,
        params=params,
        content=b"{" if method in ("POST", "PATCH") else None,
        headers={"Content-Type": "application/json"},
    )
    assert 400 <= answer.status_code < 500
    body = answer.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"status", "code", "message", "field"}
    assert body["error"]["status"] == answer.status_code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


def test_unauthenticated_errors_share_the_shape(anonymous):
    body = anonymous.get("/jp/v1/jobs").json()
    assert set(body["error"]) == {"status", "code", "message", "field"}


def test_an_unexpected_failure_is_500_without_a_stack_trace(app, admin_token, store):
    from starlette.testclient import TestClient

    store.engine.command(f"DROP TABLE {store.database}.logs")
    with TestClient(app, raise_server_exceptions=False, headers={"Authorization": f"Bearer {admin_token}"}) as c:
        post_columns(c, scalar_series("j1", "loss", [1.0]))
        answer = c.get("/jp/v1/jobs/j1/logs")
    assert answer.status_code in (500, 503)
    assert set(answer.json()["error"]) == {"status", "code", "message", "field"}
    assert "Traceback" not in answer.text
