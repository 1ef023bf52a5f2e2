"""Where this process sits in a distributed job, read from the launcher's environment.

Launchers tell each process its rank in different variables. The first launcher
whose rank variable is set wins, and the local rank and world size are read from
the same launcher, so that a mix (torchrun inside a SLURM allocation) stays consistent:

| launcher | rank | local rank | world size |
|---|---|---|---|
| torchrun / torch.distributed | ``RANK`` | ``LOCAL_RANK`` | ``WORLD_SIZE`` |
| Open MPI | ``OMPI_COMM_WORLD_RANK`` | ``OMPI_COMM_WORLD_LOCAL_RANK`` | ``OMPI_COMM_WORLD_SIZE`` |
| PMIx | ``PMIX_RANK`` | ``PMIX_LOCAL_RANK`` | ``PMIX_SIZE`` |
| MVAPICH | ``MV2_COMM_WORLD_RANK`` | ``MV2_COMM_WORLD_LOCAL_RANK`` | ``MV2_COMM_WORLD_SIZE`` |
| MPICH / Intel MPI (PMI) | ``PMI_RANK`` | ``MPI_LOCALRANKID`` | ``PMI_SIZE`` |
| SLURM (srun) | ``SLURM_PROCID`` | ``SLURM_LOCALID`` | ``SLURM_NTASKS`` |

SLURM comes last: under ``srun torchrun ...`` the torchrun variables name the process,
while ``SLURM_PROCID`` names the node's task.
"""

from __future__ import annotations

import os
import re
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from jobpulse.sdk.checks import check_job, check_project, check_worker

LAUNCHERS: tuple[tuple[str, str, str, str], ...] = (
    ("torchrun", "RANK", "LOCAL_RANK", "WORLD_SIZE"),
    ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("pmix", "PMIX_RANK", "PMIX_LOCAL_RANK", "PMIX_SIZE"),
    ("mvapich", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_SIZE"),
    ("pmi", "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"),
    ("slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"),
)

_ID_BAD = re.compile(r"[^A-Za-z0-9-]+")


@dataclass(frozen=True)
class Placement:
    """Rank of this process as its launcher reported it (0 / 0 / 1 when started alone)."""

    rank: int
    local_rank: int
    world_size: int
    launcher: str  # "" when no launcher variable was found
    host: str

    @property
    def worker(self) -> str:
        return f"worker-{self.rank}"


def _int(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        return None
    return value if value >= 0 else None


def detect_placement(env: Mapping[str, str] | None = None) -> Placement:
    """Read rank, local rank and world size from the first launcher that set a rank."""
    env = os.environ if env is None else env
    host = socket.gethostname()
    for launcher, rank_var, local_var, size_var in LAUNCHERS:
        rank = _int(env, rank_var)
        if rank is None:
            continue
        local = _int(env, local_var)
        size = _int(env, size_var)
        return Placement(
            rank=rank,
            local_rank=rank if local is None else local,
            world_size=max(size or 1, rank + 1),
            launcher=launcher,
            host=host,
        )
    return Placement(rank=0, local_rank=0, world_size=1, launcher="", host=host)


def default_project(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return env.get("JOBPULSE_PROJECT") or "default"


def default_job(env: Mapping[str, str] | None = None, now: float | None = None) -> tuple[str, bool]:
    """A job id shared by every rank of one launch, and whether it is shared.

    ``JOBPULSE_JOB`` wins; then the launcher's run id (torchrun's ``TORCHELASTIC_RUN_ID``,
    SLURM's job and step ids), which every rank of the launch sees alike. Without
    either, a new id from the time and a random part: right for a single process, but
    each rank of a multi-process job would get its own (the second value is False then).
    """
    env = os.environ if env is None else env
    if env.get("JOBPULSE_JOB"):
        return env["JOBPULSE_JOB"], True
    run_id = env.get("TORCHELASTIC_RUN_ID", "")
    if run_id and run_id != "none":
        return sanitize_id(f"torchrun-{run_id}"), True
    if env.get("SLURM_JOB_ID"):
        step = env.get("SLURM_STEP_ID")
        suffix = f"-{step}" if step not in (None, "") else ""
        return sanitize_id(f"slurm-{env['SLURM_JOB_ID']}{suffix}"), True
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return f"run-{stamp}-{uuid.uuid4().hex[:6]}", False


def sanitize_id(value: str, limit: int = 64) -> str:
    """Letters, digits and ``-`` only, at most ``limit`` characters."""
    cleaned = _ID_BAD.sub("-", value).strip("-") or "x"
    return cleaned[:limit]


def run_names(
    project: str | None, job: str | None, worker: str | None, placement: Placement
) -> tuple[str, str, str, bool]:
    """The project, job and worker of a run, given or from the environment, checked (``ValueError`` naming the
    argument or variable that is wrong); and whether the job id is shared by the launch (see ``default_job``)."""
    given = project is not None
    project = check_project(project if given else default_project(), "project" if given else "JOBPULSE_PROJECT")
    shared = True
    if job:
        job = check_job(job)
    else:
        job, shared = default_job()
        check_job(job, "JOBPULSE_JOB")  # the launchers' ids are made valid; the variable is taken as it is
    given = worker is not None
    worker = worker if given else os.environ.get("JOBPULSE_WORKER") or placement.worker
    return project, job, check_worker(worker, "worker" if given else "JOBPULSE_WORKER"), shared
