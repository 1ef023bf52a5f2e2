"""``jobpulse insights JOB`` and the open findings in ``jobpulse show``, against a real server process."""

from __future__ import annotations

import httpx
import orjson
import pytest
from synth import constant, healthy, piecewise, recent

from jobpulse.cli import main
from jobpulse.cli.format import when
from jobpulse.cli.insights import evidence_text

pytestmark = pytest.mark.e2e
PROJECT = "cli-insights"


class Remote:
    """What the synthesized jobs need of a client: ``post`` and ``patch`` on the server process."""

    def __init__(self, server) -> None:  # noqa: ANN001
        self._base, self._headers = server.url, {"Authorization": f"Bearer {server.api_key}"}

    def post(self, path: str, **kwargs):  # noqa: ANN003, ANN201
        return httpx.post(self._base + path, headers={**self._headers, **kwargs.pop("headers", {})}, **kwargs)

    def patch(self, path: str, **kwargs):  # noqa: ANN003, ANN201
        return httpx.patch(self._base + path, headers=self._headers, **kwargs)

    def put(self, path: str, **kwargs):  # noqa: ANN003, ANN201
        return httpx.put(self._base + path, headers=self._headers, **kwargs)


def send(remote: Remote, builder) -> None:  # noqa: ANN001
    """Send ``builder``'s job into a project of its own, where only idle GPUs are looked for."""
    builder.project = PROJECT
    thresholds = {"disabled": ["underused", "straggler", "hang", "divergence", "hardware", "lost_worker"]}
    assert remote.put(f"/jp/v1/projects/{PROJECT}/insights/thresholds", json=thresholds).status_code == 200
    builder.send(remote)


def run(capsys: pytest.CaptureFixture, server, *args: str) -> tuple[int, str]:  # noqa: ANN001
    capsys.readouterr()
    code = main([*args, "--url", server.url, "--api-key", server.api_key])
    return code, capsys.readouterr().out


def test_insights_evaluates_a_finished_job_and_prints_its_findings(server, capsys):
    util = lambda w, d: piecewise(90.0, (10, 20, 0.0)) if (w, d) == ("worker-0", "1") else constant(90.0)  # noqa: E731
    remote = Remote(server)
    builder = healthy("cli-idle", (0, 30), workers=3, util=util, origin=recent(30))
    send(remote, builder)
    assert remote.patch("/jp/v1/jobs/cli-idle", json={"status": "completed", "at": builder.at(30)}).status_code == 200
    code, out = run(capsys, server, "insights", "cli-idle", "--evaluate", "--waste")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["SEVERITY", "FINDING", "WHERE"]
    assert lines[1].split()[:4] == ["warning", "idle_gpu", "worker-0", "gpu"]
    assert "resolved" in lines[1] and "mean_util_pct=0" in lines[1]
    assert "GPU-hours: 3 in all, 0.167 idle" in out
    code, out = run(capsys, server, "insights", "cli-idle", "--json")
    assert [f["kind"] for f in orjson.loads(out)["findings"]] == ["idle_gpu"]


def _with_an_idle_gpu(server, job: str, worker: str) -> None:  # noqa: ANN001 - jobpulse.testing.ServerProcess
    """A 30-minute job of three workers whose ``worker`` has GPU 0 idle from minute 10 on, evaluated at its end."""
    remote = Remote(server)
    util = lambda w, d: piecewise(90.0, (10, 30, 0.0)) if (w, d) == (worker, "0") else constant(90.0)  # noqa: E731
    builder = healthy(job, (0, 30), workers=3, util=util, origin=recent(30))
    send(remote, builder)
    assert remote.post(f"/jp/v1/jobs/{job}/insights/evaluate", params={"at": builder.at(29.5)}).status_code == 200


def test_show_lists_the_open_findings(server, capsys):
    _with_an_idle_gpu(server, "cli-open", "worker-0")
    code, out = run(capsys, server, "show", "cli-open")
    assert code == 0
    assert "Open findings (1):" in out and "idle_gpu" in out.split("Open findings (1):")[1]


def test_the_evidence_names_each_cause_with_what_showed_it():
    started = 1_795_778_160_000
    evidence = {
        "median_util_pct": 30.36,
        "causes": ["input_bound"],
        "cause_evidence": {"input_bound": {"metric": "cpu_util", "median_pct": 96.7, "started": started}},
        "median_cpu_iowait_pct": None,
    }
    at = when(started, seconds=False).replace(" ", "T")
    assert evidence_text(evidence) == (
        "median_util_pct=30.36 causes=input_bound "
        f"cause_evidence=input_bound(metric=cpu_util,median_pct=96.7,started={at}) median_cpu_iowait_pct=-"
    )


def test_insights_needs_a_job_or_a_project(server, capsys):
    assert run(capsys, server, "insights")[0] == 2


def test_insights_of_a_project_lists_its_jobs_findings_and_waste(server, capsys):
    _with_an_idle_gpu(server, "cli-project", "worker-1")
    code, out = run(capsys, server, "insights", "--project", PROJECT, "--status", "open", "--json", "--waste")
    assert code == 0
    answer = orjson.loads(out)
    assert ("cli-project", "idle_gpu", "worker-1") in {(f["job"], f["kind"], f["worker"]) for f in answer["findings"]}
    assert answer["waste"]["idle_gpu_hours"] >= 0.3
