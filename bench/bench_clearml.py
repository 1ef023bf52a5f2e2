"""ClearML compatibility: ``events.add_batch`` throughput and ``scalar_metrics_iter_histogram`` latency.

1. add_batch: --events scalar events (the SDK's shape: one JSON object a line, 10 variants of 10 metrics),
   sent as JSON lines in requests of --batch events by --senders threads over kept-alive connections; the
   figure is events stored per second of wall time, from the first request sent to the last answer.
2. A task gets --points points (one metric, one variant, iterations 0..points-1) through the native columnar
   ingest, then ``scalar_metrics_iter_histogram`` with samples=--samples is timed --repeats times after two
   warm-up calls (median and 90th percentile, from the client), and its answer is checked.

    .venv/bin/python bench/bench_clearml.py                        # 1,000,000 events; a 10,000,000-point task
    .venv/bin/python bench/bench_clearml.py --events 200000 --points 1000000   # quicker
    .venv/bin/python bench/bench_clearml.py --url http://host:port --api-key KEY  # an existing server
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from machine import describe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from common import Http  # noqa: E402 - the loopback client shared with the comparative benchmark

PROJECT = "bench-clearml"
COLUMNAR_CHUNK = 1_000_000


def clearml(http: Http, endpoint: str, body: Any = None, raw: bytes | None = None) -> dict[str, Any]:
    """Call a ClearML endpoint (JSON, or JSON lines in ``raw``) and answer its ``data``."""
    kind = "application/json-lines" if raw is not None else "application/json"
    payload = raw if raw is not None else orjson.dumps(body)
    status, data = http.request("POST", f"/v2.23/{endpoint}", payload, {"Content-Type": kind})
    doc = orjson.loads(data)
    if status != 200:
        raise RuntimeError(f"{endpoint} failed: {doc['meta']}")
    return doc["data"]


def new_task(http: Http, name: str) -> str:
    found = clearml(http, "projects.get_all", {"name": f"^{PROJECT}$"})["projects"]
    pid = found[0]["id"] if found else clearml(http, "projects.create", {"name": PROJECT})["id"]
    task = clearml(http, "tasks.create", {"name": name, "project": pid, "type": "training"})["id"]
    clearml(http, "tasks.started", {"task": task})
    return task


def add_batch_bodies(task: str, events: int, batch: int) -> list[bytes]:
    now = int(time.time() * 1000) - 86_400_000
    bodies = []
    for start in range(0, events, batch):
        lines = []
        for n in range(start, min(events, start + batch)):
            it, k = divmod(n, 100)
            lines.append(
                orjson.dumps(
                    {
                        "timestamp": now + it,
                        "type": "training_stats_scalar",
                        "task": task,
                        "iter": it,
                        "metric": f"metric_{k // 10}",
                        "variant": f"variant_{k % 10}",
                        "value": (n % 997) / 997,
                        "allow_locked": False,
                        "model_event": False,
                        "method": "get",
                    }
                )
            )
        bodies.append(b"\n".join(lines))
    return bodies


def bench_add_batch(http: Http, events: int, batch: int, senders: int) -> dict[str, Any]:
    task = new_task(http, "add_batch throughput")
    bodies = add_batch_bodies(task, events, batch)
    size = sum(len(b) for b in bodies)
    started = time.perf_counter()
    with ThreadPoolExecutor(senders) as pool:
        added = sum(pool.map(lambda body: clearml(http, "events.add_batch", raw=body)["added"], bodies))
    elapsed = time.perf_counter() - started
    if added != events:
        raise RuntimeError(f"add_batch stored {added} of {events} events")
    stored = clearml(
        http,
        "events.scalar_metrics_iter_raw",
        {"task": task, "metric": {"metric": "metric_0"}, "batch_size": 1, "count_total": True},
    )["total"]
    if stored != events // 10:
        raise RuntimeError(f"metric_0 has {stored} points, expected {events // 10}")
    return {
        "events": events,
        "batch": batch,
        "senders": senders,
        "requests": len(bodies),
        "bytes": size,
        "seconds": elapsed,
        "events_per_s": events / elapsed,
    }


def ingest_points(http: Http, task: str, points: int) -> float:
    now = int(time.time() * 1000) - 30 * 86_400_000
    started = time.perf_counter()
    for start in range(0, points, COLUMNAR_CHUNK):
        iters = np.arange(start, min(points, start + COLUMNAR_CHUNK), dtype=np.int64)
        body = {
            "job": task,
            "series": [
                {
                    "kind": "scalar",
                    "metric": "loss",
                    "variant": "train",
                    "iter": iters,
                    "ts": now + iters,
                    "value": iters.astype(np.float64),
                }
            ],
        }
        status, data = http.request(
            "POST",
            "/jp/v1/ingest",
            orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY),
            {"Content-Type": "application/json"},
        )
        if status != 200:
            raise RuntimeError(f"ingest failed: {data[:300]!r}")
    return time.perf_counter() - started


def bench_histogram(http: Http, points: int, samples: int, repeats: int) -> dict[str, Any]:
    task = new_task(http, f"{points} points")
    ingest_s = ingest_points(http, task, points)
    body = {"task": task, "samples": samples}
    timings = []
    for i in range(repeats + 2):
        started = time.perf_counter()
        data = clearml(http, "events.scalar_metrics_iter_histogram", body)
        if i >= 2:
            timings.append(time.perf_counter() - started)
    series = data["loss"]["train"]
    width = series["x"][1] - series["x"][0]
    if not samples // 2 <= len(series["x"]) <= samples or series["x"][-1] + width < points:
        raise RuntimeError(f"histogram has {len(series['x'])} points of width {width} for {points} iterations")
    if abs(series["y"][0] - (width - 1) / 2) > 1e-6:
        raise RuntimeError(f"first bucket mean is {series['y'][0]}, expected {(width - 1) / 2}")
    timings.sort()
    return {
        "points": points,
        "samples": samples,
        "returned": len(series["x"]),
        "ingest_s": ingest_s,
        "median_ms": statistics.median(timings) * 1000,
        "p90_ms": timings[int(0.9 * (len(timings) - 1))] * 1000,
        "repeats": repeats,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="an existing server (default: start one)")
    parser.add_argument("--api-key", help="an API key that may write (with --url)")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--points", type=int, default=10_000_000)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    with ExitStack() as stack:
        if args.url:
            url, key = args.url, args.api_key or ""
        else:
            from jobpulse.testing import running_server

            server = stack.enter_context(running_server())
            url, key = server.url, server.api_key
        http = Http(url, {"Authorization": f"Bearer {key}"}, timeout=600)
        print(f"machine: {describe()}")
        print(f"server:  {url}")
        added = bench_add_batch(http, args.events, args.batch, args.senders)
        print(
            f"events.add_batch: {added['events']:,} scalar events in {added['requests']} requests of "
            f"{added['batch']:,} ({added['bytes'] / 1e6:.0f} MB JSON lines), {added['senders']} senders: "
            f"{added['seconds']:.1f} s, {added['events_per_s']:,.0f} events/s"
        )
        hist = bench_histogram(http, args.points, args.samples, args.repeats)
        print(f"task of {hist['points']:,} points ingested (native columnar) in {hist['ingest_s']:.1f} s")
        print(
            f"events.scalar_metrics_iter_histogram samples={hist['samples']} over {hist['points']:,} points "
            f"({hist['returned']} returned): median {hist['median_ms']:.0f} ms, p90 {hist['p90_ms']:.0f} ms "
            f"over {hist['repeats']} calls"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
