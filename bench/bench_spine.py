"""Core figures of jobpulse on this machine: HTTP ingest rates beside the engine's raw insert rate,
and query latencies on large jobs.

    .venv/bin/python bench/bench_spine.py [--points 10000000] [--lines 10000000] [--jobs 1000]

Targets: columnar ingest >= 50% of the engine's raw insert rate; a 1,000-bucket chart of a
10,000,000-point series < 50 ms; the last 1,000 log lines < 50 ms; server memory at rest < 400 MB.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import orjson
import zstandard
from machine import describe

from jobpulse.testing import running_server

CHUNK = 200_000
T0 = int(time.time() * 1000) - 30 * 86_400_000


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed(fn, repeats: int = 7) -> tuple[float, float, float]:
    """Median, min and max in milliseconds of ``repeats`` calls after one warm-up."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), min(samples), max(samples)


class Api:
    def __init__(self, url: str, key: str) -> None:
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=600)

    def ingest(self, body: bytes, content_type: str) -> dict:
        answer = self.http.post(
            "/jp/v1/ingest",
            content=zstandard.ZstdCompressor(level=1).compress(body),
            headers={"Content-Type": content_type, "Content-Encoding": "zstd"},
        )
        answer.raise_for_status()
        return answer.json()

    def get(self, path: str, **params) -> dict:
        answer = self.http.get(path, params=params)
        answer.raise_for_status()
        return answer.json()


def columnar_scalars(job: str, start: int, n: int) -> bytes:
    iters = np.arange(start, start + n)
    return orjson.dumps(
        {
            "project": "bench",
            "job": job,
            "series": [
                {
                    "kind": "scalar",
                    "metric": "loss",
                    "variant": "train",
                    "iter": iters,
                    "ts": T0 + iters * 10,
                    "value": np.sin(iters / 5000.0) + iters * 1e-7,
                }
            ],
        },
        option=orjson.OPT_SERIALIZE_NUMPY,
    )


def json_lines_scalars(job: str, start: int, n: int) -> bytes:
    return b"\n".join(
        orjson.dumps(
            {
                "kind": "scalar",
                "project": "bench",
                "job": job,
                "metric": "loss",
                "variant": "train",
                "iter": i,
                "ts": T0 + i * 10,
                "value": i * 0.5,
            }
        )
        for i in range(start, start + n)
    )


def columnar_logs(job: str, worker: str, start: int, n: int) -> bytes:
    seq = np.arange(start, start + n)
    msgs = [
        f"step {i} loss={i % 997 / 100:.3f} lr=3e-4 tokens/s=123456 worker={worker}" for i in range(start, start + n)
    ]
    for i in range(0, n, 100_003):
        msgs[i] = f"CUDA error: an illegal memory access was encountered at {start + i}"
    return orjson.dumps(
        {
            "project": "bench",
            "job": job,
            "series": [{"kind": "log", "worker": worker, "seq": seq, "ts": T0 + seq, "level": "info", "msg": msgs}],
        },
        option=orjson.OPT_SERIALIZE_NUMPY,
    )


def send_parallel(api: Api, bodies, content_type: str, threads: int = 2) -> float:
    """Send prepared bodies from ``threads`` senders; answers the wall time in seconds."""
    queue = list(bodies)
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if not queue:
                    return
                body = queue.pop()
            api.ingest(body, content_type)

    start = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return time.perf_counter() - start


