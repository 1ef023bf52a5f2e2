"""The SDK in real processes against a real server: a failing script, a server restart, a killed run."""

from __future__ import annotations

import os
import signal

import pytest
import sdk_support as s

from jobpulse.sdk import spool as sp

pytestmark = pytest.mark.e2e

FAILING_SCRIPT = """
import logging, sys, warnings
import numpy as np
import jobpulse

run = jobpulse.init(project="e2e", job="e2e-fail", config={"lr": 0.1}, tags=["e2e"], flush_interval=0.2)
for step in range(50):
    run.log({"train/loss": 1.0 / (step + 1), "lr": 0.1}, step=step)
run.log({"odd": float("nan")}, step=50)
run.log({"odd": float("inf")}, step=51)
run.log({"odd": float("-inf")}, step=52)
for i in range(101):
    sys.stdout.write("\\rprogress %3d%%|%-10s|" % (i, "#" * (i // 10)))
    sys.stdout.flush()
sys.stdout.write("\\n")
print("after the bar")
logging.getLogger("train").warning("lr is high: %s", 0.1)
warnings.warn("old option", DeprecationWarning)
run.image(np.full((4, 5, 3), 200, np.uint8), "samples", "input", iter=7)
raise RuntimeError("diverged at step 52")
"""


@pytest.fixture(scope="module")
def failed_run(server, tmp_path_factory):
    env = s.client_env(server, tmp_path_factory.mktemp("fail") / "spool", PYTHONWARNINGS="always")
    proc = s.start_client(FAILING_SCRIPT, env)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def test_failing_script_exits_with_its_error_still_printed(failed_run):
    code, out, err = failed_run
    assert code == 1
    assert "RuntimeError: diverged at step 52" in err
    assert "after the bar" in out


def test_failing_script_values_arrive(server, failed_run):
    points = s.all_points(server, "e2e-fail", "train/loss", "train/loss")
    assert points["iter"] == list(range(50))
    assert points["value"][0] == 1.0 and points["value"][9] == pytest.approx(0.1)
    odd = s.all_points(server, "e2e-fail", "odd", "odd")
    assert odd["value"] == ["NaN", "Infinity", "-Infinity"]


def test_failing_script_progress_bar_is_one_line(server, failed_run):
    lines = [line["msg"] for line in s.all_lines(server, "e2e-fail")]
    assert [m for m in lines if "progress" in m] == ["progress 100%|##########|"]
    assert lines.index("progress 100%|##########|") < lines.index("after the bar")


def test_failing_script_traceback_is_in_the_log_as_errors(server, failed_run):
    errors = [line["msg"] for line in s.all_lines(server, "e2e-fail") if line["level"] == "error"]
    assert errors[0] == "Traceback (most recent call last):"
    assert errors[-1] == "RuntimeError: diverged at step 52"


def test_failing_script_logging_and_warnings_keep_their_level(server, failed_run):
    lines = s.all_lines(server, "e2e-fail")
    assert [(x["level"], x["worker"]) for x in lines if x["msg"] == "train: lr is high: 0.1"] == [
        ("warning", "worker-0")
    ]
    assert any(x["level"] == "warning" and "DeprecationWarning: old option" in x["msg"] for x in lines)
    seqs = [(x["ts"], x["seq"]) for x in lines]
    assert seqs == sorted(seqs) and len({q for _, q in seqs}) == len(seqs)


def test_failing_script_marks_worker_and_job_failed(server, failed_run):
    found = s.api_get(server, "/jp/v1/jobs/e2e-fail")
    assert [(w["worker"], w["status"]) for w in found["workers"]] == [("worker-0", "failed")]
    assert found["job"]["status"] == "failed"
    assert found["job"]["config"] == {"lr": 0.1} and found["job"]["tags"] == ["e2e"]
    assert "RuntimeError: diverged at step 52" in found["job"]["error_message"]


