"""Bytes on disk per stored system sample, and the capacity model of docs/deploy.md built on it.

    .venv/bin/python bench/bench_storage_size.py [--workers 8] [--seconds 3600] [--gpus 10000]

Ingests ``workers`` x 8 GPUs x 10 metrics, one sample a second for ``seconds`` seconds (values shaped as NVML
reports them: integer percentages, clocks and temperatures, power in milliwatts, memory in bytes, rates from
counter deltas), into the embedded engine in a temporary directory, through the schema every store has; then
``OPTIMIZE ... FINAL`` and reads ``bytes_on_disk`` of the active parts of ``system`` (raw samples) and of its
per-minute and hourly rollups from ``system.parts``.

The capacity model takes that figure and the system-metric ingest rate measured by the benchmark
(``bench/RESULTS.md``, workload 4): ``gpus`` GPUs with 10 metrics each and 10 host metrics per node of 8 GPUs,
sampled every second.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from jobpulse.store import Store
from jobpulse.store.engine import EmbeddedEngine

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_800_000_000_000
GPUS_PER_NODE = 8
METRICS_PER_GPU = 10
HOST_METRICS = 10
DAY_S = 86_400
HEADROOM = 0.5  # plan each shard for half the ingest rate measured on one node


def walk(rng: np.random.Generator, n: int, low: float, high: float, step: float) -> np.ndarray:
    """A bounded random walk of ``n`` steps: a GPU's readings drift, they do not jump at random."""
    values = np.cumsum(rng.normal(0.0, step, n)) + (low + high) / 2
    return np.clip(values, low, high)


