"""``jobpulse jobs`` and ``jobpulse show`` against a real server."""

from __future__ import annotations

import time

import orjson
import pytest
from cli_support import DEMO_PROJECT

from jobpulse.client import Client
from jobpulse.credentials import Credentials

pytestmark = pytest.mark.e2e


def _api(server) -> Client:  # noqa: ANN001
    return Client(Credentials(server.url, server.api_key))


@pytest.fixture(scope="module")
def listed(server) -> str:  # noqa: ANN001
    """Three jobs of a project of their own: two running ones tagged 'nightly', one completed."""
    project = f"list-{time.time_ns() % 10**9}"
    api = _api(server)
    for job, tags in (("lj-a", ["nightly"]), ("lj-b", ["nightly"]), ("lj-c", [])):
        api.request("POST", "/jp/v1/jobs", json={"project": project, "job": f"{project}-{job}", "tags": tags})
        api.request("PUT", f"/jp/v1/jobs/{project}-{job}/workers/w0", json={"status": "running"})
    api.request("PUT", f"/jp/v1/jobs/{project}-lj-c/workers/w0", json={"status": "completed"})
    return project


def _rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines()[1:]]


def test_jobs_lists_the_demo_job_with_its_status_times_and_latest_values(jobpulse, demo):
    result = jobpulse("jobs", "--project", DEMO_PROJECT)
    assert result.code == 0, result.err
    header, line = result.out.splitlines()
    assert header.split()[:6] == ["JOB", "PROJECT", "STATUS", "STARTED", "DURATION", "WORKERS"]
    assert "LOSS/TRAIN" in header
    cells = line.split()
    assert cells[:3] == [demo, DEMO_PROJECT, "failed"]
    assert cells[5:7] == ["2h00m", "4"]  # after the start's date and time: the two hours it trained, 4 workers


def test_jobs_filters_by_status_tag_and_name(jobpulse, listed):
    running = _rows(jobpulse("jobs", "--project", listed, "--status", "running").out)
    assert sorted(r[0] for r in running) == [f"{listed}-lj-a", f"{listed}-lj-b"]
    tagged = _rows(jobpulse("jobs", "--project", listed, "--tag", "nightly").out)
    assert sorted(r[0] for r in tagged) == [f"{listed}-lj-a", f"{listed}-lj-b"]
    named = _rows(jobpulse("jobs", "--project", listed, "--name", "lj-c").out)
    assert [r[0] for r in named] == [f"{listed}-lj-c"]


def test_jobs_limit_takes_the_newest(jobpulse, listed):
    rows = _rows(jobpulse("jobs", "--project", listed, "--limit", "2").out)
    assert [r[0] for r in rows] == [f"{listed}-lj-c", f"{listed}-lj-b"]


def test_jobs_says_when_no_job_matches(jobpulse, listed):
    result = jobpulse("jobs", "--project", listed, "--status", "stopped")
    assert (result.code, result.out.strip()) == (0, "no jobs match")


def test_jobs_metric_option_picks_the_latest_value_columns(jobpulse, demo):
    result = jobpulse("jobs", "--project", DEMO_PROJECT, "--metric", "lr", "--metric", "loss/val")
    header, line = result.out.splitlines()
    assert header.split()[6:8] == ["LR", "LOSS/VAL"]
    latest = orjson.loads(jobpulse("show", demo, "--json").out)["latest"]
    values = {r["key"]: r["value"] for r in latest}
    assert line.split()[7:9] == [f"{values['lr']:.6g}", f"{values['loss/val']:.6g}"]  # STARTED is two words


def test_jobs_json_gives_each_job_with_all_its_latest_values(jobpulse, demo):
    answer = orjson.loads(jobpulse("jobs", "--project", DEMO_PROJECT, "--json").out)
    (job,) = answer["jobs"]
    assert job["job"] == demo and job["status"] == "failed"
    assert {r["key"] for r in job["latest"]} == {
        "accuracy/top1",
        "accuracy/top5",
        "loss/train",
        "loss/val",
        "lr",
        "throughput/images_per_sec",
    }


def test_show_gives_status_times_hardware_workers_error_and_latest_values(jobpulse, demo):
    result = jobpulse("show", demo)
    assert result.code == 0, result.err
    out = result.out
    facts = dict(line.split(":", 1) for line in out.split("\n\n")[0].splitlines())
    assert facts["Status"].strip() == "failed" and facts["Duration"].strip() == "2h00m"
    assert "8x H100" in facts["Instance"] and "96 CPU cores" in facts["Instance"]
    assert facts["Error"].strip().startswith("RuntimeError: DataLoader worker")
    workers = [line.split() for line in out.split("Workers (4):\n")[1].split("\n\n")[0].splitlines()[1:]]
    assert [(w[0], w[1], w[3]) for w in workers] == [
        ("worker-0", "completed", "0"),
        ("worker-1", "completed", "0"),
        ("worker-2", "failed", "1"),
        ("worker-3", "completed", "0"),
    ]
    latest = out.split("Latest values (6):\n")[1].splitlines()
    assert latest[0].split() == ["KEY", "VALUE", "STEP", "MIN", "MAX"]
    assert [line.split()[0] for line in latest[1:]][:3] == ["accuracy/top1", "accuracy/top5", "loss/train"]


def test_show_json_gives_the_job_its_workers_and_latest_values(jobpulse, demo):
    answer = orjson.loads(jobpulse("show", demo, "--json").out)
    assert answer["job"]["instance_type"]["gpu_count"] == 8
    assert len(answer["workers"]) == 4
    loss = next(r for r in answer["latest"] if r["key"] == "loss/train")
    assert loss["iter"] == 2999 and loss["points"] == 3000


def test_show_of_a_job_that_does_not_exist_fails_naming_it(jobpulse):
    result = jobpulse("show", "no-such-job")
    assert result.code == 1
    assert result.err.strip() == "jobpulse show: job 'no-such-job' does not exist (HTTP 404)"