def test_failing_script_image_is_uploaded_and_referenced(server, failed_run):
    (event,) = s.api_get(server, "/jp/v1/jobs/e2e-fail/events/image")["events"]
    assert (event["metric"], event["variant"], event["iter"]) == ("samples", "input", 7)
    assert s.api_bytes(server, event["url"]).startswith(b"\x89PNG")


RESTART_SCRIPT = """
import os, time
import jobpulse

run = jobpulse.init(project="e2e", job="e2e-restart", flush_interval=0.05, backoff_cap=0.5, flush_timeout=30)
for step in range({n}):
    run.log({{"x": float(step)}}, step=step)
    print("line", step)
    if step == {half}:
        assert run.flush(timeout=10)
        os.write(1, b"HALF\\n")  # past the console capture: not a log line
    time.sleep(0.01)
run.finish()
"""


def test_server_restart_mid_run_loses_and_duplicates_nothing(tmp_path):
    # The server is read only once the client has exited: reads are not what is tested here.
    n, half = 500, 150
    with s.client_beside_server(tmp_path, RESTART_SCRIPT.format(n=n, half=half)) as (srv, proc):
        s.wait_for(lambda: proc.stdout.readline() in ("HALF\n", ""), 30, "the first half", interval=0)
        # stopped while the client goes on logging
        s.outlast_outage(srv, proc, srv.stop, "the run ended before the outage", timeout=60)
        points = s.all_points(srv, "e2e-restart", "x", "x")
        assert points["iter"] == list(range(n))
        assert points["value"] == [float(i) for i in range(n)]
        msgs = [line["msg"] for line in s.all_lines(srv, "e2e-restart")]
        assert sorted(msgs, key=lambda m: int(m.split()[1])) == [f"line {i}" for i in range(n)]
        workers = s.api_get(srv, "/jp/v1/jobs/e2e-restart")["workers"]
        assert [w["status"] for w in workers] == ["completed"]


KILLED_SCRIPT = """
import os, time
import jobpulse

run = jobpulse.init(project="e2e", job="e2e-killed", flush_interval=0.05)
for step in range(300):
    run.log({"y": step * 2.0}, step=step)
    print("killed-run line", step)
run.flush(timeout=0.3)
from jobpulse.sdk import spool as sp
folder = sp.Spool(os.environ["JOBPULSE_SPOOL_DIR"], "e2e-killed", "worker-0", 1).dir
deadline = time.monotonic() + 30  # the server is down: wait until the spool holds everything, however loaded
def spooled():
    return sum((sp.read_header(p) or {}).get("events", 0) for p in sp.spool_files(folder))
while time.monotonic() < deadline and spooled() < 600:
    time.sleep(0.05)
os.write(1, b"READY\\n")  # past the console capture: not a log line
time.sleep(60)
"""

NEXT_SCRIPT = """
import jobpulse

with jobpulse.init(project="e2e", job="e2e-next") as run:
    run.log({"z": 1.0}, step=0)
"""


def test_spool_of_a_killed_run_is_replayed_by_the_next_run(tmp_path):
    srv = s.own_server(tmp_path)
    srv.stop()  # known address and key, but down while the first run reports
    spool_root = tmp_path / "spool"
    env = s.client_env(srv, spool_root)
    killed = s.start_client(KILLED_SCRIPT, env)
    try:
        ready = ("READY\n", "")
        s.wait_for(lambda: killed.stdout.readline() in ready, 30, "the first run to spool", interval=0)
        os.kill(killed.pid, signal.SIGKILL)
    finally:
        if killed.poll() is None:
            killed.kill()
        killed.communicate(timeout=10)
    assert killed.returncode == -signal.SIGKILL
    killed_dir = sp.Spool(spool_root, "e2e-killed", "worker-0", 1).dir
    assert sum(sp.read_header(p)["events"] for p in sp.spool_files(killed_dir)) == 600
    srv.start()
    try:
        nxt = s.start_client(NEXT_SCRIPT, env)
        _, err = nxt.communicate(timeout=60)
        assert nxt.returncode == 0, err
        points = s.all_points(srv, "e2e-killed", "y", "y")
        assert points["iter"] == list(range(300)) and points["value"][-1] == 598.0
        msgs = [line["msg"] for line in s.all_lines(srv, "e2e-killed")]
        assert sorted(msgs, key=lambda m: int(m.split()[-1])) == [f"killed-run line {i}" for i in range(300)]
        assert s.all_points(srv, "e2e-next", "z", "z")["value"] == [1.0]
        assert not sp.spool_files(killed_dir) and not killed_dir.exists()
    finally:
        srv.stop()


