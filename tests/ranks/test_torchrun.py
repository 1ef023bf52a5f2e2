"""Real torchrun jobs on the CPU (gloo): every rank is a worker, under the node wrapper ``jobpulse run`` or not.

Each job runs once per module (a torch process costs seconds); the tests read what it left on the server.
The script (``ddp_train.py``) prints ``rank R step S loss=...`` lines, one stderr line, and one line written
straight to file descriptor 1, which the SDK does not see.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path

import orjson
import pytest

from helpers import child_env
from jobpulse.client import Client
from jobpulse.credentials import Credentials
from jobpulse.sdk.env import sanitize_id

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed (test extra)"),
]

SCRIPT = str(Path(__file__).with_name("ddp_train.py"))
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
HOST = socket.gethostname()
NODE = f"node-{sanitize_id(HOST, 123)}"  # the wrapper's node, where no launcher variable names a node rank
STEPS = 3
OMP_WARNING = "Setting OMP_NUM_THREADS environment variable for each process to be 1"


def launch(server, tmp_path: Path, argv: list[str], **env: str) -> subprocess.CompletedProcess:
    environ = {**child_env(server, tmp_path, drop=("JOBPULSE_", "OMP_NUM_THREADS")), **env}
    done = subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def api(server):
    return Client(Credentials(server.url, server.api_key), timeout=30)


@pytest.fixture(scope="module")
def wrapped(server, tmp_path_factory):
    """``jobpulse run --job ddp-wrapped -- torchrun --nproc_per_node=2 ddp_train.py``; its output."""
    run = [sys.executable, "-m", "jobpulse", "run", "--project", "ranks", "--job", "ddp-wrapped", "--no-sample"]
    return launch(server, tmp_path_factory.mktemp("wrapped"), [*run, "--", TORCHRUN, *torchrun_args(2)])


@pytest.fixture(scope="module")
def alone(server, tmp_path_factory):
    """``torchrun --nproc_per_node=3 ddp_train.py`` with JOBPULSE_JOB=ddp-alone; its output."""
    return launch(server, tmp_path_factory.mktemp("alone"), [TORCHRUN, *torchrun_args(3)], JOBPULSE_JOB="ddp-alone")


def torchrun_args(ranks: int) -> list[str]:
    return ["--standalone", f"--nproc_per_node={ranks}", SCRIPT]


def workers(api, job: str) -> list[dict]:
    return api.request("GET", f"/jp/v1/jobs/{job}/workers")["workers"]


def logs(api, job: str) -> list[dict]:
    return api.request("GET", f"/jp/v1/jobs/{job}/logs?start=head&limit=10000")["lines"]


def by_worker(lines: list[dict]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in lines:
        out.setdefault(line["worker"], []).append(line["msg"])
    return out


def rank_lines(rank: int, world: int) -> list[str]:
    """What rank ``rank`` of ``world`` prints at each step; the total is summed over every rank (all-reduce)."""
    total = world * (world + 1) // 2
    return [f"rank {rank} step {step} loss={1.0 / (step + 1) + rank:.3f} total={total}" for step in range(STEPS)]


def test_under_the_wrapper_each_rank_is_a_worker_of_the_node(wrapped, api):
    found = [
        (w["worker"], w["kind"], w["node"], w["host"], w["rank"], w["local_rank"], w["status"])
        for w in workers(api, "ddp-wrapped")
    ]
    assert found == [
        (NODE, "node", "", HOST, None, None, "completed"),
        ("worker-0", "rank", NODE, HOST, 0, 0, "completed"),
        ("worker-1", "rank", NODE, HOST, 1, 1, "completed"),
    ]
    assert workers(api, "ddp-wrapped")[0]["exit_code"] == 0  # the node worker has the command's exit status


def test_under_the_wrapper_each_rank_logs_its_own_console_once(wrapped, api):
    lines = logs(api, "ddp-wrapped")
    mine = by_worker(lines)
    for rank in (0, 1):
        steps = [m for m in mine[f"worker-{rank}"] if m.startswith(f"rank {rank} step")]
        assert steps == rank_lines(rank, 2)
        assert f"rank {rank} warns on stderr" in mine[f"worker-{rank}"]
        assert not [m for m in mine[f"worker-{rank}"] if m.startswith(f"rank {1 - rank} ")]
    # every line a rank wrote is in the job's log once: under its own worker, or under the node where it
    # went around the SDK; only the launcher repeats itself (its banner of stars)
    said = Counter(line["msg"] for line in lines if line["msg"].startswith("rank "))
    assert set(said.values()) == {1} and len(said) == 2 * (STEPS + 2)


def test_under_the_wrapper_what_no_rank_captured_is_the_nodes(wrapped, api):
    node = by_worker(logs(api, "ddp-wrapped"))[NODE]
    assert any(OMP_WARNING in msg for msg in node)  # torchrun's own warning
    assert sorted(m for m in node if m.endswith("fd-level line")) == ["rank 0 fd-level line", "rank 1 fd-level line"]
    assert not [m for m in node if " step " in m or "warns on stderr" in m]


def test_under_the_wrapper_the_terminal_shows_every_line_once_and_no_marks(wrapped):
    out = wrapped.stdout.splitlines()
    for rank in (0, 1):
        for expected in rank_lines(rank, 2):
            assert out.count(expected) == 1
    assert "\x1e" not in wrapped.stdout and "\x1e" not in wrapped.stderr
    assert "rank 1 warns on stderr" in wrapped.stderr.splitlines()


def test_under_the_wrapper_every_ranks_points_are_kept(wrapped, api):
    for rank in (0, 1):
        points = api.request(
            "GET", f"/jp/v1/jobs/ddp-wrapped/scalars/points?metric=loss&variant=loss&worker=worker-{rank}"
        )
        assert points["value"] == pytest.approx([1.0 / (step + 1) + rank for step in range(STEPS)])


def test_torchrun_alone_makes_each_rank_a_worker_of_its_node(alone, api):
    found = [
        (w["worker"], w["kind"], w["node"], w["host"], w["rank"], w["local_rank"]) for w in workers(api, "ddp-alone")
    ]
    assert found == [(f"worker-{r}", "rank", "node-0", HOST, r, r) for r in range(3)]  # node rank: GROUP_RANK
    assert {w["status"] for w in workers(api, "ddp-alone")} == {"completed"}


def test_torchrun_alone_keeps_each_ranks_console_as_its_log(alone, api):
    mine = by_worker(logs(api, "ddp-alone"))
    for rank in range(3):
        steps = [m for m in mine[f"worker-{rank}"] if " step " in m]
        assert steps == rank_lines(rank, 3)
    assert sorted(mine) == ["worker-0", "worker-1", "worker-2"]


def vendor(server, path: str, **headers: str) -> dict:
    """A compatible API's answer (a jobpulse key where each vendor's clients put a credential)."""
    request = urllib.request.Request(server.url + path, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return orjson.loads(response.read())


def test_the_vendor_apis_count_the_node_and_its_task_log_holds_every_ranks_lines(wrapped, alone, api, server):
    key = server.api_key
    bearer = {"Authorization": f"Bearer {key}"}
    for job, units in (("ddp-wrapped", [NODE]), ("ddp-alone", ["worker-0", "worker-1", "worker-2"])):
        pai = vendor(server, f"/api/v1/jobs/{job}/metrics?MetricType=CpuCoreUsage", **bearer)
        assert [pod["PodId"] for pod in pai["PodMetrics"]] == [f"{job}-{unit}" for unit in units]
        baseten = vendor(server, f"/v1/training_projects/ranks/jobs/{job}/metrics", **bearer)
        assert baseten["training_job"]["node_count"] == len(units)
    preview = vendor(server, f"/v2/ranks/training-jobs/ddp-wrapped/tasks/{NODE}/logs/preview", **{"X-Auth-Token": key})
    # the node's task log is the node's lines and its ranks', in the order of the job's log: nothing lost
    assert preview["content"] == "".join(f"{line['msg']}\n" for line in logs(api, "ddp-wrapped"))
    for rank in (0, 1):
        assert all(preview["content"].count(f"{expected}\n") == 1 for expected in rank_lines(rank, 2))
    assert OMP_WARNING in preview["content"]
