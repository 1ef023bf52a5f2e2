"""Jobs for the vendor API tests, sent to a real server through the public ingest API.

Samples are every 10 s from T0 (the minute 20 minutes before the session started); every sample's value is
known here, so each test computes what the vendor API must answer from the samples themselves.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

MINUTE = 60_000
NOW = int(time.time() * 1000)
T0 = NOW - NOW % MINUTE - 20 * MINUTE
PROJECT = "9f3c2a7be1d44c6f8a0b5d2e7c1f4a36"  # a Huawei-style 32-hex project id
MA_JOB = "2cd88daa-31a4-40a8-a58f-d186b0e93e4f"  # the ModelArts documents' example job
DLC_JOB = "dlc-20210126170216-a1b2c3d"  # shaped like the PAI document's example job
INSTANCE = {
    "id": "H100x2",
    "name": "2x H100 80GB",
    "memory_limit_mib": 262_144,
    "millicpu_limit": 32_000,
    "gpu_count": 2,
    "gpu_type": "H100",
    "gpu_memory_limit_mib": 81_920,
}
GIB = 1 << 30
PREVIEW_LIMIT = 5 * 1024 * 1024

Sample = tuple[str, str, str, str, int, float]  # job, worker, metric, device, ts, value


def _minute_series(job: str, worker: str, metric: str, device: str, minutes: Iterable[int], value: Any) -> list[Sample]:
    """Six samples a minute; ``value(minute, k)`` for the k-th sample of the minute."""
    return [
        (job, worker, metric, device, T0 + m * MINUTE + k * 10_000, float(value(m, k)))
        for m in minutes
        for k in range(6)
    ]


def _samples() -> list[Sample]:
    out: list[Sample] = []
    # ModelArts job: worker-0 has no accelerator and starts two minutes late, with a silent minute 7;
    # worker-1 has two GPUs from minute 0 to 14.
    cpu_minutes = [m for m in range(2, 15) if m != 7]
    out += _minute_series(MA_JOB, "worker-0", "cpu_util", "", cpu_minutes, lambda m, k: 10 + m + k)
    out += _minute_series(MA_JOB, "worker-0", "mem_util", "", cpu_minutes, lambda m, k: 0.5 * m + 0.1 * k)
    out += _minute_series(MA_JOB, "worker-1", "cpu_util", "", range(15), lambda m, k: 20 + m + k)
    out += _minute_series(MA_JOB, "worker-1", "mem_util", "", range(15), lambda m, k: 30 + k / 3)
    for device, base in (("0", 50), ("1", 70)):
        out += _minute_series(MA_JOB, "worker-1", "gpu_util", device, range(15), lambda m, k, b=base: b + m + k)
        out += _minute_series(MA_JOB, "worker-1", "gpu_mem_util", device, range(15), lambda m, k, b=base: b - 10 + k)
    # PAI / Baseten job: two GPU workers and a CPU-only one; worker-1 is the leader and has a cache.
    for w, worker in enumerate(("worker-0", "worker-1", "worker-2")):
        host = {
            "cpu_util": lambda m, k, w=w: 5 * w + m + k / 10,
            "mem_util": lambda m, k, w=w: 40 + w + k,
            "cpu_cores": lambda m, k, w=w: 2 + w + k / 4,
            "mem_bytes": lambda m, k, w=w: (8 + w + m) * GIB,
            "net_rx_Bps": lambda m, k, w=w: 1e6 * (w + 1) + 1000 * k,
            "net_tx_Bps": lambda m, k: 5e5 + k,
            "disk_read_Bps": lambda m, k: 2e7 + m,
            "disk_write_Bps": lambda m, k: 3e6 - m,
            "ephemeral_bytes": lambda m, k, w=w: (10 + w) * GIB + m * 1e6,
            "ephemeral_util": lambda m, k, w=w: 0.02 * (w + 1) + m / 1e4,
        }
        for metric, value in host.items():
            out += _minute_series(DLC_JOB, worker, metric, "", range(15), value)
        if worker == "worker-2":
            continue
        for device in ("0", "1"):
            d = int(device)
            out += _minute_series(
                DLC_JOB, worker, "gpu_util", device, range(15), lambda m, k, w=w, d=d: 60 + 10 * w + 5 * d + k
            )
            out += _minute_series(
                DLC_JOB, worker, "gpu_mem_util", device, range(15), lambda m, k, w=w, d=d: 70 + w + d + m / 10
            )
            out += _minute_series(
                DLC_JOB, worker, "gpu_mem_bytes", device, range(15), lambda m, k, w=w, d=d: (50 + w + d) * GIB + k * 1e6
            )
    out += _minute_series(DLC_JOB, "worker-1", "cache_bytes", "", range(15), lambda m, k: 100 * GIB + m * 1e7)
    out += _minute_series(DLC_JOB, "worker-1", "cache_util", "", range(15), lambda m, k: 0.25 + m / 1000)
    return out


def _log_lines() -> dict[str, list[str]]:
    small = [f"[worker-0] step {i} loss={1 / (i + 1):.5f}" for i in range(40)]
    small.insert(20, "")  # an empty line is a line too
    bar = "█" * 20
    big = [
        f"[worker-1] epoch {i // 1000} step {i % 1000}/1000 {bar} loss={1 / (i + 1):.6f} lr=0.0003"
        for i in range(60_000)
    ]
    return {"worker-0": small, "worker-1": big}


class Http:
    """Blocking calls to the real server; answers (status, headers, decoded JSON body)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def call(
        self, method: str, path: str, *, headers: dict[str, str] | None = None, body: bytes | None = None
    ) -> tuple[int, dict[str, str], Any]:
        request = urllib.request.Request(self.url + path, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, dict(response.headers), orjson.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), orjson.loads(exc.read())


