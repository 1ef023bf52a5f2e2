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
while ``SLURM_PROCID`` names the node's task. Where no launcher variable names the rank but the process has
joined a ``torch.distributed`` process group (Lightning's DDP starts its processes itself and names their rank
only there), the group's rank and size are the process's, its local rank ``LOCAL_RANK``.

A process of a launch (a rank) is worker ``worker-<rank>`` of node worker ``JOBPULSE_NODE`` (which the node
wrapper ``jobpulse run`` sets), else ``node-<node rank>``, the node rank read from the first of torchrun's
``GROUP_RANK``, ``NODE_RANK`` (Lightning, Kubeflow), torchrun's ``PET_NODE_RANK``, Open MPI's
``OMPI_COMM_WORLD_NODE_RANK`` and SLURM's ``SLURM_NODEID`` that is set, else ``node-<host name>``. A process
that no launcher started is a lone ``process`` of no node, unless it runs under ``jobpulse run``: then it is
rank 0 of that node.
"""

from __future__ import annotations

import os
import re
import socket
import sys
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

NODE_RANKS = ("GROUP_RANK", "NODE_RANK", "PET_NODE_RANK", "OMPI_COMM_WORLD_NODE_RANK", "SLURM_NODEID")

_ID_BAD = re.compile(r"[^A-Za-z0-9-]+")


@dataclass(frozen=True)
class Placement:
    """Rank of this process as its launcher reported it (0 / 0 / 1 when started alone)."""

    rank: int
    local_rank: int
    world_size: int
    launcher: str  # "" when no launcher variable was found
    host: str
    node: str = ""  # the node worker this rank runs on; "" for a lone process

    @property
    def worker(self) -> str:
        return f"worker-{self.rank}"

    @property
    def kind(self) -> str:
        """``rank`` for a process of a launch (or under ``jobpulse run``), else ``process``."""
        return "rank" if self.node else "process"

    def worker_fields(self) -> dict[str, object]:
        """Where this worker sits, as the worker registration sends it (``PUT .../workers/{worker}``)."""
        rank = self.kind == "rank"
        return {
            "host": self.host,
            "kind": self.kind,
            "node": self.node,
            "rank": self.rank if rank else None,
            "local_rank": self.local_rank if rank else None,
        }


def _int(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        return None
    return value if value >= 0 else None


def node_rank(env: Mapping[str, str] | None = None) -> int | None:
    """The node's rank in the launch, from the first variable of ``NODE_RANKS`` that is set."""
    env = os.environ if env is None else env
    for name in NODE_RANKS:
        value = _int(env, name)
        if value is not None:
            return value
    return None


def node_name(env: Mapping[str, str] | None = None, fallback_rank: int | None = None) -> str:
    """The node worker of this machine: ``JOBPULSE_NODE``, else ``node-<rank>`` (``node_rank``, else
    ``fallback_rank``), else ``node-<host name>``."""
    env = os.environ if env is None else env
    if env.get("JOBPULSE_NODE"):
        return check_worker(env["JOBPULSE_NODE"], "JOBPULSE_NODE")
    rank = node_rank(env)
    rank = fallback_rank if rank is None else rank
    if rank is not None:
        return f"node-{rank}"
    return f"node-{sanitize_id(socket.gethostname(), 123)}"


def detect_placement(env: Mapping[str, str] | None = None) -> Placement:
    """Read rank, local rank and world size from the first launcher that set a rank, and the node it runs on."""
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
            node=node_name(env),
        )
    joined = _process_group()
    if joined is not None:
        rank, size = joined
        local = _int(env, "LOCAL_RANK")
        return Placement(rank, rank if local is None else local, size, "torch.distributed", host, node_name(env))
    wrapped = node_name(env) if env.get("JOBPULSE_NODE") else ""
    return Placement(rank=0, local_rank=0, world_size=1, launcher="", host=host, node=wrapped)


def _process_group() -> tuple[int, int] | None:
    """Rank and size of the ``torch.distributed`` process group this process joined; None where it joined none
    (torch is never imported here: a process that uses it has imported it)."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return None
        return dist.get_rank(), dist.get_world_size()
    except Exception:  # a torch build or state we do not know: no rank from it
        return None


def env_float(name: str, default: float) -> float:
    """A number from the environment variable ``name``; ``default`` where it is unset or no number."""
    try:
        return float(os.environ[name])
    except (KeyError, ValueError):
        return default


def env_flag(name: str) -> bool:
    """An on/off environment setting that is on unless set to 0, false or no."""
    return os.environ.get(name, "1").strip().lower() not in ("0", "false", "no")


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
