"""Insights benchmark: one evaluation cycle of the detectors over many running jobs.

    .venv/bin/python bench/bench_insights.py                          # 1,000 jobs x 8 workers x 8 GPUs, embedded
    .venv/bin/python bench/bench_insights.py --transport clickhouse   # the same over HTTP (the ClickHouse stand-in)
    .venv/bin/python bench/bench_insights.py --jobs 100 --minutes 20  # smaller

The data is written straight into the store (inserts of whole columns, not the ingest API): per job, ``--workers``
workers of ``--gpus`` GPUs, each GPU's ``gpu_util`` and ``gpu_mem_util`` and each worker's ``cpu_util`` and
``mem_util`` sampled every ``--every`` seconds over the last ``--minutes`` minutes, a ``loss`` scalar per worker
every 10 s, and a log line per worker every 30 s. One job in twenty has an idle GPU and one in fifty a straggling
worker, so the first cycle opens findings (and claims them) as a real one would. The figures: the first cycle (which
opens those findings), then the steady cycles that follow (the usual case: findings go on, nothing opens), each
timed whole: the queries, the detectors and the writes of findings.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pyarrow as pa
from machine import describe

from jobpulse.insights.evaluate import Evaluator
from jobpulse.store import Store
from jobpulse.store.columns import columns_to_arrow
from jobpulse.store.engine import EmbeddedEngine, HttpEngine

MINUTE = 60_000
PROJECT = "bench"


def job_name(i: int) -> str:
    return f"bench-{i:05d}"


def register(store: Store, jobs: int, workers: int, start_ms: int) -> None:
    """The jobs and their workers, a hundred jobs at a time (the ingest path registers a request's jobs so)."""
    for first in range(0, jobs, 100):
        names = {job_name(i): PROJECT for i in range(first, min(jobs, first + 100))}
        store.jobs.ensure(names, dict.fromkeys(names, start_ms))
        pairs = {(job, f"worker-{w}") for job in names for w in range(workers)}
        store.jobs.ensure_workers(pairs, dict.fromkeys(names, start_ms))


def system_rows(i: int, args: argparse.Namespace, start_ms: int) -> pa.Table:
    """The system samples of job ``i``: GPUs at ~90% (one job in 20 has GPU 3 of worker-1 idle, one in 50 has
    worker-2's GPUs at half the others')."""
    ts = np.arange(start_ms, start_ms + args.minutes * MINUTE, args.every * 1000, dtype=np.int64)
    rng = np.random.default_rng(i)
    parts = []
    for w in range(args.workers):
        for metric, devices in (("gpu_util", args.gpus), ("gpu_mem_util", args.gpus), ("cpu_util", 0), ("mem_util", 0)):
            for d in range(max(devices, 1)):
                level = 90.0 if metric == "gpu_util" else 55.0
                if metric == "gpu_util" and i % 20 == 0 and (w, d) == (1, 3):
                    level = 0.0
                if metric == "gpu_util" and i % 50 == 1 and w == 2:
                    level = 45.0
                values = np.clip(level + rng.normal(0, 2, len(ts)), 0, 100)
                device = str(d) if devices else ""
                parts.append((f"worker-{w}", metric, device, ts, values))
    n = sum(len(p[3]) for p in parts)
    return columns_to_arrow(
        "system",
        {
            "job": job_name(i),
            "worker": np.repeat([p[0] for p in parts], [len(p[3]) for p in parts]),
            "metric": np.repeat([p[1] for p in parts], [len(p[3]) for p in parts]),
            "device": np.repeat([p[2] for p in parts], [len(p[3]) for p in parts]),
            "ts": np.concatenate([p[3] for p in parts]),
            "value": np.concatenate([p[4] for p in parts]),
        },
        n,
    )


def scalar_rows(i: int, args: argparse.Namespace, start_ms: int) -> pa.Table:
    ts = np.arange(start_ms, start_ms + args.minutes * MINUTE, 10_000, dtype=np.int64)
    per_worker = len(ts)
    workers = np.repeat([f"worker-{w}" for w in range(args.workers)], per_worker)
    iters = np.tile(np.arange(per_worker, dtype=np.int64) * 20, args.workers)
    n = per_worker * args.workers
    return columns_to_arrow(
        "scalars",
        {
            "job": job_name(i),
            "metric": "loss",
            "variant": workers,  # one series per rank, whichever way the scalar key treats workers
            "iter": iters,
            "ts": np.tile(ts, args.workers),
            "value": 2.0 / (1 + iters / 1000.0),
            "worker": workers,
            "model_event": np.zeros(n, dtype=np.uint8),
        },
        n,
    )


def log_rows(i: int, args: argparse.Namespace, start_ms: int) -> pa.Table:
    ts = np.arange(start_ms, start_ms + args.minutes * MINUTE, 30_000, dtype=np.int64)
    n = len(ts) * args.workers
    return columns_to_arrow(
        "logs",
        {
            "job": job_name(i),
            "ts": np.tile(ts, args.workers),
            "worker": np.repeat([f"worker-{w}" for w in range(args.workers)], len(ts)),
            "seq": np.arange(n, dtype=np.uint64),
            "level": "info",
            "msg": "step done",
        },
        n,
    )


def load(store: Store, args: argparse.Namespace, start_ms: int) -> dict[str, int]:
    """Insert the data of every job, a batch of jobs per insert; answers the rows per table."""
    db, rows = store.database, {"system": 0, "scalars": 0, "logs": 0}
    batch = max(1, 200_000 // max(1, args.workers * (args.gpus * 2 + 2) * args.minutes * 60 // args.every))
    for first in range(0, args.jobs, batch):
        chunk = range(first, min(args.jobs, first + batch))
        for table, make in (("system", system_rows), ("scalars", scalar_rows), ("logs", log_rows)):
            data = pa.concat_tables([make(i, args, start_ms) for i in chunk])
            store.engine.insert(f"{db}.{table}", data)
            rows[table] += data.num_rows
    store.engine.insert(
        f"{db}.scalars_latest",
        pa.table(
            {
                "job": [job_name(i) for i in range(args.jobs)],
                "metric": ["loss"] * args.jobs,
                "variant": ["worker-0"] * args.jobs,
                "first_ts": pa.array([start_ms] * args.jobs, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
            }
        ),
    )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--minutes", type=int, default=30, help="minutes of history per job (default 30)")
    parser.add_argument("--every", type=int, default=10, help="seconds between system samples (default 10)")
    parser.add_argument("--cycles", type=int, default=3, help="steady cycles timed after the first (default 3)")
    parser.add_argument("--transport", choices=("embedded", "clickhouse"), default="embedded")
    args = parser.parse_args()

    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="jobpulse-bench-insights-")))
        if args.transport == "embedded":
            engine = EmbeddedEngine(str(tmp / "clickhouse"))
            transport = "embedded chdb, in-process"
        else:
            from jobpulse.testing_clickhouse import running_standin

            engine = HttpEngine(stack.enter_context(running_standin(tmp / "standin")))
            transport = "HTTP (clickhouse-connect) to the ClickHouse stand-in (chdb behind ClickHouse's HTTP interface)"
        stack.callback(engine.close)
        store = Store(engine, "bench_insights", sees_every_write=False)
        now = int(time.time() * 1000)
        now -= now % MINUTE
        start = now - args.minutes * MINUTE
        began = time.perf_counter()
        register(store, args.jobs, args.workers, start)
        rows = load(store, args, start)
        loaded_s = time.perf_counter() - began

        evaluator = Evaluator(store)
        began = time.perf_counter()
        first = evaluator.running(now - 1000)
        first_s = time.perf_counter() - began
        steady = []
        for k in range(args.cycles):
            began = time.perf_counter()
            outcome = evaluator.running(now - 1000 + k)
            steady.append(time.perf_counter() - began)

    devices = args.jobs * args.workers * args.gpus
    print(f"machine: {describe()}")
    print(f"transport: {transport}")
    print(
        f"data: {args.jobs} running jobs x {args.workers} workers x {args.gpus} GPUs ({devices} GPUs), "
        f"{args.minutes} min of history; rows: {rows['system']:,} system samples (every {args.every} s), "
        f"{rows['scalars']:,} scalar points, {rows['logs']:,} log lines; loaded in {loaded_s:.1f} s"
    )
    print(f"first cycle: {first_s:.2f} s ({len(first.opened)} findings opened, {first.written} written)")
    print(
        f"steady cycle: median {statistics.median(steady):.2f} s, max {max(steady):.2f} s over {len(steady)} "
        f"({len(outcome.opened)} opened, {outcome.written} findings updated in the last); "
        f"{100 * statistics.median(steady) / 60:.1f}% of a 60 s interval"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