def gpu_series(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """One GPU's 10 metrics over ``n`` seconds, at the resolution NVML reports them."""
    util = np.round(walk(rng, n, 0, 100, 3))
    mem = np.round(walk(rng, n, 1e9, 80e9, 2e7) / 1_048_576) * 1_048_576
    return {
        "gpu_util": util,
        "gpu_mem_bytes": mem,
        "gpu_mem_util": mem / 80e9 * 100,
        "gpu_power_w": np.round(walk(rng, n, 80_000, 700_000, 5_000)) / 1000,
        "gpu_temp_c": np.round(walk(rng, n, 30, 90, 0.5)),
        "gpu_sm_clock_mhz": np.round(walk(rng, n, 1_000, 1_980, 15) / 15) * 15,
        "gpu_mem_copy_util": np.round(walk(rng, n, 0, 100, 2)),
        "pcie_rx_Bps": np.abs(walk(rng, n, 0, 2e10, 1e8)),
        "pcie_tx_Bps": np.abs(walk(rng, n, 0, 2e10, 1e8)),
        "xid_errors": np.zeros(n),
    }


def samples(workers: int, seconds: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    ts = T0 + np.arange(seconds, dtype=np.int64) * 1000
    parts: dict[str, list] = {"worker": [], "metric": [], "device": [], "ts": [], "value": []}
    for worker in range(workers):
        for device in range(GPUS_PER_NODE):
            for metric, values in gpu_series(rng, seconds).items():
                parts["worker"].append(np.full(seconds, f"worker-{worker}", dtype=object))
                parts["metric"].append(np.full(seconds, metric, dtype=object))
                parts["device"].append(np.full(seconds, str(device), dtype=object))
                parts["ts"].append(ts)
                parts["value"].append(values.astype(np.float64))
    columns = {name: np.concatenate(chunks) for name, chunks in parts.items()}
    n = len(columns["ts"])
    return pa.table(
        {
            "job": pa.array(["storage-size"] * n),
            "worker": pa.array(columns["worker"], pa.string()),
            "metric": pa.array(columns["metric"], pa.string()),
            "device": pa.array(columns["device"], pa.string()),
            "ts": pa.array(columns["ts"], pa.int64()).cast(pa.timestamp("ms")),
            "value": pa.array(columns["value"], pa.float64()),
        }
    )


def bytes_on_disk(engine: EmbeddedEngine, db: str) -> dict[str, tuple[int, int]]:
    """(bytes on disk, rows) of the active parts of each system table, after merging them."""
    sizes = {}
    for table in ("system", "system_1m", "system_1h"):
        engine.command(f"OPTIMIZE TABLE {db}.{table} FINAL")
        row = engine.query(
            "SELECT sum(bytes_on_disk) AS bytes, sum(rows) AS rows FROM system.parts "
            "WHERE database = {db:String} AND table = {table:String} AND active",
            {"db": db, "table": table},
        ).to_pylist()[0]
        sizes[table] = (int(row["bytes"]), int(row["rows"]))
    return sizes


def measured_ingest_rate() -> tuple[int, str]:
    """The system-metric ingest rate of bench/RESULTS.md (workload 4), and the line it comes from."""
    text = (ROOT / "bench" / "RESULTS.md").read_text()
    found = re.search(r"^\| 4\. system metrics ingest[^|]*\| samples/s \| ([\d,]+)", text, re.MULTILINE)
    if not found:
        raise SystemExit("bench/RESULTS.md has no system-metric ingest figure (workload 4): run bench/run.py")
    commit = re.search(r"jobpulse commit: (\w+)", text)
    return int(found.group(1).replace(",", "")), commit.group(1) if commit else "unknown"


def capacity(gpus: int, per_sample: float, rollup_per_sample: float, rate: int) -> dict[str, float]:
    nodes = gpus / GPUS_PER_NODE
    per_second = gpus * METRICS_PER_GPU + nodes * HOST_METRICS
    raw_day = per_second * DAY_S * per_sample
    return {
        "samples_per_s": per_second,
        "samples_per_day": per_second * DAY_S,
        "raw_bytes_per_day": raw_day,
        "rollup_bytes_per_day": per_second * DAY_S * rollup_per_sample,
        "shards_for_ingest": max(1, int(np.ceil(per_second / (rate * HEADROOM)))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=8, help="workers of 8 GPUs each (default 8)")
    parser.add_argument("--seconds", type=int, default=3600, help="seconds of samples (default 3600)")
    parser.add_argument("--gpus", type=int, default=10_000, help="GPUs of the capacity model (default 10000)")
    args = parser.parse_args()
    table = samples(args.workers, args.seconds)
    with tempfile.TemporaryDirectory(prefix="jobpulse-storage-") as tmp:
        engine = EmbeddedEngine(str(Path(tmp) / "clickhouse"))
        store = Store(engine, "storage_size")
        started = time.perf_counter()
        engine.insert("storage_size.system", table)
        took = time.perf_counter() - started
        sizes = bytes_on_disk(engine, "storage_size")
        store.close()
    n = table.num_rows
    raw, rows = sizes["system"]
    assert rows == n, (rows, n)
    rollups = sizes["system_1m"][0] + sizes["system_1h"][0]
    print(
        f"samples: {n:,} ({args.workers} workers x {GPUS_PER_NODE} GPUs x {METRICS_PER_GPU} metrics x {args.seconds} s)"
    )
    print(f"insert into the embedded engine: {took:.2f} s ({n / took:,.0f} samples/s, one insert, views included)")
    for name, (size, count) in sizes.items():
        print(f"{name}: {size:,} bytes on disk, {count:,} rows, {size / n:.3f} bytes per raw sample")
    rate, commit = measured_ingest_rate()
    model = capacity(args.gpus, raw / n, rollups / n, rate)
    print(
        f"measured system-metric ingest (bench/RESULTS.md, workload 4, commit {commit}): {rate:,} samples/s per node "
        "(HTTP ingest into one server on the embedded engine, server and engine on one machine)"
    )
    print(f"capacity for {args.gpus:,} GPUs sampled every second:")
    print(f"  samples/s: {model['samples_per_s']:,.0f}   samples/day: {model['samples_per_day']:,.0f}")
    print(f"  raw samples: {model['raw_bytes_per_day'] / 2**30:,.1f} GiB/day per replica")
    print(f"  per-minute and hourly rollups: {model['rollup_bytes_per_day'] / 2**30:,.2f} GiB/day per replica")
    print(f"  shards for ingest at {HEADROOM:.0%} of the measured rate: {model['shards_for_ingest']}")


if __name__ == "__main__":
    main()
