"""/metrics: Prometheus text of requests by route template, ingest, group commit, store errors and the process."""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from helpers import NOW_MS, FailingInserts, fresh_database, post_lines
from jobpulse.errors import StoreUnavailable
from jobpulse.server import create_app
from jobpulse.server.metrics import RequestMetrics
from jobpulse.settings import Settings
from jobpulse.store import Store

OPERATIONS = Path(__file__).resolve().parent.parent / "docs" / "operations.md"


def scrape(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics by (name, sorted labels); the text must parse as Prometheus text."""
    answer = client.get("/metrics")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def requests(samples: dict, route: str, status: int, method: str = "GET") -> float:
    return value(samples, "jobpulse_http_requests_total", method=method, route=route, status=str(status))


def make_client(store: Store, tmp_path: Path, token: str | None = None, **settings: Any) -> TestClient:
    app = create_app(store, Settings(data_dir=tmp_path, write_credentials=False, **settings))
    return TestClient(app, headers={"Authorization": f"Bearer {token}"} if token else {})


def test_requests_are_counted_by_route_template_and_status(client):
    line = {"kind": "scalar", "metric": "m", "iter": 1, "value": 1.0}
    assert post_lines(client, line, project="p", job="j1").status_code == 200
    assert client.get("/jp/v1/jobs/j1").status_code == 200
    assert client.get("/jp/v1/jobs/no-such-job-42").status_code == 404
    samples = scrape(client)
    assert requests(samples, "/jp/v1/jobs/{job}", 200) == 1
    assert requests(samples, "/jp/v1/jobs/{job}", 404) == 1
    assert requests(samples, "/jp/v1/ingest", 200, method="POST") == 1
    assert not any("no-such-job-42" in str(key) for key in samples)


def test_a_path_no_route_answers_is_counted_as_unmatched(client):
    assert client.get("/no/such/path/x1").status_code == 404
    samples = scrape(client)
    assert requests(samples, "unmatched", 404) == 1
    assert not any("/no/such/path" in str(key) for key in samples)


def test_an_unknown_method_is_counted_as_other(client):
    assert client.request("BREW", "/jp/v1/jobs").status_code == 405
    samples = scrape(client)
    assert requests(samples, "/jp/v1/jobs", 405, method="other") == 1


def test_request_latency_is_a_histogram_per_route(client):
    client.get("/healthz")
    samples = scrape(client)
    labels = {"method": "GET", "route": "/healthz"}
    assert value(samples, "jobpulse_http_request_duration_seconds_count", **labels) == 1
    assert value(samples, "jobpulse_http_request_duration_seconds_bucket", le="+Inf", **labels) == 1
    assert 0 < value(samples, "jobpulse_http_request_duration_seconds_sum", **labels) < 10


def test_ingest_rows_are_counted_by_kind(client):
    answer = post_lines(
        client,
        {"kind": "scalar", "metric": "loss", "iter": 1, "value": 0.5, "ts": NOW_MS},
        {"kind": "scalar", "metric": "loss", "iter": 2, "value": 0.4, "ts": NOW_MS},
        {"kind": "plot", "metric": "roc", "iter": 1, "plot": {"data": []}},
        {"kind": "log", "worker": "w0", "seq": 1, "msg": "hello", "ts": NOW_MS},
        {"kind": "system", "worker": "w0", "metric": "gpu_util", "device": "0", "value": 97, "ts": NOW_MS},
        project="p",
        job="j1",
    )
    assert answer.json()["accepted"] == 5
    samples = scrape(client)
    rows = {kind: value(samples, "jobpulse_ingest_rows_total", kind=kind) for kind in ("scalars", "events", "logs")}
    assert rows == {"scalars": 2, "events": 1, "logs": 1}
    assert value(samples, "jobpulse_ingest_rows_total", kind="system") == 1
    assert value(samples, "jobpulse_ingest_commit_duration_seconds_count") == 1
    assert value(samples, "jobpulse_ingest_queue_requests") == 0


def test_a_resent_batch_adds_no_stored_rows(client):
    line = {"kind": "log", "worker": "w0", "seq": 1, "msg": "once", "ts": NOW_MS}
    for _ in range(2):
        assert post_lines(client, line, project="p", job="j1").status_code == 200
    assert value(scrape(client), "jobpulse_ingest_rows_total", kind="logs") == 1


def test_a_failed_commit_is_counted(embedded_engine, tmp_path):  # noqa: ANN001
    engine = FailingInserts(embedded_engine, "logs")
    store = Store(engine, fresh_database())
    token = store.keys.create("admin", ["*"], "admin")[1]
    with make_client(store, tmp_path, token) as client:
        line = {"kind": "log", "worker": "w0", "seq": 1, "msg": "lost", "ts": NOW_MS}
        assert post_lines(client, line, project="p", job="j1").status_code == 503
        samples = scrape(client)
    assert value(samples, "jobpulse_ingest_commit_failures_total") == 1
    assert value(samples, "jobpulse_ingest_rows_total", kind="logs") == 0


class StalledInserts:
    """The real engine, except that inserts into ``table`` wait until ``go`` is set; ``waiting`` is set once one
    waits."""

    def __init__(self, engine: Any, table: str) -> None:
        self._engine = engine
        self.table = table
        self.go = threading.Event()
        self.waiting = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def insert(self, table: str, data: Any, settings: dict[str, Any] | None = None) -> None:
        if table.endswith("." + self.table):
            self.waiting.set()
            self.go.wait(30)
        self._engine.insert(table, data, settings)


def test_the_queue_depth_counts_requests_waiting_for_their_commit(embedded_engine, tmp_path):  # noqa: ANN001
    engine = StalledInserts(embedded_engine, "logs")
    store = Store(engine, fresh_database())
    token = store.keys.create("admin", ["*"], "admin")[1]
    events = [{"kind": "log", "worker": "w0", "seq": i, "msg": "x", "ts": NOW_MS} for i in range(3)]
    with make_client(store, tmp_path, token) as client:
        sender = threading.Thread(target=post_lines, args=(client, *events), kwargs={"project": "p", "job": "j1"})
        sender.start()
        try:
            assert engine.waiting.wait(30)
            samples = scrape(client)
        finally:
            engine.go.set()
            sender.join(30)
        assert value(samples, "jobpulse_ingest_queue_requests") == 1
        assert value(samples, "jobpulse_ingest_queue_rows") == 3
        assert value(scrape(client), "jobpulse_ingest_queue_requests") == 0


def test_failed_store_statements_are_counted_by_transport(client, store):
    before = value(scrape(client), "jobpulse_store_errors_total", transport="embedded", statement="query")
    with pytest.raises(StoreUnavailable):
        store.engine.query("SELECT no_such_column FROM system.one")
    after = value(scrape(client), "jobpulse_store_errors_total", transport="embedded", statement="query")
    assert after == before + 1


def test_the_process_and_the_build_are_described(client):
    samples = scrape(client)
    assert value(samples, "process_resident_memory_bytes") > 10 << 20
    assert value(samples, "process_cpu_seconds_total") > 0
    info = [labels for (name, labels) in samples if name == "jobpulse_build_info"]
    assert len(info) == 1 and dict(info[0])["transport"] == "embedded"


def test_two_apps_keep_separate_figures(embedded_engine, tmp_path, client):  # noqa: ANN001
    other = Store(embedded_engine, fresh_database())
    token = other.keys.create("admin", ["*"], "admin")[1]
    with make_client(other, tmp_path, token) as second:
        for _ in range(3):
            client.get("/jp/v1/jobs")
        second.get("/jp/v1/jobs")
        assert requests(scrape(client), "/jp/v1/jobs", 200) == 3
        assert requests(scrape(second), "/jp/v1/jobs", 200) == 1


def test_openmetrics_is_answered_to_a_scraper_that_asks_for_it(client):
    answer = client.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert answer.headers["content-type"].startswith("application/openmetrics-text")
    assert answer.text.endswith("# EOF\n")


def test_metrics_need_a_key_by_default(anonymous):
    answer = anonymous.get("/metrics")
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized"


def test_a_read_key_of_any_project_may_scrape(store, tmp_path, make_key):  # noqa: ANN001
    with make_client(store, tmp_path, make_key(["ops"], "read")) as scraper:
        assert scraper.get("/metrics").status_code == 200


def test_open_metrics_need_no_key(store, tmp_path):  # noqa: ANN001
    with make_client(store, tmp_path, metrics_access="open") as anyone:
        assert anyone.get("/metrics").status_code == 200


def test_metrics_off_answers_404_and_counts_nothing(store, tmp_path, admin_token):  # noqa: ANN001
    with make_client(store, tmp_path, admin_token, metrics_access="off") as client:
        answer = client.get("/metrics")
        assert answer.status_code == 404 and "metrics_access" in answer.json()["error"]["message"]
        assert not any(layer.cls is RequestMetrics for layer in client.app.user_middleware)


def test_every_metric_is_documented(client):
    documented = OPERATIONS.read_text()
    text = client.get("/metrics").text
    names = {family.name for family in text_string_to_metric_families(text) if family.name.startswith("jobpulse_")}
    names = {name for name in names if not name.endswith("_created")}  # the client's series-start companions
    assert len(names) >= 9
    assert [name for name in names if f"`{name}" not in documented] == []


def test_a_real_server_is_ready_and_scraped_over_http(server):  # noqa: ANN001
    urllib.request.urlopen(server.url + "/readyz", timeout=10).close()
    request = urllib.request.Request(server.url + "/metrics", headers={"Authorization": f"Bearer {server.api_key}"})
    deadline = time.monotonic() + 10
    text = ""
    while time.monotonic() < deadline and 'route="/readyz"' not in text:
        with urllib.request.urlopen(request, timeout=10) as answer:
            text = answer.read().decode()
    assert re.search(r'jobpulse_http_requests_total\{method="GET",route="/readyz",status="200"\} [1-9]', text)
    assert re.search(r"^process_resident_memory_bytes \d", text, re.MULTILINE)


def test_an_app_refuses_an_unknown_metrics_access(store, tmp_path):  # noqa: ANN001
    with pytest.raises(ValueError, match="metrics_access must be one of key, open, off"):
        create_app(store, Settings(data_dir=tmp_path, write_credentials=False, metrics_access="public"))
