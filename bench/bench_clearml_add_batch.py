"""The latency a ClearML SDK feels: one ``events.add_batch`` of 100 events at a time against an idle server.

A real ``jobpulse server`` is started on loopback (embedded chdb storage, a fresh data directory) unless
--url names one. The client logs in as the ClearML SDK does (``auth.login`` with the key id and key as Basic
credentials) and sends the token it gets as ``Authorization: Bearer``. A task is created, then --requests
add_batch calls are sent one after another over one kept-alive HTTP/1.1 connection, each carrying --events
events as JSON lines (what the SDK sends: one JSON object a line). Three shapes are timed, each after
--warmup untimed calls:

- ``scalars``: the SDK's reporting shape, 10 metrics x 10 variants at one iteration per request, the next
  request at the next iteration (new points, as training reports them);
- ``logs``: console lines of one worker;
- ``mixed``: 80 scalars, 15 log lines, 4 plots and 1 debug image.

Beside them, in the same run and over the same connection, two trivial routes give the floor of a round
trip: ``GET /healthz`` (answered without the ClearML layer) and ``server.info`` (the ClearML dispatch, no
store). Every figure is the client's wall time from sending the request to reading the whole answer; the
script prints p50 and p99 in milliseconds, the machine (with its load average: a busy machine slows the
store's inserts most), the transport and the data size, and, from the server's ``/metrics``, the mean time
of the store's insert (the group commit) per request, the part of an add_batch spent below the ClearML
layer; and where the script started the server, the CPU that process used per request (warm-up included), by
kind of thread (the interpreter, the engine's statements, the engine's background merges of the parts the inserts
made). After each shape the stored events are counted through the ClearML API, so a fast wrong answer fails.

    .venv/bin/python bench/bench_clearml_add_batch.py
    .venv/bin/python bench/bench_clearml_add_batch.py --requests 2000 --events 100
"""

from __future__ import annotations

import argparse
import base64
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from machine import describe
from server_threads import shares, thread_cpu
from timing import timed

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from common import Http  # noqa: E402 - the loopback client shared with the comparative benchmark

PROJECT = "bench-clearml-latency"
LINES = "application/json-lines"


def clearml(http: Http, endpoint: str, body: Any = None, raw: bytes | None = None) -> dict[str, Any]:
    """Call a ClearML endpoint (JSON, or JSON lines in ``raw``) and answer its ``data``."""
    payload = raw if raw is not None else orjson.dumps(body if body is not None else {})
    status, data = http.request(
        "POST", f"/v2.23/{endpoint}", payload, {"Content-Type": LINES if raw is not None else "application/json"}
    )
    doc = orjson.loads(data)
    if status != 200:
        raise RuntimeError(f"{endpoint} answered {status}: {doc['meta']}")
    return doc["data"]


def login(url: str, key: str) -> Http:
    """A client holding the token of ``auth.login`` for ``key`` (a jobpulse key: ``jp_<key id>_<secret>``)."""
    basic = base64.b64encode(f"{key.split('_')[1]}:{key}".encode()).decode()
    status, body = Http(url, {"Authorization": f"Basic {basic}"}).request("GET", "/auth.login")
    if status != 200:
        raise RuntimeError(f"auth.login answered {status}: {body[:300]!r}")
    return Http(url, {"Authorization": f"Bearer {orjson.loads(body)['data']['token']}"}, timeout=120)


def new_task(http: Http, name: str) -> str:
    found = clearml(http, "projects.get_all", {"name": f"^{PROJECT}$"})["projects"]
    pid = found[0]["id"] if found else clearml(http, "projects.create", {"name": PROJECT})["id"]
    task = clearml(http, "tasks.create", {"name": name, "project": pid, "type": "training"})["id"]
    clearml(http, "tasks.started", {"task": task})
    return task


def scalar_events(task: str, step: int, count: int, now: int) -> list[dict[str, Any]]:
    return [
        {
            "timestamp": now + step,
            "type": "training_stats_scalar",
            "task": task,
            "iter": step,
            "metric": f"metric_{k // 10}",
            "variant": f"variant_{k % 10}",
            "value": ((step * count + k) % 997) / 997,
        }
        for k in range(count)
    ]


def log_events(task: str, step: int, count: int, now: int) -> list[dict[str, Any]]:
    return [
        {
            "timestamp": now + step * count + k,
            "type": "log",
            "task": task,
            "level": "info",
            "worker": "bench-host",
            "msg": f"epoch {step} batch {k}: loss={(k % 97) / 97:.4f} lr=0.001 throughput=1234.5 samples/s",
        }
        for k in range(count)
    ]


