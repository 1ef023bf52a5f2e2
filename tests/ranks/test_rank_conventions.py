"""SLURM and MPI launch conventions: plain Python processes given the variables ``srun`` or ``mpirun`` sets.

Each process is a rank with the SDK: it becomes worker ``worker-<rank>`` of the node its launcher names, and its
console is its own log.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import child_env
from jobpulse.client import Client
from jobpulse.credentials import Credentials

pytestmark = pytest.mark.e2e

RANK = "import jobpulse; r = jobpulse.init(project='ranks'); print(r.worker, 'says hi'); r.finish()"
# What torchrun does on one node, in a few lines: start each local rank with its variables.
LAUNCHER = """
import os, subprocess, sys
print("launcher starts 2 ranks", flush=True)
procs = [
    subprocess.Popen([sys.executable, "-c", sys.argv[1]], env={**os.environ, "RANK": str(2 + i), "LOCAL_RANK": str(i),
                     "WORLD_SIZE": "4", "GROUP_RANK": "1"})
    for i in range(2)
]
sys.exit(max(p.wait() for p in procs))
"""


@pytest.fixture
def environ(server, tmp_path: Path) -> dict[str, str]:
    return child_env(server, tmp_path, drop=("JOBPULSE_", "SLURM_", "OMPI_"))


@pytest.fixture
def api(server):
    return Client(Credentials(server.url, server.api_key), timeout=30)


def run_all(argvs_envs: list[tuple[list[str], dict[str, str]]]) -> None:
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL) for argv, env in argvs_envs]
    assert [p.wait(120) for p in procs] == [0] * len(procs)


def placed(api, job: str) -> list[tuple]:
    workers = api.request("GET", f"/jp/v1/jobs/{job}/workers")["workers"]
    return [(w["worker"], w["kind"], w["node"], w["host"], w["rank"], w["local_rank"], w["status"]) for w in workers]


def logs(api, job: str) -> list[tuple[str, str]]:
    lines = api.request("GET", f"/jp/v1/jobs/{job}/logs?start=head&limit=1000")["lines"]
    return sorted((line["worker"], line["msg"]) for line in lines)


def test_srun_tasks_are_ranks_of_the_node_slurm_names(environ, api):
    slurm = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "4", "SLURM_NODEID": "1"}
    tasks = [{**environ, **slurm, "SLURM_PROCID": str(2 + i), "SLURM_LOCALID": str(i)} for i in range(2)]
    run_all([([sys.executable, "-c", RANK], env) for env in tasks])
    host = socket.gethostname()
    assert placed(api, "slurm-4242-0") == [  # the job id every task of the step shares
        ("worker-2", "rank", "node-1", host, 2, 0, "completed"),
        ("worker-3", "rank", "node-1", host, 3, 1, "completed"),
    ]
    assert logs(api, "slurm-4242-0") == [("worker-2", "worker-2 says hi"), ("worker-3", "worker-3 says hi")]


def test_mpirun_ranks_are_workers_of_the_node_open_mpi_names(environ, api):
    world = {"JOBPULSE_JOB": "mpi-job", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_NODE_RANK": "1"}
    ranks = [
        {**environ, **world, "OMPI_COMM_WORLD_RANK": str(2 + i), "OMPI_COMM_WORLD_LOCAL_RANK": str(i)} for i in range(2)
    ]
    run_all([([sys.executable, "-c", RANK], env) for env in ranks])
    host = socket.gethostname()
    assert placed(api, "mpi-job") == [
        ("worker-2", "rank", "node-1", host, 2, 0, "completed"),
        ("worker-3", "rank", "node-1", host, 3, 1, "completed"),
    ]


def test_a_node_wrapper_started_by_srun_is_the_node_its_ranks_report_under(environ, api):
    slurm = {"SLURM_JOB_ID": "5151", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "2", "SLURM_NODEID": "1"}
    wrapper = {**environ, **slurm, "SLURM_PROCID": "1", "SLURM_LOCALID": "0"}  # one task per node
    run = [sys.executable, "-m", "jobpulse", "run", "--project", "ranks", "--no-sample", "--"]
    run_all([([*run, sys.executable, "-c", LAUNCHER, RANK], wrapper)])
    host = socket.gethostname()
    assert placed(api, "slurm-5151-0") == [
        ("node-1", "node", "", host, None, None, "completed"),
        ("worker-2", "rank", "node-1", host, 2, 0, "completed"),
        ("worker-3", "rank", "node-1", host, 3, 1, "completed"),
    ]
    assert logs(api, "slurm-5151-0") == [
        ("node-1", "launcher starts 2 ranks"),
        ("worker-2", "worker-2 says hi"),
        ("worker-3", "worker-3 says hi"),
    ]
