"""Two jobpulse server processes over one store, through the HTTP transport: they answer as one.

The store is the session's ClickHouse stand-in (chdb behind ClickHouse's HTTP interface), or the ClickHouse
server of JOBPULSE_TEST_CLICKHOUSE_URL when it is set; the replicas share a database of their own in it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import httpx
import orjson
import pytest

from helpers import NOW_MS, lines
from jobpulse.server.access import SESSION_COOKIE
from jobpulse.store.engine import HttpEngine
from jobpulse.testing import ServerProcess, running_server

pytestmark = pytest.mark.e2e

KEY_CACHE_SECONDS = 1
# A change made through one replica must show on the other within key_cache_seconds; the margin covers the
# request that notices it on a loaded 2-core machine.
NOTICED_WITHIN_S = KEY_CACHE_SECONDS + 1.0


@pytest.fixture(scope="module")
def store_url(clickhouse_url: str) -> Iterator[str]:
    """The shared store: a database of this module's own on the session's HTTP store, dropped at the end."""
    database = f"replicas_{uuid.uuid4().hex[:12]}"
    yield urlunsplit(urlsplit(clickhouse_url)._replace(path=f"/{database}"))
    engine = HttpEngine(clickhouse_url)
    try:
        engine.command(f"DROP DATABASE IF EXISTS {database}")
    finally:
        engine.close()


@pytest.fixture(scope="module")
def replicas(store_url: str) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Replica A, then replica B, over one store; each has its own data directory, as on two machines."""
    args = ["--store", store_url, "--key-cache-seconds", str(KEY_CACHE_SECONDS), "--follow-poll-ms", "100"]
    with running_server(extra_args=args) as first, running_server(extra_args=args) as second:
        second.api_key = first.api_key  # the admin key A created on the first start is in the store
        yield first, second


def call(replica: ServerProcess, method: str, path: str, token: str | None = None, **kwargs) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token or replica.api_key}", **kwargs.pop("headers", {})}
    return httpx.request(method, replica.url + path, headers=headers, timeout=30, **kwargs)


