"""What counting requests for /metrics costs a small ingest request: with the request metrics and without.

Two measurements, each with its baseline in the same run:

1. ``middleware``: the request-metrics layer alone, in process. A trivial ASGI app (it marks its route and
   answers 200) is called --calls times directly and --calls times through ``RequestMetrics``, in 5 alternating
   passes; the figure is the mean time per call of the best pass of each, so the difference is what the layer adds
   to every request.
2. ``ingest``: the whole request. Two real ``jobpulse server`` processes on loopback (embedded chdb, fresh data
   directories), one with ``--metrics-access key`` (the default: figures kept) and one with
   ``--metrics-access off`` (no layer, no figures), each get --requests small ingest requests (--events scalar
   points as JSON lines, new iterations each time) one after another over one kept-alive connection. The two
   servers take turns in rounds of 50, so a change in the machine's load touches both alike. The figures are the
   client's wall time per request, p50 and p99, in milliseconds.

    .venv/bin/python bench/bench_metrics_overhead.py
    .venv/bin/python bench/bench_metrics_overhead.py --requests 4000 --calls 200000
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import orjson
from machine import describe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from common import Http  # noqa: E402 - the loopback client shared with the comparative benchmark

from jobpulse.server.metrics import Metrics, RequestMetrics  # noqa: E402
from jobpulse.store.engine import Failures  # noqa: E402
from jobpulse.testing import running_server  # noqa: E402

ROUND = 50
PASSES = 5  # the in-process figures are the best of this many alternating passes: the least disturbed by load


def middleware_cost(calls: int) -> tuple[float, float]:
    """Mean microseconds per call of a trivial ASGI app, bare and through ``RequestMetrics``."""
    route = SimpleNamespace(path="/jp/v1/ingest")

    async def trivial(scope: dict, receive: Any, send: Any) -> None:
        scope["route"] = route
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        return None

    metrics = Metrics(SimpleNamespace(name="embedded", failures=Failures()))
    counted = RequestMetrics(trivial, metrics)

    async def run(app: Any) -> float:
        scope = {"type": "http", "method": "POST", "path": "/jp/v1/ingest"}
        for _ in range(1000):  # warm up
            await app(dict(scope), receive, send)
        started = time.perf_counter()
        for _ in range(calls):
            await app(dict(scope), receive, send)
        return (time.perf_counter() - started) / calls * 1e6

    passes = [(asyncio.run(run(trivial)), asyncio.run(run(counted))) for _ in range(PASSES)]
    return min(bare for bare, _ in passes), min(through for _, through in passes)


def ingest_body(job: str, start: int, events: int) -> bytes:
    return b"\n".join(
        orjson.dumps({"kind": "scalar", "metric": f"m{i % 5}", "iter": start + i // 5, "value": float(i)})
        for i in range(events)
    )


def ingest_times(servers: dict[str, Any], requests: int, events: int, warmup: int) -> dict[str, np.ndarray]:
    """Wall milliseconds of each ingest request per server, the servers taking turns in rounds."""
    clients = {name: Http(s.url, {"Authorization": f"Bearer {s.api_key}"}) for name, s in servers.items()}
    times: dict[str, list[float]] = {name: [] for name in servers}
    sent = dict.fromkeys(servers, 0)

    def send(name: str, count: int, keep: bool) -> None:
        http = clients[name]
        for _ in range(count):
            body = ingest_body("bench-metrics", sent[name] * events, events)
            path = "/jp/v1/ingest?project=bench-metrics&job=bench-metrics"
            started = time.perf_counter()
            status, answer = http.request("POST", path, body, {"Content-Type": "application/x-ndjson"})
            elapsed = (time.perf_counter() - started) * 1000
            if status != 200 or orjson.loads(answer)["accepted"] != events:
                raise RuntimeError(f"{name}: ingest answered {status}: {answer[:300]!r}")
            sent[name] += 1
            if keep:
                times[name].append(elapsed)

    for name in servers:
        send(name, warmup, keep=False)
    order = list(servers)
    for turn in range((requests + ROUND - 1) // ROUND):
        for name in order if turn % 2 == 0 else reversed(order):
            send(name, min(ROUND, requests - turn * ROUND), keep=True)
    for name, http in clients.items():  # a fast wrong answer fails: every point sent must be stored
        points = http.get_json("/jp/v1/jobs/bench-metrics/scalars/points", {"metric": "m0", "limit": "100000"})
        expected = sent[name] * len(range(0, events, 5))
        if len(points["iter"]) != expected:
            raise RuntimeError(f"{name}: {expected} points of m0 sent, {len(points['iter'])} stored")
        http.close()
    return {name: np.array(values) for name, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000, help="timed ingest requests per server")
    parser.add_argument("--events", type=int, default=10, help="scalar points per ingest request")
    parser.add_argument("--warmup", type=int, default=50, help="untimed ingest requests per server first")
    parser.add_argument("--calls", type=int, default=100_000, help="calls of the in-process middleware measurement")
    args = parser.parse_args()

    print(f"machine: {describe()}")
    bare, through = middleware_cost(args.calls)
    print(f"middleware, in process, {args.calls} calls of a trivial ASGI app (no network, no store), best of {PASSES}:")
    print(f"  without request metrics: {bare:.2f} us/call")
    print(f"  with request metrics:    {through:.2f} us/call   (+{through - bare:.2f} us per request)")

    with ExitStack() as stack:
        servers = {
            "metrics on ": stack.enter_context(running_server(extra_args=["--metrics-access", "key"])),
            "metrics off": stack.enter_context(running_server(extra_args=["--metrics-access", "off"])),
        }
        times = ingest_times(servers, args.requests, args.events, args.warmup)
    print(
        f"ingest, real server processes, HTTP/1.1 keep-alive on loopback, embedded chdb store: {args.requests} "
        f"requests per server of {args.events} scalar points as JSON lines, one at a time, in alternating rounds "
        f"of {ROUND}:"
    )
    for name, values in times.items():
        print(f"  {name}: p50 {np.percentile(values, 50):.2f} ms, p99 {np.percentile(values, 99):.2f} ms")
    on, off = (np.percentile(times[name], 50) for name in ("metrics on ", "metrics off"))
    print(f"  difference of the medians: {on - off:+.3f} ms ({(on - off) / off * 100:+.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
