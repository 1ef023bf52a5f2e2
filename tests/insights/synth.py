"""Synthesized jobs for the insight tests: series in the past, sent through the public ingest API as JSON lines.

Time is counted in minutes from ``T0`` (a whole minute in the past); every sample of minute ``m`` lies in
[T0 + m min, T0 + (m + 1) min). A job is evaluated ``at`` a minute, so results do not depend on the clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from helpers import post_lines

T0 = 1_780_000_000_000 - 1_780_000_000_000 % 60_000
MINUTE = 60_000
PROJECT = "insights"

Value = Callable[[float], float]  # minute (fractional) -> value


def at(minute: float) -> int:
    return int(T0 + minute * MINUTE)


def recent(minutes: int) -> int:
    """A minute-0 time ``minutes`` whole minutes before the clock's current minute: for jobs a server evaluating
    on its own (at the wall clock) sees as a test that evaluates them at explicit times does."""
    now = time.time_ns() // 1_000_000
    return now - now % MINUTE - minutes * MINUTE


def constant(value: float) -> Value:
    return lambda _m: value


def piecewise(default: float, *spans: tuple[float, float, float]) -> Value:
    """``default``, except in each (from, to, value) span of minutes."""

    def value(m: float) -> float:
        for start, end, inside in spans:
            if start <= m < end:
                return inside
        return default

    return value


class JobBuilder:
    """Events of one job, collected and then sent in batches."""

    def __init__(self, job: str, project: str = PROJECT, origin: int = T0) -> None:
        self.job = job
        self.project = project
        self.origin = origin  # the time of minute 0
        self.events: list[dict[str, Any]] = []
        self._seq: dict[str, int] = {}

    def system(
        self, worker: str, metric: str, device: str, minutes: tuple[float, float], value: Value, every_s: int = 10
    ) -> JobBuilder:
        for m in _ticks(minutes, every_s):
            self.events.append(
                {
                    "kind": "system",
                    "worker": worker,
                    "metric": metric,
                    "device": device,
                    "ts": self.at(m),
                    "value": value(m),
                }
            )
        return self

    def gpus(
        self, workers: Iterable[str], devices: int, minutes: tuple[float, float], util: Callable[[str, str], Value]
    ) -> JobBuilder:
        """``gpu_util`` of every device of every worker; ``util(worker, device)`` gives each its values."""
        for worker in workers:
            for device in range(devices):
                self.system(worker, "gpu_util", str(device), minutes, util(worker, str(device)))
        return self

    def steps(
        self,
        worker: str,
        minutes: tuple[float, float],
        per_minute: Value,
        *,
        metric: str = "loss",
        value: Value | None = None,
        every_s: int = 10,
    ) -> JobBuilder:
        """Scalars of ``worker`` (variant = the worker, so ranks never share a point): the iteration advances by
        ``per_minute(m)`` per minute; ``value(m)`` is the scalar (default a slowly falling loss)."""
        iteration = 0.0
        for m in _ticks(minutes, every_s):
            iteration += per_minute(m) * every_s / 60
            point = value(m) if value is not None else 2.0 / (1 + m / 10)
            self.events.append(
                {
                    "kind": "scalar",
                    "worker": worker,
                    "metric": metric,
                    "variant": worker,
                    "iter": int(iteration),
                    "ts": self.at(m),
                    "value": point if point == point else "NaN",
                }
            )
        return self

    def logs(self, worker: str, minutes: tuple[float, float], every_s: int = 20) -> JobBuilder:
        for m in _ticks(minutes, every_s):
            seq = self._seq.get(worker, 0)
            self._seq[worker] = seq + 1
            self.events.append(
                {
                    "kind": "log",
                    "worker": worker,
                    "seq": seq,
                    "level": "info",
                    "msg": f"step at {m:.2f}",
                    "ts": self.at(m),
                }
            )
        return self

    def at(self, minute: float) -> int:
        return int(self.origin + minute * MINUTE)

    def send(self, client: Any) -> None:
        """Post every event, the earliest first (the job starts at its first event)."""
        events = sorted(self.events, key=lambda e: e["ts"])
        for start in range(0, len(events), 5000):
            answer = post_lines(client, *events[start : start + 5000], project=self.project, job=self.job)
            assert answer.status_code == 200, answer.text
            assert answer.json()["rejected"] == 0, answer.json()
        self.events = []


def _ticks(minutes: tuple[float, float], every_s: int) -> list[float]:
    start, end = minutes
    count = int(round((end - start) * 60 / every_s))
    return [start + i * every_s / 60 for i in range(count)]


def evaluate(client: Any, job: str, minute: float) -> dict[str, Any]:
    answer = client.post(f"/jp/v1/jobs/{job}/insights/evaluate", params={"at": at(minute)})
    assert answer.status_code == 200, answer.text
    return answer.json()


def kinds(findings: list[dict[str, Any]], kind: str | None = None) -> list[dict[str, Any]]:
    return [f for f in findings if kind is None or f["kind"] == kind]


def healthy(
    job: str,
    minutes: tuple[float, float],
    *,
    workers: int = 2,
    devices: int = 2,
    util: Callable[[str, str], Value] | None = None,
    rate: Callable[[str], Value] | None = None,
    logs: bool = True,
    origin: int = T0,
) -> JobBuilder:
    """A job training well: GPUs at 90%, steady steps and logs on every worker, memory and CPU moderate; ``util``
    and ``rate`` change the GPU utilization of a (worker, device) and the step rate of a worker."""
    builder = JobBuilder(job, origin=origin)
    names = [f"worker-{i}" for i in range(workers)]
    builder.gpus(names, devices, minutes, util or (lambda _w, _d: constant(90.0)))
    for name in names:
        builder.steps(name, minutes, rate(name) if rate else constant(120.0))
        if logs:
            builder.logs(name, minutes)
        builder.system(name, "cpu_util", "", minutes, constant(40.0), every_s=30)
        builder.system(name, "mem_util", "", minutes, constant(50.0), every_s=30)
        for device in range(devices):
            builder.system(name, "gpu_mem_util", str(device), minutes, constant(60.0), every_s=30)
    return builder
