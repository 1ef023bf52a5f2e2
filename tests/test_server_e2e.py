"""The real server process on loopback: first start, restart, CLI, live follow, demo."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import httpx
import orjson
import pytest

from helpers import NOW_MS
from jobpulse.testing import running_server

pytestmark = pytest.mark.e2e


def api(server, method: str, path: str, **kwargs) -> httpx.Response:
    headers = {"Authorization": f"Bearer {server.api_key}", **kwargs.pop("headers", {})}
    return httpx.request(method, server.url + path, headers=headers, timeout=30, **kwargs)


def jobpulse(server, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CONFIG_HOME": str(server.config_dir)}
    env.pop("JOBPULSE_URL", None)
    env.pop("JOBPULSE_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "jobpulse", *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_first_start_writes_an_admin_key_and_prints_a_login_link(server):
    assert server.api_key.startswith("jp_")
    output = server.output()
    assert "created the admin API key" in output and "/login?token=" in output
    assert api(server, "GET", "/jp/v1/server").json()["caller"]["role"] == "admin"


def test_data_survives_a_restart(tmp_path):
    with running_server(tmp_path) as server:
        line = orjson.dumps({"kind": "scalar", "project": "p", "job": "keep", "metric": "m", "iter": 1, "value": 4.5})
        assert (
            api(
                server,
                "POST",
                "/jp/v1/ingest",
                content=line,
                headers={"Content-Type": "application/x-ndjson"},
            ).json()["accepted"]
            == 1
        )
        server.stop()
        server.start()
        points = api(server, "GET", "/jp/v1/jobs/keep/scalars/points", params={"metric": "m"}).json()
        assert points["value"] == [4.5]
        assert "created the admin API key" in server.output()  # printed once, on the first start only
        assert server.output().count("created the admin API key") == 1


def test_cli_keys_create_list_revoke(server):
    created = jobpulse(server, "keys", "create", "--name", "ci", "--project", "vision", "--role", "write")
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip().splitlines()[-1]
    key_id = token.split("_")[1]
    listed = jobpulse(server, "keys", "list")
    assert key_id in listed.stdout and "vision" in listed.stdout
    ok = httpx.get(server.url + "/jp/v1/jobs", headers={"Authorization": f"Bearer {token}"})
    assert ok.status_code == 200
    assert jobpulse(server, "keys", "revoke", key_id).returncode == 0
    refused = httpx.get(server.url + "/jp/v1/jobs", headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == 401


def test_cli_reports_errors_with_a_non_zero_exit(server):
    result = jobpulse(server, "keys", "revoke", "000000000000")
    assert result.returncode == 1 and "does not exist" in result.stderr
    bad = jobpulse(server, "keys", "create", "--role", "owner")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_login_command_prints_a_working_link(server):
    result = jobpulse(server, "login")
    url = result.stdout.strip()
    assert url.startswith(server.url + "/login?token=")
    with httpx.Client() as browser:
        assert browser.get(url, follow_redirects=False).status_code == 303
        assert browser.get(server.url + "/jp/v1/jobs").status_code == 200


def test_follow_streams_lines_ingested_after_it_started(server):
    job = f"follow-{time.time_ns()}"
    first = {
        "kind": "log",
        "project": "p",
        "job": job,
        "worker": "w0",
        "seq": 1,
        "msg": "before",
        "ts": NOW_MS,
    }
    api(
        server,
        "POST",
        "/jp/v1/ingest",
        content=orjson.dumps(first),
        headers={"Content-Type": "application/x-ndjson"},
    )
    received: list[str] = []

    def follow() -> None:
        with httpx.stream(
            "GET",
            f"{server.url}/jp/v1/jobs/{job}/logs/follow",
            headers={"Authorization": f"Bearer {server.api_key}"},
            timeout=20,
        ) as stream:
            for line in stream.iter_lines():
                if line.startswith("data: "):
                    received.extend(item["msg"] for item in orjson.loads(line[6:])["lines"])
                    return

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    time.sleep(1.0)
    later = dict(first, seq=2, msg="after", ts=NOW_MS + 1)
    api(
        server,
        "POST",
        "/jp/v1/ingest",
        content=orjson.dumps(later),
        headers={"Content-Type": "application/x-ndjson"},
    )
    reader.join(15)
    assert received == ["after"]


def test_demo_job_loads_through_the_public_api(server):
    result = jobpulse(server, "demo", "--job", "demo-e2e")
    assert result.returncode == 0, result.stderr
    job = api(server, "GET", "/jp/v1/jobs/demo-e2e").json()
    assert job["job"]["instance_type"]["gpu_count"] == 8 and len(job["workers"]) == 4
    heat = api(server, "GET", "/jp/v1/jobs/demo-e2e/system/series", params={"metric": "gpu_util", "step": "5m"})
    assert len(heat.json()["series"]) == 32
    errors = api(server, "GET", "/jp/v1/jobs/demo-e2e/logs", params={"level": "error"}).json()["lines"]
    assert errors[0]["msg"].startswith("Traceback")
    assert api(server, "GET", "/jp/v1/jobs/demo-e2e/events/plot").json()["events"][0]["metric"] == "confusion"
    image = api(server, "GET", "/jp/v1/jobs/demo-e2e/events/image").json()["events"][0]
    assert api(server, "GET", image["url"]).content.startswith(b"\x89PNG")


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (an exited one its new parent has not reaped yet is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the tie to the starter is Linux's prctl")
def test_a_test_server_stops_when_the_process_that_started_it_dies(tmp_path):
    code = f"""
import os
from pathlib import Path
from jobpulse.testing import ServerProcess
srv = ServerProcess(data_dir=Path({str(tmp_path / "data")!r}), config_dir=Path({str(tmp_path / "config")!r}))
srv.data_dir.mkdir()
srv.config_dir.mkdir()
srv.start()
print(srv.process.pid, flush=True)
os.kill(os.getpid(), 9)  # as a crashing test run dies: no cleanup of any kind
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == -9, done.stderr
    pid = int(done.stdout.split()[0])
    deadline = time.monotonic() + 30
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(pid)
