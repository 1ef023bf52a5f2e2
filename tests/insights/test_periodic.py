"""The server evaluates running jobs on its own while it runs, when ``insights_interval_s`` is set."""

from __future__ import annotations

import time

from starlette.testclient import TestClient

from helpers import post_lines
from jobpulse.server import create_app
from jobpulse.settings import Settings

MINUTE = 60_000


def test_running_jobs_are_evaluated_every_interval_and_the_loop_stops_with_the_app(store, admin_token, tmp_path):
    app = create_app(store, Settings(data_dir=tmp_path, write_credentials=False, insights_interval_s=1))
    now = int(time.time() * 1000)
    start = now - now % MINUTE - 20 * MINUTE
    events = [
        {"kind": "system", "worker": "worker-0", "metric": "gpu_util", "device": "0", "ts": ts, "value": 0.0}
        for ts in range(start, now, 10_000)
    ]
    with TestClient(app, headers={"Authorization": f"Bearer {admin_token}"}) as client:
        assert post_lines(client, *events, project="p", job="live").status_code == 200
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            findings = client.get("/jp/v1/jobs/live/insights").json()["findings"]
            if len(findings) == 2:
                break
            time.sleep(0.2)
        assert sorted((f["kind"], f["status"]) for f in findings) == [("idle_gpu", "open"), ("underused", "open")]
    assert app.state.insights.last_cycle is not None
    assert app.state.insights._thread is None  # stopped at shutdown


def test_an_app_with_no_interval_evaluates_only_on_demand(store, tmp_path):
    app = create_app(store, Settings(data_dir=tmp_path, write_credentials=False, insights_interval_s=0))
    with TestClient(app):
        assert app.state.insights._thread is None