PIPELINE_SCRIPT = """
import os
import jobpulse

run = jobpulse.init(project="e2e", job="e2e-pipeline", backoff_cap=0.5, flush_timeout=120)
keys = ["a", "b", "train/c", "train/d"]
for step in range({n}):
    run.log({{k: float(step) for k in keys}}, step=step)
assert run.flush(timeout=60)
os.write(1, b"FIRST\\n")  # past the console capture: not a log line
# queued faster than the server stores them, each batch encoded while the one before is on
# the wire: two more rounds over the same steps (the last must win), then new steps (large batches)
for rnd in (1, 2):
    for step in range({n}):
        run.log({{k: rnd * 1e6 + step for k in keys}}, step=step)
    run.text(f"round {{rnd}} queued")
for step in range({n}, 3 * {n}):
    run.log({{k: 3e6 + step for k in keys}}, step=step)
os.write(1, b"QUEUED\\n")
run.finish()
"""


def test_pipelined_batches_keep_their_order_through_a_server_restart(tmp_path):
    n = 10_000
    with s.client_beside_server(tmp_path, PIPELINE_SCRIPT.format(n=n)) as (srv, proc):
        s.wait_for(lambda: proc.stdout.readline() in ("FIRST\n", ""), 60, "the first round", interval=0)
        s.wait_for(lambda: proc.stdout.readline() in ("QUEUED\n", ""), 60, "the later rounds", interval=0)
        # killed while batches of the later rounds are on the wire
        s.outlast_outage(srv, proc, srv.kill, "the run delivered everything before the outage", timeout=120)
        for metric, variant in (("a", "a"), ("b", "b"), ("train/c", "train/c"), ("train/d", "train/d")):
            points = s.all_points(srv, "e2e-pipeline", metric, variant)
            assert points["iter"] == list(range(3 * n))
            assert points["value"] == [2e6 + i for i in range(n)] + [3e6 + i for i in range(n, 3 * n)]
        msgs = [line["msg"] for line in s.all_lines(srv, "e2e-pipeline")]
        assert msgs == ["round 1 queued", "round 2 queued"]
        workers = s.api_get(srv, "/jp/v1/jobs/e2e-pipeline")["workers"]
        assert [w["status"] for w in workers] == ["completed"]


def test_a_server_that_refuses_large_batches_gets_them_in_parts(tmp_path, capfd):
    from jobpulse.sdk.run import Run
    from jobpulse.testing import running_server

    steps, keys = 20_000, ["x", "y", "z"]
    with running_server(tmp_path / "srv", env={"JOBPULSE_MAX_EVENTS": "10000"}) as srv:
        # no timed flush: the sender wakes when 5,000 records (15,000 points) wait, more than the server takes
        options = s.run_options(srv, tmp_path, flush_timeout=120, flush_interval=600)
        run = Run(project="e2e", job="e2e-split", **options)
        for step in range(steps):  # 60,000 points queued: batches larger than the server takes
            run.log({k: step * 0.5 for k in keys}, step=step)
        delivery = run.finish()
        assert delivery.dropped_events == 0 and delivery.spooled_events == 0
        assert delivery.sent_events == steps * len(keys)
        for key in keys:
            points = s.all_points(srv, "e2e-split", key, key)
            assert points["iter"] == list(range(steps)) and points["value"][-1] == (steps - 1) * 0.5
    assert "too large" in capfd.readouterr().err