def raw_engine_rate(n: int) -> float:
    """Rows/s of inserting Arrow columns straight into the embedded engine (no HTTP, no parsing)."""
    from jobpulse.store import open_store
    from jobpulse.store.columns import columns_to_arrow

    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(None, Path(tmp), database="raw")
        iters = np.arange(n)
        table = columns_to_arrow(
            "scalars",
            {
                "job": ["raw"] * n,
                "metric": ["loss"] * n,
                "variant": ["train"] * n,
                "iter": iters,
                "ts": T0 + iters * 10,
                "value": np.sin(iters / 5000.0),
                "worker": [""] * n,
                "model_event": np.zeros(n, np.uint8),
            },
        )
        start = time.perf_counter()
        for offset in range(0, n, CHUNK):
            store.writer.write({"scalars": table.slice(offset, CHUNK)})
        rate = n / (time.perf_counter() - start)
        store.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10_000_000, help="points of the long scalar series")
    parser.add_argument("--lines", type=int, default=10_000_000, help="log lines of the long log")
    parser.add_argument("--jobs", type=int, default=1000, help="jobs for the latest-values query")
    parser.add_argument("--raw-only", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.raw_only:
        print(raw_engine_rate(args.raw_only))
        return
    print(f"machine: {describe()}")
    # The embedded engine is measured in a process of its own: this one stays a plain HTTP client.
    import subprocess

    raw = float(
        subprocess.run(
            [sys.executable, __file__, "--raw-only", str(min(args.points, 2_000_000))],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    print(f"engine raw insert (Arrow columns into embedded ClickHouse): {raw:,.0f} rows/s")
    with running_server() as server:
        api = Api(server.url, server.api_key)
        time.sleep(2)
        print(f"server memory at rest: {rss_mb(server.process.pid):.0f} MB RSS")
        n = 1_000_000
        wall = send_parallel(api, [columnar_scalars("col", o, CHUNK) for o in range(0, n, CHUNK)], "application/json")
        col_rate = n / wall
        print(f"HTTP ingest, columnar: {col_rate:,.0f} points/s ({col_rate / raw:.0%} of the engine's raw rate)")
        n_lines = 200_000
        wall = send_parallel(
            api, [json_lines_scalars("jl", o, 20_000) for o in range(0, n_lines, 20_000)], "application/x-ndjson"
        )
        print(f"HTTP ingest, JSON lines: {n_lines / wall:,.0f} points/s")
        print(f"server memory after ingest: {rss_mb(server.process.pid):.0f} MB RSS")

        start = time.perf_counter()
        send_parallel(
            api, (columnar_scalars("big", o, CHUNK) for o in range(0, args.points, CHUNK)), "application/json"
        )
        print(f"loaded {args.points:,} points of one series in {time.perf_counter() - start:.1f} s")
        med, lo, hi = timed(lambda: api.get("/jp/v1/jobs/big/scalars/chart", metric="loss", buckets=1000))
        print(f"1,000-bucket chart of a {args.points:,}-point series: {med:.1f} ms (range {lo:.1f}-{hi:.1f})")
        med, lo, hi = timed(
            lambda: api.get(
                "/jp/v1/jobs/big/scalars/chart",
                metric="loss",
                buckets=1000,
                x_min=args.points // 2,
                x_max=args.points // 2 + 100_000,
            )
        )
        print(f"zoomed chart (100,000 of them, 1,000 buckets): {med:.1f} ms (range {lo:.1f}-{hi:.1f})")

        start = time.perf_counter()
        per_worker = args.lines // 8
        bodies = (
            columnar_logs("logs", f"worker-{w}", o, min(CHUNK, per_worker - o))
            for w in range(8)
            for o in range(0, per_worker, CHUNK)
        )
        wall = send_parallel(api, bodies, "application/json")
        print(f"HTTP ingest, logs: {args.lines / wall:,.0f} lines/s ({args.lines:,} lines from 8 workers)")
        med, lo, hi = timed(lambda: api.get("/jp/v1/jobs/logs/logs", limit=1000))
        print(f"last 1,000 lines of a {args.lines:,}-line job: {med:.1f} ms (range {lo:.1f}-{hi:.1f})")
        med, lo, hi = timed(lambda: api.get("/jp/v1/jobs/logs/logs", limit=1000, worker="worker-3"))
        print(f"last 1,000 lines of one worker: {med:.1f} ms (range {lo:.1f}-{hi:.1f})")
        med, lo, hi = timed(lambda: api.get("/jp/v1/jobs/logs/logs", limit=100, q="illegal memory access"), 5)
        print(f"search of all {args.lines:,} lines (rare match): {med:.1f} ms (range {lo:.1f}-{hi:.1f})")
        med, lo, hi = timed(lambda: api.get("/jp/v1/jobs/logs/logs", limit=100, q="lr=3e-4"), 5)
        print(f"search of all lines (every line matches, newest 100): {med:.1f} ms (range {lo:.1f}-{hi:.1f})")

        series = []
        names = [f"run-{j:04d}" for j in range(args.jobs)]
        for name in names:
            for metric in ("loss", "acc", "lr", "grad_norm", "tokens"):
                series.append(
                    {
                        "kind": "scalar",
                        "metric": metric,
                        "variant": metric,
                        "iter": list(range(100)),
                        "ts": [T0 + i for i in range(100)],
                        "value": [float(i) for i in range(100)],
                        "job": name,
                    }
                )
        for offset in range(0, len(series), 500):
            api.ingest(orjson.dumps({"project": "bench", "series": series[offset : offset + 500]}), "application/json")
        med, lo, hi = timed(lambda: api.http.post("/jp/v1/scalars/latest", json={"jobs": names}).raise_for_status())
        print(f"latest values of {args.jobs:,} jobs x 5 metrics: {med:.1f} ms (range {lo:.1f}-{hi:.1f})")
        time.sleep(2)
        print(f"server memory at the end: {rss_mb(server.process.pid):.0f} MB RSS")


if __name__ == "__main__":
    sys.exit(main())
