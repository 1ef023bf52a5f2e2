"""``jobpulse run`` and ``jobpulse agent`` against a real server process (the session's ``server``)."""

import signal
import subprocess
import sys
import time

import pytest

from helpers import child_env
from jobpulse.client import Client
from jobpulse.credentials import Credentials

pytestmark = pytest.mark.e2e


@pytest.fixture
def env(server, tmp_path):
    return child_env(server, tmp_path)


@pytest.fixture
def api(server):
    return Client(Credentials(server.url, server.api_key), timeout=30)


def _jobpulse(*args: str) -> list[str]:
    return [sys.executable, "-m", "jobpulse", *args]


def _logs(api, job):
    return api.request("GET", f"/jp/v1/jobs/{job}/logs?start=head&limit=10000")["lines"]


def _worker(api, job, worker):
    workers = api.request("GET", f"/jp/v1/jobs/{job}/workers")["workers"]
    return next(w for w in workers if w["worker"] == worker)


def test_run_passes_on_exit_code_3_and_marks_the_worker_failed(env, api):
    code = (
        "import sys, time\n"
        "for i in range(300): print(f'step {i}')\n"
        "print('boom', file=sys.stderr)\n"
        "time.sleep(0.5)\n"
        "sys.exit(3)\n"
    )
    argv = _jobpulse("run", "--project", "e2e", "--job", "run-exit-3", "--worker", "worker-0", "--interval", "100ms")
    done = subprocess.run(
        [*argv, "--", sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines()[:3] == ["step 0", "step 1", "step 2"]  # echoed
    worker = _worker(api, "run-exit-3", "worker-0")
    assert worker["status"] == "failed" and worker["exit_code"] == 3
    lines = _logs(api, "run-exit-3")
    steps = [line["msg"] for line in lines if line["msg"].startswith("step ")]
    assert steps == [f"step {i}" for i in range(300)]
    assert "boom" in [line["msg"] for line in lines]
    seqs = [line["seq"] for line in lines]
    assert seqs == sorted(seqs)
    catalog = api.request("GET", "/jp/v1/jobs/run-exit-3/system")
    metrics = {s["metric"] for s in catalog["series"] if s["worker"] == "worker-0"}
    assert {"cpu_cores", "mem_bytes", "agent_rss_bytes"} <= metrics


def test_run_success_marks_the_worker_completed(env, api):
    argv = _jobpulse("run", "--project", "e2e", "--job", "run-ok", "--worker", "w1", "--no-sample")
    done = subprocess.run(
        [*argv, "--", sys.executable, "-c", "print('fine')"], env=env, capture_output=True, timeout=120
    )
    assert done.returncode == 0
    worker = _worker(api, "run-ok", "w1")
    assert worker["status"] == "completed" and worker["exit_code"] == 0


def test_sigterm_reaches_the_command_and_stops_the_worker(env, api):
    argv = _jobpulse("run", "--project", "e2e", "--job", "run-term", "--worker", "w0", "--no-sample")
    code = "import time; print('ready', flush=True); time.sleep(60)"
    proc = subprocess.Popen([*argv, "--", sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    worker = _worker(api, "run-term", "w0")
    assert worker["status"] == "stopped" and worker["exit_code"] == 143


def test_agent_samples_read_back(env, api):
    argv = _jobpulse(
        "agent", "--project", "e2e", "--job", "agent-job", "--worker", "node-1",
        "--interval", "200ms", "--count", "4", "--paths", "ephemeral=/tmp", "--no-gpu", "--no-npu",
    )  # fmt: skip
    started = time.time()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    catalog = api.request("GET", "/jp/v1/jobs/agent-job/system")
    series = {(s["worker"], s["metric"]): s["devices"] for s in catalog["series"]}
    for metric in ("cpu_cores", "cpu_util", "mem_bytes", "mem_util", "net_rx_Bps", "ephemeral_util"):
        assert series.get(("node-1", metric)) == [""]
    answer = api.request("GET", "/jp/v1/jobs/agent-job/system/series?metric=mem_bytes&step=1s")
    (mem,) = answer["series"]
    assert sum(mem["count"]) == 4  # one sample per tick
    assert min(mem["min"]) > 0
    assert min(mem["t"]) >= int(started) * 1000 - 1000


def _python_under_run(env, job: str, code: str) -> None:
    """``jobpulse run`` of a Python script, as node worker ``node-0`` of ``job`` in project e2e; it must succeed."""
    argv = _jobpulse("run", "--project", "e2e", "--job", job, "--worker", "node-0", "--no-sample")
    done = subprocess.run(
        [*argv, "--", sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_a_script_using_the_sdk_under_run_logs_each_line_once(env, api):
    code = (
        "import jobpulse\n"
        "run = jobpulse.init(project='e2e', job='run-sdk', worker='worker-0')\n"
        "print('only once')\n"
        "run.log({'loss': 0.5}, step=1)\n"
        "run.finish()\n"
    )
    _python_under_run(env, "run-sdk", code)
    assert [line["msg"] for line in _logs(api, "run-sdk")].count("only once") == 1
    points = api.request("GET", "/jp/v1/jobs/run-sdk/scalars/points?metric=loss")
    assert points["value"] == [0.5]


def test_the_config_of_an_sdk_run_under_run_reaches_the_job(env, api):
    code = (
        "import jobpulse\n"
        "run = jobpulse.init(project='e2e', job='run-config', config={'lr': 0.1}, tags=['sweep'])\n"
        "run.finish()\n"
    )
    _python_under_run(env, "run-config", code)
    job = api.request("GET", "/jp/v1/jobs/run-config")["job"]
    assert (job["config"], job["tags"]) == ({"lr": 0.1}, ["sweep"])


RANKS_SCRIPT = """
import json, os, subprocess, sys, urllib.request

rank = (
    "import jobpulse; r = jobpulse.init(); n = r.placement.rank; print('rank', n); "
    "r.log({f'rank{n}/loss': 1.0}, step=1); r.finish(%r)"
)
url = os.environ["JOBPULSE_URL"] + "/jp/v1/jobs/run-ranks/workers"
req = urllib.request.Request(url, headers={"Authorization": "Bearer " + os.environ["JOBPULSE_API_KEY"]})


def ranks(numbers, status="completed"):
    for n in numbers:
        env = {**os.environ, "RANK": str(n), "LOCAL_RANK": str(n), "WORLD_SIZE": "3"}
        subprocess.run([sys.executable, "-c", rank % status], env=env, check=True)
    print("after", numbers, [(w["worker"], w["status"]) for w in json.load(urllib.request.urlopen(req))["workers"]])


ranks([1])
ranks([2], "failed")
ranks([0])
"""


def test_ranks_launched_under_run_are_workers_of_its_node_and_end_themselves(env, api):
    _python_under_run(env, "run-ranks", RANKS_SCRIPT)
    found = api.request("GET", "/jp/v1/jobs/run-ranks/workers")["workers"]
    assert [(w["worker"], w["kind"], w["node"], w["rank"], w["status"]) for w in found] == [
        ("node-0", "node", "", None, "completed"),  # run's word: the command's exit status
        ("worker-0", "rank", "node-0", 0, "completed"),
        ("worker-1", "rank", "node-0", 1, "completed"),
        ("worker-2", "rank", "node-0", 2, "failed"),
    ]
    lines = _logs(api, "run-ranks")
    assert "after [1] [('node-0', 'running'), ('worker-1', 'completed')]" in lines_of(lines, "node-0")
    assert [lines_of(lines, f"worker-{n}") for n in range(3)] == [["rank 0"], ["rank 1"], ["rank 2"]]


def lines_of(lines: list[dict], worker: str) -> list[str]:
    return [line["msg"] for line in lines if line["worker"] == worker]


def test_run_says_where_what_it_could_not_deliver_waits(env, tmp_path):
    from jobpulse.testing import free_port

    down = f"http://127.0.0.1:{free_port()}"
    argv = _jobpulse("run", "--url", down, "--job", "run-down", "--no-sample", "--flush-timeout", "0.5")
    done = subprocess.run(
        [*argv, "--", sys.executable, "-c", "print('hello')"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout == "hello\n"
    spool = tmp_path / "cache" / "jobpulse" / "spool" / "run-down"
    assert f"could not be delivered to {down}" in done.stderr
    assert f"kept in {spool}" in done.stderr and "`jobpulse sync` sends them" in done.stderr