@dataclass
class Dataset:
    http: Http
    key: str
    samples: list[Sample]
    logs: dict[str, list[str]]
    jobs: dict[str, dict] = field(default_factory=dict)

    def series(self, job: str, worker: str, metric: str) -> list[tuple[str, int, float]]:
        """(device, ts, value) of every sample of one worker's metric."""
        return [(d, ts, v) for j, w, m, d, ts, v in self.samples if (j, w, m) == (job, worker, metric)]

    def bucket_means(
        self,
        job: str,
        worker: str,
        metric: str,
        start: int,
        step: int,
        device: str | None = None,
        end: int | None = None,
    ) -> dict[int, float]:
        """Start of each bucket of [start, end] with samples -> the mean of its samples, over all devices
        unless one is named."""
        sums: dict[int, list[float]] = defaultdict(list)
        for d, ts, v in self.series(job, worker, metric):
            if (device is None or d == device) and start <= ts and (end is None or ts <= end):
                sums[start + (ts - start) // step * step].append(v)
        return {b: sum(vs) / len(vs) for b, vs in sorted(sums.items())}


def _ingest(http: Http, key: str, job: str, samples: list[Sample], logs: dict[str, list[str]]) -> None:
    by_series: dict[tuple[str, str, str], list[tuple[int, float]]] = defaultdict(list)
    for j, worker, metric, device, ts, value in samples:
        if j == job:
            by_series[(worker, metric, device)].append((ts, value))
    series: list[dict] = [
        {
            "kind": "system",
            "worker": w,
            "metric": m,
            "device": d,
            "ts": [p[0] for p in points],
            "value": [p[1] for p in points],
        }
        for (w, m, d), points in by_series.items()
    ]
    for worker, lines in logs.items():
        n = len(lines)
        series.append(
            {
                "kind": "log",
                "worker": worker,
                "seq": list(range(n)),
                "ts": [T0 + i * (15 * MINUTE) // n for i in range(n)],
                "msg": lines,
            }
        )
    body = orjson.dumps({"project": PROJECT, "job": job, "series": series})
    status, _, answer = http.call(
        "POST",
        "/jp/v1/ingest",
        body=body,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    assert status == 200 and answer["rejected"] == 0, answer


def build(server) -> Dataset:  # noqa: ANN001 - a running ServerProcess
    """Register the jobs and send their samples and logs to ``server`` through its public API."""
    http = Http(server.url)
    auth = {"Authorization": f"Bearer {server.api_key}", "Content-Type": "application/json"}
    samples, logs = _samples(), _log_lines()
    for job, extra in ((MA_JOB, {}), (DLC_JOB, {"leader": "worker-1", "instance_type": INSTANCE})):
        status, _, answer = http.call(
            "POST",
            "/jp/v1/jobs",
            headers=auth,
            body=orjson.dumps(
                {"project": PROJECT, "job": job, "name": f"{job} (compat tests)", "status": "created", **extra}
            ),
        )
        assert status == 201, answer
    _ingest(http, server.api_key, MA_JOB, samples, logs)
    _ingest(http, server.api_key, DLC_JOB, samples, {})
    status, _, answer = http.call(
        "PATCH", f"/jp/v1/jobs/{MA_JOB}", headers=auth, body=orjson.dumps({"status": "completed"})
    )
    assert status == 200, answer
    data = Dataset(http=http, key=server.api_key, samples=samples, logs=logs)
    for job in (MA_JOB, DLC_JOB):
        data.jobs[job] = http.call("GET", f"/jp/v1/jobs/{job}", headers=auth)[2]["job"]
    return data