def ingest(replica: ServerProcess, *events: dict) -> dict:
    answer = call(
        replica, "POST", "/jp/v1/ingest", content=lines(*events), headers={"Content-Type": "application/x-ndjson"}
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def batch(job: str) -> list[dict]:
    scalars = [
        {"kind": "scalar", "project": "fleet", "job": job, "metric": "loss", "iter": i, "value": 1.0 / (i + 1)}
        for i in range(50)
    ]
    logs = [
        {"kind": "log", "project": "fleet", "job": job, "worker": "w0", "seq": i, "msg": f"step {i}", "ts": NOW_MS + i}
        for i in range(20)
    ]
    return scalars + logs


def points(replica: ServerProcess, job: str) -> list[float]:
    answer = call(replica, "GET", f"/jp/v1/jobs/{job}/scalars/points", params={"metric": "loss"})
    assert answer.status_code == 200, answer.text
    return answer.json()["value"]


def log_count(replica: ServerProcess, job: str) -> int:
    answer = call(replica, "GET", f"/jp/v1/jobs/{job}/logs/count")
    assert answer.status_code == 200, answer.text
    return answer.json()["lines"]


def first_refusal(replica: ServerProcess, path: str, **kwargs) -> float:
    """Seconds until ``path`` on ``replica`` answers 401, polled; fails past twice the allowed delay."""
    start = time.monotonic()
    while time.monotonic() - start < 2 * NOTICED_WITHIN_S:
        answer = httpx.get(replica.url + path, timeout=30, **kwargs)
        if answer.status_code == 401:
            return time.monotonic() - start
        assert answer.status_code == 200, answer.text
        time.sleep(0.05)
    pytest.fail(f"{path} on the other replica still answers 200 after {2 * NOTICED_WITHIN_S} s")


def test_a_batch_acked_by_one_replica_is_read_by_the_other_at_once(replicas):
    first, second = replicas
    job = f"acked-{uuid.uuid4().hex[:8]}"
    assert ingest(first, *batch(job))["accepted"] == 70
    assert points(second, job) == [1.0 / (i + 1) for i in range(50)]
    assert log_count(second, job) == 20


def test_a_batch_resent_to_the_other_replica_is_stored_once(replicas):
    first, second = replicas
    job = f"resent-{uuid.uuid4().hex[:8]}"
    ingest(first, *batch(job))
    ingest(second, *batch(job))
    for replica in (first, second):
        assert points(replica, job) == [1.0 / (i + 1) for i in range(50)]
        assert log_count(replica, job) == 20


def test_a_key_revoked_on_one_replica_is_refused_on_the_other_within_key_cache_seconds(replicas):
    first, second = replicas
    created = call(first, "POST", "/jp/v1/keys", json={"name": "short-lived", "projects": ["fleet"], "role": "read"})
    assert created.status_code == 201, created.text
    token, key_id = created.json()["token"], created.json()["key"]["key_id"]
    assert call(second, "GET", "/jp/v1/jobs", token=token).status_code == 200  # B now trusts it for a while
    assert call(first, "DELETE", f"/jp/v1/keys/{key_id}").status_code == 200
    assert call(first, "GET", "/jp/v1/jobs", token=token).status_code == 401
    took = first_refusal(second, "/jp/v1/jobs", headers={"Authorization": f"Bearer {token}"})
    assert took <= NOTICED_WITHIN_S


def test_logout_on_one_replica_ends_the_session_on_the_other(replicas):
    first, second = replicas
    signed_in = httpx.post(
        first.url + "/jp/v1/session", data={"api_key": first.api_key}, follow_redirects=False, timeout=30
    )
    assert signed_in.status_code == 303, signed_in.text
    cookies = {SESSION_COOKIE: signed_in.cookies[SESSION_COOKIE]}
    assert httpx.get(second.url + "/jp/v1/jobs", cookies=cookies, timeout=30).status_code == 200
    out = httpx.post(
        first.url + "/jp/v1/session/logout",
        cookies=cookies,
        headers={"Origin": first.url},
        follow_redirects=False,
        timeout=30,
    )
    assert out.status_code == 303, out.text
    assert first_refusal(second, "/jp/v1/jobs", cookies=cookies) <= NOTICED_WITHIN_S


def test_follow_on_one_replica_sees_lines_ingested_on_the_other_within_a_second(replicas):
    first, second = replicas
    job = f"follow-{uuid.uuid4().hex[:8]}"
    line = {"kind": "log", "project": "fleet", "job": job, "worker": "w0", "seq": 1, "msg": "before", "ts": NOW_MS}
    ingest(first, line)
    opened, received = threading.Event(), []

    def follow() -> None:
        with httpx.stream(
            "GET",
            f"{second.url}/jp/v1/jobs/{job}/logs/follow",
            headers={"Authorization": f"Bearer {second.api_key}"},
            timeout=20,
        ) as stream:
            opened.set()
            for text in stream.iter_lines():
                if text.startswith("data: "):
                    received.extend((item["msg"], time.monotonic()) for item in orjson.loads(text[6:])["lines"])
                    return

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    assert opened.wait(20)
    time.sleep(0.5)  # the follow has read the end of the log as it was
    ingest(first, dict(line, seq=2, msg="after", ts=NOW_MS + 1))
    acked = time.monotonic()
    reader.join(15)
    assert [msg for msg, _ in received] == ["after"]
    assert received[0][1] - acked <= 1.0


def test_a_file_uploaded_on_one_replica_downloads_from_the_other(replicas):
    first, second = replicas
    job = f"files-{uuid.uuid4().hex[:8]}"
    ingest(first, {"kind": "scalar", "project": "fleet", "job": job, "metric": "m", "iter": 0, "value": 0.0})
    content = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    uploaded = call(first, "PUT", f"/jp/v1/jobs/{job}/files/sample.png", content=content)
    assert uploaded.status_code == 201, uploaded.text
    downloaded = call(second, "GET", uploaded.json()["url"])
    assert downloaded.status_code == 200
    assert downloaded.content == content
