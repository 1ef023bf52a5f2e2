"""A fleet's small batches: 1, 8 and 30 clients posting 200-point JSON-lines batches, beside a trivial route.

For each transport (``embedded``: a ``jobpulse server`` on chdb; ``standin``: a ``jobpulse server`` over the
ClickHouse HTTP stand-in, chdb behind ClickHouse's HTTP interface, not a ClickHouse server), one real server
process on loopback, and for each concurrency, in the same run:

- ``ingest``: each client thread posts 200 scalar points as JSON lines (a job per client, new iterations each
  time) over one kept-alive connection for --seconds, one request after another;
- ``trivial``: the same threads ``GET /healthz`` (answered without the store) for --seconds: the ceiling of
  requests the server and this client can turn around at that concurrency.

Printed: requests/s, points/s, p50 and p99 of the client's wall time per request, ingest's share of the trivial
rate, and one client's single-batch ack time over the trivial round trip. Under each ingest load, the CPU the
jobpulse server process used, in cores, by kind of thread (Linux: from ``/proc``): the interpreter's threads, and
on the embedded transport the engine's statement threads and its background merges of the parts each insert
makes (through the stand-in the engine runs in the stand-in's process, not counted). The issue's targets: at 30 clients
>= 50 % of the trivial rate with p99 <= 100 ms; one small batch acked within 4x the trivial round trip.

With ``--sustain MINUTES``, then one ingest load at the largest concurrency for that many minutes, a line per
minute (requests/s, p50, p99, the engine's merges in cores, the files of the data directory): the rate once the
merges of the parts written have caught up.

    .venv/bin/python bench/bench_small_batches.py
    .venv/bin/python bench/bench_small_batches.py --seconds 15 --transports embedded
    .venv/bin/python bench/bench_small_batches.py --transports embedded --clients 8 --sustain 6
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import orjson
from machine import describe
from server_threads import shares, thread_cpu

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from common import Http  # noqa: E402 - the loopback client shared with the comparative benchmark
from transports import server_on  # noqa: E402 - imports jobpulse from this checkout's src

from jobpulse.testing import ServerProcess  # noqa: E402 - from this checkout's src

POINTS = 200
CONTENT_TYPE = "application/x-ndjson"


def batch(client: int, step: int) -> bytes:
    """200 scalar points of one iteration: 200 metrics of job ``small-<client>``."""
    lines = (
        orjson.dumps({"kind": "scalar", "metric": f"m{k}", "variant": "v", "iter": step, "value": step * 0.5 + k})
        for k in range(POINTS)
    )
    return b"\n".join(lines)


def load(
    http: Http, clients: int, seconds: float, ingest: bool, job: str = "small", steps: list[int] | None = None
) -> list[float]:
    """Each client thread sends one request after another for ``seconds``; the wall times, in seconds. Client ``n``
    writes job ``<job>-<clients>-<n>``, from iteration ``steps[n]`` on (0 without ``steps``, which it advances)."""
    times: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds
    steps = steps if steps is not None else [0] * clients

    def client(n: int) -> None:
        mine = []
        path = f"/jp/v1/ingest?project=bench&job={job}-{clients}-{n}&worker=worker-0"
        while time.monotonic() < stop:
            body = batch(n, steps[n]) if ingest else None
            started = time.perf_counter()
            if ingest:
                http.post(path, body, CONTENT_TYPE)
            else:
                status, _ = http.request("GET", "/healthz")
                assert status == 200, status
            mine.append(time.perf_counter() - started)
            steps[n] += 1
        with lock:
            times.extend(mine)
        http.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return times


def row(name: str, clients: int, times: list[float], seconds: float, points: int) -> dict:
    ms = np.array(times) * 1000
    rate = len(times) / seconds
    return {
        "load": name,
        "clients": clients,
        "req/s": rate,
        "points/s": rate * points,
        "p50 ms": float(np.percentile(ms, 50)),
        "p99 ms": float(np.percentile(ms, 99)),
    }


def single(http: Http, repeats: int = 50) -> tuple[float, float]:
    """Median ms of one small batch acked and of one trivial round trip, alternating, one client."""
    acks, trips = [], []
    for step in range(repeats):
        started = time.perf_counter()
        http.post("/jp/v1/ingest?project=bench&job=small-single&worker=worker-0", batch(0, step), CONTENT_TYPE)
        acks.append(time.perf_counter() - started)
        started = time.perf_counter()
        http.request("GET", "/healthz")
        trips.append(time.perf_counter() - started)
    return float(np.median(acks) * 1000), float(np.median(trips) * 1000)


def cpu_line(before: Counter, after: Counter, seconds: float) -> str:
    used = after - before
    return f"        server CPU under ingest: {shares(used, seconds, 'cores')}" if used else ""


def run_transport(name: str, url: str, key: str, concurrency: list[int], seconds: float, pid: int) -> None:
    http = Http(url, {"Authorization": f"Bearer {key}"})
    http.post("/jp/v1/ingest?project=bench&job=small-warm&worker=worker-0", batch(0, 0), CONTENT_TYPE)
    ack, trip = single(http)
    print(
        f"\n## {name}: one 200-point batch acked in {ack:.1f} ms, a trivial round trip {trip:.1f} ms "
        f"({ack / trip:.1f}x; target <= 4x)"
    )
    print(f"{'clients':>7} {'load':>8} {'req/s':>8} {'points/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'of trivial':>10}")
    for clients in concurrency:
        before, started = thread_cpu(pid), time.monotonic()
        ingest = row("ingest", clients, load(http, clients, seconds, True), seconds, POINTS)
        used = cpu_line(before, thread_cpu(pid), time.monotonic() - started)
        trivial = row("trivial", clients, load(http, clients, seconds, False), seconds, 0)
        for result in (ingest, trivial):
            share = f"{ingest['req/s'] / trivial['req/s']:.0%}" if result is ingest else ""
            print(
                f"{clients:>7} {result['load']:>8} {result['req/s']:>8.1f} {result['points/s']:>10.0f} "
                f"{result['p50 ms']:>8.1f} {result['p99 ms']:>8.1f} {share:>10}"
            )
        if used:
            print(used)


def sustain(server: ServerProcess, clients: int, minutes: int) -> None:
    """One ingest load of ``minutes`` minutes at ``clients``, printed minute by minute: the rate once the engine's
    merges of the parts written have caught up, and the files of the data directory as they come and go."""
    http = Http(server.url, {"Authorization": f"Bearer {server.api_key}"})
    print(f"\n{clients} clients posting without pause for {minutes} min, minute by minute:")
    print(f"{'minute':>7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'merges':>7} {'files':>8}")
    steps = [0] * clients
    for minute in range(1, minutes + 1):
        before = thread_cpu(server.process.pid)
        result = row("ingest", clients, load(http, clients, 60.0, True, "sustained", steps), 60.0, POINTS)
        merges = (thread_cpu(server.process.pid) - before).get("engine merges", 0.0) / 60
        files = sum(len(names) for _, _, names in os.walk(server.data_dir))
        print(
            f"{minute:>7} {result['req/s']:>8.1f} {result['p50 ms']:>8.1f} {result['p99 ms']:>8.1f} "
            f"{merges:>7.2f} {files:>8}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each load, in seconds")
    parser.add_argument("--clients", default="1,8,30", help="concurrencies, comma separated")
    parser.add_argument("--transports", default="embedded,standin", help="embedded, standin or both")
    parser.add_argument(
        "--sustain", type=int, default=0, help="then minutes of ingest at the largest concurrency, a line per minute"
    )
    args = parser.parse_args()
    concurrency = [int(c) for c in args.clients.split(",")]
    transports = args.transports.split(",")
    print(f"# Small batches: {POINTS}-point JSON-lines batches vs GET /healthz, {args.seconds:g} s per load")
    print(describe())
    print("client and server on this machine, over loopback HTTP/1.1 with kept-alive connections")
    for transport in transports:
        with server_on(transport) as (server, label):
            run_transport(label, server.url, server.api_key, concurrency, args.seconds, server.process.pid)
            if args.sustain:
                sustain(server, max(concurrency), args.sustain)


if __name__ == "__main__":
    main()
