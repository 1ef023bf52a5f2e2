"""A job as the store keeps it: its fields, its row in the ``jobs`` table, and the state a write of it starts from."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from typing import Any

import orjson

from .identity import now_ms
from .job_writes import ReadAs

STATUSES = ("created", "running", "completed", "failed", "stopped")
ENDED = frozenset({"completed", "failed", "stopped"})


def change_time(at: int | None) -> int:
    """The time of a change: the sender's ``at`` (a change sent late, from a spool, keeps its own time), never
    later than now (a node's clock ahead of the server's), else now."""
    now = now_ms()
    return now if at is None else min(at, now)


@dataclass
class Job:
    job: str
    project: str
    name: str = ""
    status: str = "created"
    created: int = 0
    started: int | None = None
    ended: int | None = None
    updated: int = 0
    tags: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict)
    instance_type: dict = field(default_factory=dict)
    error_message: str = ""
    leader: str = ""
    locked: bool = False
    # The version this job was read at and its row then (None: it did not exist; config as text, parsed only
    # when written); a write merges what it changed from that row with what others changed meanwhile.
    read_as: ReadAs | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self) if f.name != "read_as"}


JOB_COLUMNS = """job, project, name, status, toUnixTimestamp64Milli(created) AS created,
    toUnixTimestamp64Milli(started) AS started, toUnixTimestamp64Milli(ended) AS ended,
    toUnixTimestamp64Milli(updated) AS updated, tags, config, instance_type, error_message, leader, locked,
    deleted, version"""


def job_from_row(row: dict) -> Job:
    version, deleted = row.pop("version"), row.pop("deleted")
    row.update(config=row["config"] or "{}", instance_type=row["instance_type"] or "{}", locked=bool(row["locked"]))
    job = Job(**{**row, "config": orjson.loads(row["config"]), "instance_type": orjson.loads(row["instance_type"])})
    job.read_as = (version, {**row, "tags": list(row["tags"]), "deleted": deleted})
    return job


def as_read(state: dict[str, Any]) -> dict[str, Any]:
    """A job's state (``Job.to_dict()`` and ``deleted``) in the form ``Job.read_as`` keeps."""
    dumps = orjson.dumps
    return {**state, "config": dumps(state["config"]).decode(), "instance_type": dumps(state["instance_type"]).decode()}


def base_of(read_as: ReadAs | None) -> ReadAs | None:
    """``Job.read_as`` with its config parsed: the state a write's changes are taken from."""
    if read_as is None or read_as[1] is None:
        return read_as
    version, row = read_as
    parsed = {"config": orjson.loads(row["config"]), "instance_type": orjson.loads(row["instance_type"])}
    return version, {**row, **parsed}


def is_deleted(job: Job) -> bool:
    return bool(job.read_as and job.read_as[1] and job.read_as[1]["deleted"])