def mixed_events(task: str, step: int, count: int, now: int) -> list[dict[str, Any]]:
    scalars = scalar_events(task, step, count * 80 // 100, now)
    logs = log_events(task, step, count * 15 // 100, now)
    plots = [
        {
            "timestamp": now + step,
            "type": "plot",
            "task": task,
            "iter": step,
            "metric": "curves",
            "variant": f"plot_{k}",
            "plot_str": orjson.dumps({"data": [{"x": list(range(20)), "y": [step + i for i in range(20)]}]}).decode(),
        }
        for k in range(count * 4 // 100)
    ]
    rest = count - len(scalars) - len(logs) - len(plots)
    images = [
        {
            "timestamp": now + step,
            "type": "training_debug_image",
            "task": task,
            "iter": step,
            "metric": "samples",
            "variant": f"image_{k}",
            "key": f"{PROJECT}/samples/image_{k}/samples_image_{k}_{step:08d}.png",
            "url": f"http://files.example/{PROJECT}/samples/image_{k}/samples_image_{k}_{step:08d}.png",
        }
        for k in range(rest)
    ]
    return [*scalars, *logs, *plots, *images]


def bodies(make: Callable[..., list[dict[str, Any]]], task: str, requests: int, count: int) -> list[bytes]:
    now = int(time.time() * 1000) - 86_400_000
    return [b"\n".join(orjson.dumps(e) for e in make(task, step, count, now)) for step in range(requests)]


def trivial(http: Http, path: str, method: str = "GET") -> Callable[[], None]:
    def call() -> None:
        status, _ = http.request(
            method, path, b"{}" if method == "POST" else None, {"Content-Type": "application/json"}
        )
        if status != 200:
            raise RuntimeError(f"{path} answered {status}")

    return call


def add_batch_shape(http: Http, name: str, make: Callable[..., list], args: argparse.Namespace) -> np.ndarray:
    task = new_task(http, f"add_batch {name}")
    sent = bodies(make, task, args.warmup + args.requests, args.events)
    queue = iter(sent)

    def call() -> None:
        answer = clearml(http, "events.add_batch", raw=next(queue))
        if answer["added"] != args.events or answer["errors"]:
            raise RuntimeError(f"add_batch answered {answer}")

    times = timed(call, args.requests, args.warmup, args.pause_ms / 1000)
    counted = clearml(http, "events.get_task_events", {"task": task, "batch_size": 1})["total"]
    if counted != len(sent) * args.events:
        raise RuntimeError(f"{name}: the task holds {counted} events, {len(sent) * args.events} were added")
    return times


def commit_seconds(url: str, key: str) -> tuple[float, float] | None:
    """The server's total group-commit time and count so far (``/metrics``), or None where it reports none."""
    status, body = Http(url, {"Authorization": f"Bearer {key}"}).request("GET", "/metrics")
    if status != 200:
        return None
    found: dict[str, float] = {}
    for text in body.decode().splitlines():
        name, _, value = text.partition(" ")
        if name in ("jobpulse_ingest_commit_duration_seconds_sum", "jobpulse_ingest_commit_duration_seconds_count"):
            found[name.rsplit("_", 1)[1]] = float(value)
    return (found["sum"], found["count"]) if len(found) == 2 else None


def line(label: str, ms: np.ndarray) -> str:
    p50, p99 = np.percentile(ms, 50), np.percentile(ms, 99)
    return f"  {label:<44} p50 {p50:6.2f} ms   p99 {p99:6.2f} ms   ({len(ms)} requests)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="an existing idle server (default: start one on loopback)")
    parser.add_argument("--api-key", help="an API key that may write (with --url)")
    parser.add_argument("--requests", type=int, default=500, help="timed requests per shape")
    parser.add_argument("--warmup", type=int, default=50, help="untimed requests before each shape")
    parser.add_argument("--events", type=int, default=100, help="events per add_batch request")
    parser.add_argument(
        "--pause-ms",
        type=float,
        default=0.0,
        help="pause before each timed add_batch, as the SDK's reporter waits between batches (0: back to back)",
    )
    parser.add_argument("--shapes", default="scalars,logs,mixed", help="which shapes to time")
    args = parser.parse_args()
    shapes = {"scalars": scalar_events, "logs": log_events, "mixed": mixed_events}
    with ExitStack() as stack:
        pid = 0  # the server's process, where this script started it (0: none to read)
        if args.url:
            url, key, transport = args.url, args.api_key or "", "the server's own storage (--url)"
        else:
            from jobpulse.testing import running_server

            server = stack.enter_context(running_server())
            url, key, transport = server.url, server.api_key, "embedded chdb (jobpulse server's default)"
            pid = server.process.pid
        http = login(url, key)
        print(f"machine:   {describe()}")
        print(f"server:    {url}, storage: {transport}")
        print("client:    one kept-alive HTTP/1.1 connection on loopback, one request at a time")
        print(
            f"data:      {args.events} events a request, {args.requests} timed requests per shape after "
            f"{args.warmup} untimed"
        )
        print("baseline (the same server, the same connection):")
        print(line("GET /healthz", timed(trivial(http, "/healthz"), args.requests, args.warmup)))
        print(line("POST /v2.23/server.info", timed(trivial(http, "/v2.23/server.info", "POST"), args.requests, 10)))
        print(f"events.add_batch of {args.events} events:")
        for name in args.shapes.split(","):
            before, cpu_before = commit_seconds(url, key), thread_cpu(pid)
            ms = add_batch_shape(http, name, shapes[name], args)
            after, used = commit_seconds(url, key), thread_cpu(pid) - cpu_before
            store = ""
            if before and after and after[1] > before[1]:
                store = f"   store insert {1000 * (after[0] - before[0]) / (after[1] - before[1]):6.2f} ms mean"
            print(line(name, ms) + store)
            if used:  # only where this script started the server
                calls = (args.warmup + args.requests) / 1000  # per request, in ms
                print(f"    server CPU per request: {shares(used, calls, 'ms')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
