"""What ``events.add_batch`` must know of the tasks it writes to, remembered between requests.

A batch needs each task's project, whether it is published (locked) and whether it is a model. Reading the
jobs for every batch cost a query (5 ms and more) per request; here what was read is kept while the server's
single access check remembers the job as existing and started (``Access.started_job``): every change of a job
through this server (a status change, publishing, a move to another project, deletion) makes the access check
forget it, and over a shared ClickHouse server it trusts what it read only as long as it trusts a key. A job
it does not remember is read again, with the others of the batch, by one query. The x-axis labels a task's
series were given are remembered with it, so that a client sending its labels with every event costs no read.
"""

from __future__ import annotations

from typing import NamedTuple

from ...server.context import Context
from ...store import Job
from . import mapping


class TaskInfo(NamedTuple):
    job: str
    project: str
    locked: bool
    model: bool


class KnownTasks:
    def __init__(self, limit: int = 100_000) -> None:
        self._known: dict[str, TaskInfo] = {}
        self._labels: dict[str, dict[tuple[str, str], str]] = {}
        self._limit = limit

    def get_many(self, ctx: Context, ids: list[str]) -> dict[str, TaskInfo]:
        """The existing jobs among ``ids``, each as a ``TaskInfo``."""
        out: dict[str, TaskInfo] = {}
        missing = []
        for job in ids:
            info = self._known.get(job)
            if info is not None and ctx.access.started_job(job) == info.project:
                out[job] = info
            else:
                missing.append(job)
        if missing:
            if len(self._known) > self._limit:
                self._known.clear()
                self._labels.clear()
            for job_id, job in ctx.store.jobs.get_many(missing).items():
                info = TaskInfo(job_id, job.project, job.locked, mapping.is_model(job))
                self._known[job_id] = out[job_id] = info
                self._labels[job_id] = _labels_of(job)
        return out

    def new_labels(self, labels: dict[tuple[str, str, str], str]) -> dict[tuple[str, str, str], str]:
        """Those of ``labels`` ((job, metric, variant) -> label) that differ from what the tasks hold, as far as
        this server remembers them (a task it does not remember holds none)."""
        return {
            series: label
            for series, label in labels.items()
            if self._labels.get(series[0], {}).get(series[1:]) != label
        }

    def remember_labels(self, job: str, labels: dict[tuple[str, str], str]) -> None:
        """``job`` now holds ``labels`` ((metric, variant) -> label) too."""
        if job in self._known:
            self._labels.setdefault(job, {}).update(labels)


def _labels_of(job: Job) -> dict[tuple[str, str], str]:
    stored = mapping.clearml(job).get("x_axis_labels", {})
    return {(metric, variant): label for metric, variants in stored.items() for variant, label in variants.items()}
