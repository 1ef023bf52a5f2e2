"""Latency of the four compatible APIs on a large job, measured against a real jobpulse server.

The job has WORKERS workers x GPUS GPUs sampled every 10 s for DAYS days (50 series per worker: five per GPU
and ten host series), ending now, sent through the columnar ingest API in parallel requests. Its leader also
gets a console log that is grown to each of the LOG sizes in turn, and the ModelArts log preview is timed at
every size to show how its latency scales with the size of the log.

    .venv/bin/python bench/bench_compat.py                       # 16 x 8 GPUs x 7 days, logs 0.1, 1, 10 GiB
    .venv/bin/python bench/bench_compat.py --days 1 --log-gb 0.1 # a quicker run
    .venv/bin/python bench/bench_compat.py --url http://host:port --api-key KEY   # an existing server

Each call is timed from the client (request sent to answer read, one kept-alive connection) after two
warm-up calls; the figures are the median, 90th percentile and minimum over --repeats calls. Timing starts
once the server is idle again after ingest (its background merges done), so it measures the read path.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import orjson
from machine import describe

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from common import Http  # noqa: E402 - the loopback client shared with the comparative benchmark

PROJECT = "bench"
JOB = "bench-7d"
STEP_MS = 10_000
GIB = 1 << 30
GPU_SERIES = ("gpu_util", "gpu_mem_bytes", "gpu_mem_util", "gpu_power_w", "gpu_temp_c")
HOST_SERIES = (
    "cpu_cores",
    "cpu_util",
    "mem_bytes",
    "mem_util",
    "net_rx_Bps",
    "net_tx_Bps",
    "disk_read_Bps",
    "disk_write_Bps",
    "ephemeral_bytes",
    "ephemeral_util",
)
LOG_LINES_PER_REQUEST = 250_000


def ingest(http: Http, key: str, body: bytes) -> dict:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    status, data = http.request("POST", "/jp/v1/ingest", body, headers)
    answer = orjson.loads(data)
    if status != 200 or answer.get("rejected"):
        raise RuntimeError(f"ingest answered {status}: {data[:500]!r}")
    return answer


# -- data ------------------------------------------------------------------------------------------------


def system_bodies(t0: int, samples: int, workers: int, gpus: int, chunk: int) -> Iterator[tuple[bytes, int]]:
    """Columnar ingest bodies, each holding ``chunk`` consecutive samples of every series of every worker."""
    rng = np.random.default_rng(1)
    for first in range(0, samples, chunk):
        n = min(chunk, samples - first)
        ts = t0 + (first + np.arange(n, dtype=np.int64)) * STEP_MS
        series = []
        for w in range(workers):
            worker = f"worker-{w}"
            for g in range(gpus):
                util = np.clip(rng.normal(90, 6, n), 0, 100).round(1)
                mem = (rng.normal(60, 0.5, n) * GIB).round()
                values = (
                    util,
                    mem,
                    (100 * mem / (80 * GIB)).round(2),
                    (90 + 5.9 * util).round(1),
                    (38 + 0.35 * util).round(1),
                )
                series += [
                    {"kind": "system", "worker": worker, "metric": m, "device": str(g), "ts": ts, "value": v}
                    for m, v in zip(GPU_SERIES, values, strict=True)
                ]
            cores = rng.normal(22, 2, n).round(2)
            mem = (rng.normal(180, 1, n) * GIB).round()
            eph = (40 * GIB + (first + np.arange(n)) * 12e6).round()
            values = (
                cores,
                (100 * cores / 96).round(2),
                mem,
                (100 * mem / (1024 * GIB)).round(2),
                rng.normal(2.1e9, 1e8, n).round(),
                rng.normal(2.0e9, 1e8, n).round(),
                rng.normal(4.5e8, 5e7, n).round(),
                np.abs(rng.normal(2e6, 1e6, n)).round(),
                eph,
                (eph / (500 * GIB)).round(5),
            )
            series += [
                {"kind": "system", "worker": worker, "metric": m, "device": "", "ts": ts, "value": v}
                for m, v in zip(HOST_SERIES, values, strict=True)
            ]
        body = {"project": PROJECT, "job": JOB, "series": series}
        yield orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY), n * len(series)


def log_bodies(first_seq: int, lines: int, t_base: int) -> Iterator[tuple[bytes, int]]:
    """Log lines ``first_seq``.. of worker-0, about 120 bytes each, line ``seq`` at ``t_base + seq`` ms."""
    for start in range(0, lines, LOG_LINES_PER_REQUEST):
        n = min(LOG_LINES_PER_REQUEST, lines - start)
        seq = first_seq + start + np.arange(n)
        msgs = [
            f"[worker-0] step {s} loss={1 + (s % 977) / 1000:.4f} lr=0.000300 grad_norm={(s % 89) / 10:.2f} "
            f"tokens/s={24000 + s % 5000} mem=61.{s % 97:02d}GiB data_wait=0.0{s % 9}s"
            for s in seq.tolist()
        ]
        body = {
            "project": PROJECT,
            "job": JOB,
            "worker": "worker-0",
            "series": [{"kind": "log", "seq": seq, "ts": t_base + seq, "msg": msgs, "level": "info"}],
        }
        yield orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY), n


def send_all(http: Http, key: str, bodies: Iterator[tuple], threads: int) -> tuple[int, int]:
    """Send every body with ``threads`` requests in flight; answers (events, bytes of the bodies)."""
    events = sent = 0
    lock = threading.Lock()
    stop = threading.Event()
    body_iter = iter(bodies)

    def worker() -> None:
        nonlocal events, sent
        while not stop.is_set():
            with lock:
                item = next(body_iter, None)
            if item is None:
                return
            ingest(http, key, item[0])
            with lock:
                events += item[1]
                sent += len(item[0])

    with ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(worker) for _ in range(threads)]
        try:
            for future in futures:
                future.result()
        except BaseException:
            stop.set()  # let the other senders finish their request and stop
            raise
    return events, sent


# -- timing ----------------------------------------------------------------------------------------------


def timed(call: Callable[[], tuple[int, bytes]], repeats: int) -> tuple[list[float], bytes]:
    body = b""
    for _ in range(2):
        status, body = call()
        if status != 200:
            raise RuntimeError(f"answered {status}: {body[:300]!r}")
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        status, body = call()
        times.append((time.perf_counter() - start) * 1000)
        if status != 200:
            raise RuntimeError(f"answered {status}: {body[:300]!r}")
    return times, body


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} {five:.1f} {fifteen:.1f}"


def report(name: str, times: list[float], body: bytes, detail: str) -> None:
    times = sorted(times)
    p90 = times[min(len(times) - 1, int(round(0.9 * (len(times) - 1))))]
    print(
        f"  {name:<52} median {statistics.median(times):7.1f} ms   p90 {p90:7.1f} ms   min {times[0]:7.1f} ms   "
        f"answer {len(body) / 1024:7.0f} KiB   {detail}",
        flush=True,
    )


def bench_metrics(http: Http, key: str, repeats: int, workers: int, days: float) -> None:
    ma = {"X-Auth-Token": key}
    times, body = timed(
        lambda: http.request("GET", f"/v2/{PROJECT}/training-jobs/{JOB}/metrics/worker-0", headers=ma), repeats
    )
    doc = orjson.loads(body)
    report(
        "ModelArts task metrics (worker-0)",
        times,
        body,
        f"{len(doc['metrics'])} metrics x {len(doc['metrics'][0]['value'])} minutes",
    )
    for label, params in (
        ("PAI GetJobMetrics, default window (1 h, 5m)", {"MetricType": "GpuCoreUsage"}),
        (
            f"PAI GetJobMetrics, {days:g} days at TimeStep=1h",
            {
                "MetricType": "GpuCoreUsage",
                "TimeStep": "1h",
                "StartTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - days * 86400)),
                "EndTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
        ),
    ):
        query = urlencode({**params, "Token": key})
        times, body = timed(lambda q=query: http.request("GET", f"/api/v1/jobs/{JOB}/metrics?{q}"), repeats)
        doc = orjson.loads(body)
        report(
            label,
            times,
            body,
            f"{len(doc['PodMetrics'])} pods x {len(doc['PodMetrics'][0]['Metrics'])} points",
        )
    window = orjson.dumps({"end_epoch_millis": None, "start_epoch_millis": None})
    bt = {"Authorization": f"Api-Key {key}", "Content-Type": "application/json"}
    times, body = timed(
        lambda: http.request("POST", f"/v1/training_projects/{PROJECT}/jobs/{JOB}/metrics", window, bt), repeats
    )
    doc = orjson.loads(body)
    ranks = doc["per_node_metrics"][0]["metrics"]["gpu_utilization"]
    report(
        "Baseten metrics, default window (last hour)",
        times,
        body,
        f"{len(doc['per_node_metrics'])} nodes x {len(ranks)} GPUs x {len(ranks['0'])} points",
    )
    now = int(time.time() * 1000)
    whole = orjson.dumps({"end_epoch_millis": now, "start_epoch_millis": now - int(days * 86_400_000)})
    times, body = timed(
        lambda: http.request("POST", f"/v1/training_projects/{PROJECT}/jobs/{JOB}/metrics", whole, bt), repeats
    )
    doc = orjson.loads(body)
    report(
        f"Baseten metrics, {days:g} days",
        times,
        body,
        f"{len(doc['per_node_metrics'])} nodes, {len(doc['cpu_usage'])} points per series",
    )


def settle(pid: int | None, limit_s: float = 300.0) -> str:
    """Wait until the server process is idle (its background merges of what was just sent are done)."""
    if pid is None:
        return "server not watched"
    clock = os.sysconf("SC_CLK_TCK")

    def cpu() -> float:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / clock

    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        before = cpu()
        time.sleep(2.0)
        if cpu() - before < 0.1:  # under 5 % of a core over 2 s
            break
    return f"server idle after {time.monotonic() - started:.0f} s"


def bench_preview(http: Http, key: str, repeats: int, sizes_gb: list[float], threads: int, pid: int | None) -> None:
    headers = {"X-Auth-Token": key}
    path = f"/v2/{PROJECT}/training-jobs/{JOB}/tasks/worker-0/logs/preview"
    lines = written = 0
    t_base = int(time.time() * 1000) - int(max(sizes_gb) * GIB / 100) - 60_000  # one line per ms, ending now
    for size in sizes_gb:
        target = int(size * GIB)
        if written < target:
            more = int((target - written) / 121) + 1
            started = time.perf_counter()
            _, sent = send_all(http, key, log_bodies(lines, more, t_base), threads)
            lines += more
            spent = time.perf_counter() - started
            status, body = http.request("GET", path, headers=headers)
            written = orjson.loads(body)["full_size"]
            print(
                f"  log grown to {written / GIB:.2f} GiB ({lines:,} lines) in {spent:.0f} s "
                f"({sent / spent / (1 << 20):.1f} MiB/s of request bodies); {settle(pid)}; {load()}",
                flush=True,
            )
        times, body = timed(lambda: http.request("GET", path, headers=headers), repeats)
        doc = orjson.loads(body)
        report(
            f"ModelArts log preview, log of {doc['full_size'] / GIB:.2f} GiB",
            times,
            body,
            f"current_size {doc['current_size']:,} B",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--log-gb", default="0.1,1,10", help="log sizes to time the preview at, in GiB")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="ingest requests in flight (concurrent ingest requests can deadlock the embedded engine)",
    )
    parser.add_argument("--url", help="an existing server (default: start one with running_server)")
    parser.add_argument("--api-key", help="admin key of --url")
    args = parser.parse_args()

    print(f"machine: {describe()}", flush=True)
    with ExitStack() as stack:
        pid = None
        if args.url:
            url, key = args.url, args.api_key
        else:
            from jobpulse.testing import running_server

            server = stack.enter_context(running_server())
            url, key = server.url, server.api_key
            pid = server.process.pid if server.process else None
            print(f"server: {url} (fresh data directory {server.data_dir})", flush=True)
        http = Http(url, timeout=600)
        samples = int(args.days * 86400 * 1000 // STEP_MS)
        per_worker = args.gpus * len(GPU_SERIES) + len(HOST_SERIES)
        total = args.workers * per_worker * samples
        print(
            f"job: {args.workers} workers x {args.gpus} GPUs, {per_worker} series per worker, every "
            f"{STEP_MS // 1000} s for {args.days:g} days = {total:,} samples",
            flush=True,
        )
        t0 = int(time.time() * 1000) // STEP_MS * STEP_MS - samples * STEP_MS
        chunk = max(1, 900_000 // (args.workers * per_worker))
        started = time.perf_counter()
        events, sent = send_all(http, key, system_bodies(t0, samples, args.workers, args.gpus, chunk), args.threads)
        spent = time.perf_counter() - started
        print(
            f"ingested {events:,} samples in {spent:.0f} s: {events / spent:,.0f} samples/s "
            f"({sent / (1 << 20):,.0f} MiB of JSON, {args.threads} requests in flight)",
            flush=True,
        )
        print(f"latency over {args.repeats} calls ({load()}):", flush=True)
        print(f"  {settle(pid)}", flush=True)
        bench_metrics(http, key, args.repeats, args.workers, args.days)
        sizes = sorted(float(s) for s in args.log_gb.split(",") if s)
        bench_preview(http, key, args.repeats, sizes, args.threads, pid)


if __name__ == "__main__":
    main()
