"""Ranks that only a ``torch.distributed`` process group names (no launcher variable), as Lightning's DDP starts
them; and a real Lightning DDP run where lightning is installed."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from jobpulse.client import Client
from jobpulse.credentials import Credentials
from jobpulse.testing import free_port

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed (test extra)"),
]

# Joins a process group of 2 as rank argv[1], then starts its run: only the group knows the rank.
JOINED = """
import sys
import torch.distributed as dist
import jobpulse
dist.init_process_group("gloo", init_method=sys.argv[2], rank=int(sys.argv[1]), world_size=2)
run = jobpulse.init(project="ranks", job="pg-ranks")
print(f"{run.worker} joined")
dist.barrier()
run.finish()
"""


@pytest.fixture
def environ(server, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBPULSE_") and k not in ("RANK", "LOCAL_RANK")}
    env.update(JOBPULSE_URL=server.url, JOBPULSE_API_KEY=server.api_key, XDG_CACHE_HOME=str(tmp_path / "cache"))
    return env


@pytest.fixture
def api(server):
    return Client(Credentials(server.url, server.api_key), timeout=30)


def placed(api, job: str) -> list[tuple]:
    workers = api.request("GET", f"/jp/v1/jobs/{job}/workers")["workers"]
    return [(w["worker"], w["kind"], w["node"], w["host"], w["rank"], w["local_rank"], w["status"]) for w in workers]


def test_a_process_group_names_the_rank_no_launcher_variable_gives(environ, api):
    address = f"tcp://127.0.0.1:{free_port()}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", JOINED, str(rank), address],
            env={**environ, "LOCAL_RANK": str(rank), "NODE_RANK": "0"},  # what Lightning's launcher sets
        )
        for rank in range(2)
    ]
    assert [p.wait(120) for p in procs] == [0, 0]
    host = socket.gethostname()
    assert placed(api, "pg-ranks") == [
        ("worker-0", "rank", "node-0", host, 0, 0, "completed"),
        ("worker-1", "rank", "node-0", host, 1, 1, "completed"),
    ]


@pytest.mark.skipif(
    importlib.util.find_spec("lightning") is None, reason="lightning is not installed (not a test requirement)"
)
def test_a_lightning_ddp_run_makes_each_rank_a_worker_with_its_own_log(environ, api):
    script = str(Path(__file__).with_name("lightning_ddp.py"))
    done = subprocess.run([sys.executable, script, "lightning-ddp"], env=environ, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    host = socket.gethostname()
    assert placed(api, "lightning-ddp") == [
        ("worker-0", "rank", "node-0", host, 0, 0, "completed"),
        ("worker-1", "rank", "node-0", host, 1, 1, "completed"),
    ]
    lines = api.request("GET", "/jp/v1/jobs/lightning-ddp/logs?start=head&limit=1000")["lines"]
    for rank in range(2):
        mine = [line["msg"] for line in lines if line["worker"] == f"worker-{rank}" and " step " in line["msg"]]
        assert mine == [f"rank {rank} step {i}" for i in range(2)]  # 32 samples, 2 ranks, batches of 8
