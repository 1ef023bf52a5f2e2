"""The demo job tells one story: the jobs list, the job, its workers and its data agree on when it ran, three
workers complete, one fails with its traceback, and the job ends failed; the insights find its hot GPU and its
input-bound epochs, and nothing else. ``jobpulse server --demo`` then prints the lines that point a training
script at the server, and they work."""

from __future__ import annotations

import subprocess
import time

import pytest
from cli_support import DEMO_PROJECT

from jobpulse.client import Client
from jobpulse.credentials import Credentials
from jobpulse.demo import ERROR, SPAN_S, STARVED_EPOCHS, THROTTLED, epoch_start
from jobpulse.testing import running_server

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def story(server, demo) -> dict:  # noqa: ANN001
    api = Client(Credentials(server.url, server.api_key))
    found = api.get(f"/jp/v1/jobs/{demo}")
    listed = api.get("/jp/v1/jobs", project=DEMO_PROJECT)["jobs"]
    system = api.get(f"/jp/v1/jobs/{demo}/system")
    logs = api.get(f"/jp/v1/jobs/{demo}/logs", start="head", limit=100_000)["lines"]
    findings = api.get(f"/jp/v1/jobs/{demo}/insights")["findings"]
    return {
        "job": found["job"],
        "workers": found["workers"],
        "listed": listed,
        "system": system,
        "logs": logs,
        "findings": findings,
    }


def test_the_list_and_the_job_agree_on_when_it_started_and_ended(story):
    job, (listed,) = story["job"], story["listed"]
    assert (listed["started"], listed["ended"]) == (job["started"], job["ended"])
    assert min(w["started"] for w in story["workers"]) >= job["started"]
    assert job["ended"] == max(w["ended"] for w in story["workers"])
    assert abs(job["ended"] - job["started"] - SPAN_S * 1000) < 5_000  # the two hours it trained
    first_sample, last_sample = story["system"]["range"]
    assert job["started"] <= first_sample and last_sample <= job["ended"]
    assert job["started"] <= story["logs"][0]["ts"]


def test_three_workers_complete_and_one_fails_so_the_job_fails(story):
    assert [(w["worker"], w["status"], w["exit_code"]) for w in story["workers"]] == [
        ("worker-0", "completed", 0),
        ("worker-1", "completed", 0),
        ("worker-2", "failed", 1),
        ("worker-3", "completed", 0),
    ]
    assert story["job"]["status"] == "failed" and story["job"]["error_message"] == ERROR


def test_the_failing_workers_log_ends_in_its_traceback_when_it_ended(story):
    own = [line for line in story["logs"] if line["worker"] == "worker-2"]
    assert [line["level"] for line in own[-8:]] == ["error"] * 8
    assert own[-8]["msg"] == "Traceback (most recent call last):" and own[-1]["msg"] == ERROR
    failed = next(w for w in story["workers"] if w["worker"] == "worker-2")
    assert own[-1]["ts"] <= failed["ended"] < story["job"]["ended"]


def test_the_insights_find_the_hot_gpu_and_the_input_bound_epochs_and_nothing_else(story):
    found = sorted(story["findings"], key=lambda f: f["kind"])
    assert [(f["kind"], f["signal"], f["worker"], f["device"]) for f in found] == [
        ("hardware", "thermal_throttle", f"worker-{THROTTLED[0]}", str(THROTTLED[1])),
        ("underused", "", "", ""),
    ]
    underused = found[1]
    assert underused["evidence"]["causes"] == ["input_bound"]
    first, end = (epoch_start(story["job"]["started"], epoch) for epoch in STARVED_EPOCHS)
    # the detector's ten-minute window opens within the starved epochs and closes a few minutes after them
    assert first - 10 * 60_000 <= underused["started"] < end and first < underused["ended"] <= end + 10 * 60_000


def test_server_demo_prints_three_lines_that_point_a_training_script_at_it(tmp_path):
    with running_server(tmp_path, extra_args=["--demo"]) as server:
        deadline = time.monotonic() + 60
        while "export JOBPULSE_URL" not in server.output() and time.monotonic() < deadline:
            time.sleep(0.2)
        output = server.output()
        hint = output[output.index("point a training script at this server") :].splitlines()[1:4]
        assert hint[0].strip() == f"export JOBPULSE_URL={server.url}"
        assert hint[1].strip().startswith("export JOBPULSE_API_KEY=$(")
        script = "\n".join(["set -e", *hint])
        done = subprocess.run(
            ["bash", "-c", script],
            capture_output=True,
            text=True,
            timeout=120,
            env={"XDG_CONFIG_HOME": str(server.config_dir), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        )
        assert done.returncode == 0, done.stderr
        api = Client(Credentials(server.url, server.api_key))
        (job,) = [j for j in api.get("/jp/v1/jobs", project="demo")["jobs"] if j["job"] != "demo-resnet50"]
        assert job["status"] == "completed"
        keys = api.get(f"/jp/v1/jobs/{job['job']}/scalars")["metrics"]
        assert len(keys) == 1 and sum(v["points"] for v in keys[0]["variants"]) == 1
