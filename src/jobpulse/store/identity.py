"""The names and places the whole server checks the same way: project, job and worker ids, a worker's place in a
distributed job, and the times senders give."""

from __future__ import annotations

import re
import time
from typing import Any

from ..errors import BadRequest

PROJECT_ID = re.compile(r"^[A-Za-z0-9-]{1,64}$")
JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
WORKER_ID = re.compile(r"^[A-Za-z0-9._:@/-]{1,128}$")


def check_project(project: Any, field_name: str = "project") -> str:
    if not isinstance(project, str) or not PROJECT_ID.match(project):
        raise BadRequest(f"'{field_name}' must be 1-64 letters, digits or '-', got {project!r}", field=field_name)
    return project


def check_job(job: Any, field_name: str = "job") -> str:
    if not isinstance(job, str) or not JOB_ID.match(job):
        raise BadRequest(
            f"'{field_name}' must be 1-128 letters, digits or '._:-' starting with a letter or digit, got {job!r}",
            field=field_name,
        )
    return job


def check_worker(worker: Any, field_name: str = "worker") -> str:
    if not isinstance(worker, str) or not WORKER_ID.match(worker):
        raise BadRequest(
            f"'{field_name}' must be 1-128 of letters, digits or '._:@/-', got {worker!r}", field=field_name
        )
    return worker


WORKER_KINDS = ("node", "rank", "process")  # the node wrapper, a process of a launch, a lone process
RANK_MAX = 2**31 - 1


def check_placement(changes: dict[str, Any]) -> dict[str, Any]:
    """Check the placement fields of a worker change (``kind``, ``node``, ``rank``, ``local_rank``) where given."""
    if "kind" in changes and changes["kind"] not in WORKER_KINDS:
        raise BadRequest(f"'kind' must be one of {', '.join(WORKER_KINDS)}, got {changes['kind']!r}", field="kind")
    if changes.get("node"):
        check_worker(changes["node"], "node")
    for name in ("rank", "local_rank"):
        value = changes.get(name)
        if value is not None and not 0 <= value <= RANK_MAX:
            raise BadRequest(f"'{name}' must be between 0 and {RANK_MAX}, got {value!r}", field=name)
    return changes


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def check_at(at: Any, field_name: str = "at") -> int:
    """When a sender says a registration or status change happened: epoch milliseconds, not negative."""
    if not isinstance(at, int) or isinstance(at, bool) or at < 0:
        raise BadRequest(f"'{field_name}' must be epoch milliseconds (an integer >= 0), got {at!r}", field=field_name)
    return at
