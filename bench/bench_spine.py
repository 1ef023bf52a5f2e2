"""Core figures of jobpulse on this machine, per transport: HTTP ingest rates beside the engine's raw insert rate,
query latencies on large jobs, and a restart.

    .venv/bin/python bench/bench_spine.py [--points 10000000] [--lines 10000000] [--jobs 1000]
        [--restart-points 100000000] [--transports embedded,standin]

For each transport (``embedded``: a ``jobpulse server`` on chdb; ``standin``: a ``jobpulse server`` over the
ClickHouse HTTP stand-in, chdb behind ClickHouse's HTTP interface, not a ClickHouse server), one real server process
on loopback. A chart's "first request" follows the ingest of one more point of its series, so it is computed (a
live job's chart after its latest batch), not answered from the server's memory of recent answers; "again" is
the same chart asked for twice in a row. The restart stops the server holding every series above plus one of
``--restart-points`` points and times a new process until ``/readyz`` answers, then its first chart of that series.

Targets: columnar ingest >= 50% of the engine's raw insert rate; the first 1,000-bucket chart over 100,000 and over
10,000,000 points <= 10 ms; latest values of every metric of 1,000 runs <= 20 ms; the last 1,000 log lines
<= 20 ms and a search <= 200 ms at 10,000,000 lines; ready <= 5 s after a restart with 100 M points stored;
server memory at rest < 400 MB.
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
from transports import server_on

from jobpulse.testing import ServerProcess

CHUNK = 200_000
JSON = "application/json"
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


def first_chart(api: Api, job: str, next_iter: int, repeats: int = 7, **params) -> tuple[float, float, float]:
    """Median, min and max in milliseconds of the chart of ``job``'s series, each asked for right after one more
    point of that series was stored (from iteration ``next_iter`` on), so that no answer is remembered."""
    samples = []
    for k in range(repeats + 1):
        api.ingest(json_lines_scalars(job, next_iter + k, 1), "application/x-ndjson")
        start = time.perf_counter()
        api.get(f"/jp/v1/jobs/{job}/scalars/chart", metric="loss", buckets=1000, **params)
        if k:  # the first one warms the connection and the server's code paths
            samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), min(samples), max(samples)


def report(label: str, figures: tuple[float, float, float]) -> None:
    med, lo, hi = figures
    print(f"{label}: {med:.1f} ms (range {lo:.1f}-{hi:.1f})")


def load_series(api: Api, job: str, points: int) -> float:
    """Store ``points`` points of one series of ``job`` in columnar chunks; answers the seconds it took."""
    start = time.perf_counter()
    send_parallel(api, (columnar_scalars(job, o, min(CHUNK, points - o)) for o in range(0, points, CHUNK)), JSON)
    return time.perf_counter() - start


def ingest_rates(api: Api, raw: float) -> None:
    n = 1_000_000
    wall = send_parallel(api, [columnar_scalars("col", o, CHUNK) for o in range(0, n, CHUNK)], JSON)
    print(f"HTTP ingest, columnar: {n / wall:,.0f} points/s ({n / wall / raw:.0%} of the engine's raw rate)")
    n_lines = 200_000
    bodies = [json_lines_scalars("jl", o, 20_000) for o in range(0, n_lines, 20_000)]
    wall = send_parallel(api, bodies, "application/x-ndjson")
    print(f"HTTP ingest, JSON lines: {n_lines / wall:,.0f} points/s")


def charts(api: Api, points: int) -> None:
    for job, n in (("hundred-k", 100_000), ("big", points)):
        print(f"loaded {n:,} points of one series in {load_series(api, job, n):.1f} s")
        report(f"1,000-bucket chart of a {n:,}-point series, first request", first_chart(api, job, n))
        report(
            f"1,000-bucket chart of a {n:,}-point series, again",
            timed(lambda job=job: api.get(f"/jp/v1/jobs/{job}/scalars/chart", metric="loss", buckets=1000)),
        )
    window = {"x_min": points // 2, "x_max": points // 2 + 100_000}
    report("zoomed chart (100,000 of the big series), first request", first_chart(api, "big", points + 10, **window))


def logs(api: Api, lines: int) -> None:
    per_worker = lines // 8
    bodies = (
        columnar_logs("logs", f"worker-{w}", o, min(CHUNK, per_worker - o))
        for w in range(8)
        for o in range(0, per_worker, CHUNK)
    )
    wall = send_parallel(api, bodies, JSON)
    print(f"HTTP ingest, logs: {lines / wall:,.0f} lines/s ({lines:,} lines from 8 workers)")
    report(f"last 1,000 lines of a {lines:,}-line job", timed(lambda: api.get("/jp/v1/jobs/logs/logs", limit=1000)))
    report(
        "last 1,000 lines of one worker",
        timed(lambda: api.get("/jp/v1/jobs/logs/logs", limit=1000, worker="worker-3")),
    )
    report(
        f"search of all {lines:,} lines (rare match)",
        timed(lambda: api.get("/jp/v1/jobs/logs/logs", limit=100, q="illegal memory access"), 5),
    )
    report(
        "search of all lines (every line matches, newest 100)",
        timed(lambda: api.get("/jp/v1/jobs/logs/logs", limit=100, q="lr=3e-4"), 5),
    )


def latest_values(api: Api, jobs: int) -> None:
    series = []
    names = [f"run-{j:04d}" for j in range(jobs)]
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
        api.ingest(orjson.dumps({"project": "bench", "series": series[offset : offset + 500]}), JSON)
    report(
        f"latest values of {jobs:,} jobs x 5 metrics",
        timed(lambda: api.http.post("/jp/v1/scalars/latest", json={"jobs": names}).raise_for_status()),
    )


def restart(server: ServerProcess, points: int) -> None:
    """Store a series of ``points`` points, restart the server, and time it until ready and its first chart."""
    api = Api(server.url, server.api_key)
    print(f"loaded {points:,} points of one more series in {load_series(api, 'restart', points):.1f} s")
    server.stop()
    start = time.perf_counter()
    server.start(timeout=600)
    ready = time.perf_counter() - start
    api = Api(server.url, server.api_key)
    start = time.perf_counter()
    api.get("/jp/v1/jobs/restart/scalars/chart", metric="loss", buckets=1000)
    chart = (time.perf_counter() - start) * 1000
    print(f"restart holding {points:,} more points: ready in {ready:.2f} s, then its first chart in {chart:.1f} ms")


def run_transport(server: ServerProcess, args: argparse.Namespace, raw: float) -> None:
    api = Api(server.url, server.api_key)
    time.sleep(2)
    print(f"server memory at rest: {rss_mb(server.process.pid):.0f} MB RSS")
    ingest_rates(api, raw)
    print(f"server memory after ingest: {rss_mb(server.process.pid):.0f} MB RSS")
    charts(api, args.points)
    logs(api, args.lines)
    latest_values(api, args.jobs)
    time.sleep(2)
    print(f"server memory before the restart: {rss_mb(server.process.pid):.0f} MB RSS")
    restart(server, args.restart_points)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--points", type=int, default=10_000_000, help="points of the long scalar series")
    parser.add_argument("--lines", type=int, default=10_000_000, help="log lines of the long log")
    parser.add_argument("--jobs", type=int, default=1000, help="jobs for the latest-values query")
    parser.add_argument("--restart-points", type=int, default=100_000_000, help="points stored before the restart")
    parser.add_argument("--transports", default="embedded,standin", help="embedded, standin or both")
    parser.add_argument("--raw-only", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.raw_only:
        print(raw_engine_rate(args.raw_only))
        return
    print(f"machine: {describe()}")
    print("client and server on this machine, over loopback HTTP/1.1")
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
    print(f"engine raw insert (Arrow columns into embedded ClickHouse, in-process): {raw:,.0f} rows/s")
    for transport in args.transports.split(","):
        with server_on(transport) as (server, label):
            print(f"\n## {label}")
            run_transport(server, args, raw)


if __name__ == "__main__":
    sys.exit(main())
