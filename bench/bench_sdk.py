"""Cost of the SDK on the training loop.

Prints the machine, then:

1. the cost of one ``run.log({...5 scalars...})`` call with the sender thread running and
   delivering to a real server: median, p90 and p99 of per-call timings, and the mean
   from one timer around all calls (no per-call timer overhead);
2. the wall-clock time of a CPU training loop (numpy matmuls) of 10,000 steps without
   the SDK and with it (``run.log`` of 5 scalars every step), alternated over a few
   repeats, and the overhead per step;
3. how long the final flush took and how many points the server stored.

    python bench/bench_sdk.py                       # starts a server (jobpulse.testing)
    python bench/bench_sdk.py --url http://host:8642 --api-key KEY
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread: a steadier loop to compare

import numpy as np  # noqa: E402
import orjson  # noqa: E402


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@contextlib.contextmanager
def server_at(url: str | None, api_key: str | None) -> Iterator[tuple[str, str | None]]:
    if url:
        yield url, api_key
        return
    from jobpulse.testing import running_server

    with running_server() as srv:
        yield srv.url, srv.api_key


def stored_points(url: str, api_key: str | None, job: str, metric: str) -> int:
    query = urllib.parse.urlencode({"metric": metric, "variant": metric, "limit": 200_000})
    req = urllib.request.Request(f"{url}/jp/v1/jobs/{job}/scalars/points?{query}")
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return len(orjson.loads(resp.read())["iter"])


def train_step(w: np.ndarray, x: np.ndarray) -> float:
    h = np.tanh(x @ w)
    loss = float((h * h).mean())
    w -= 1e-4 * (x.T @ h)
    return loss


def training_loop(steps: int, size: int, run=None) -> tuple[float, float]:
    """(wall seconds, process CPU seconds: this thread and the sender together)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((size, size)) * 0.01
    x = rng.standard_normal((size, size))
    start, cpu = time.perf_counter(), time.process_time()
    if run is None:
        for step in range(steps):
            loss = train_step(w, x)
            _ = {"loss": loss, "lr": 1e-4, "step_time": 0.1, "grad_norm": 1.0, "tokens": float(step)}
    else:
        for step in range(steps):
            loss = train_step(w, x)
            metrics = {"loss": loss, "lr": 1e-4, "step_time": 0.1, "grad_norm": 1.0, "tokens": float(step)}
            run.log(metrics, step)
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running jobpulse server; default: start one")
    parser.add_argument("--api-key")
    parser.add_argument("--calls", type=int, default=100_000, help="run.log calls timed one by one")
    parser.add_argument("--steps", type=int, default=10_000, help="training loop steps")
    parser.add_argument("--size", type=int, default=64, help="matrix size of the training step")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    import jobpulse

    system = f"Python {platform.python_version()} on {platform.system()}"
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, {system}")
    print(
        f"sizes: {args.calls} timed run.log calls of 5 scalars; training loop {args.steps} steps of "
        f"{args.size}x{args.size} float64 matmuls, {args.repeats} repeats off/on"
    )
    with server_at(args.url, args.api_key) as (url, api_key), tempfile.TemporaryDirectory() as spool:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        common = dict(url=url, api_key=api_key, capture_console=False, spool_dir=spool, replay_spool=False)

        run = jobpulse.init(project="bench", job=f"bench-log-{stamp}", **common)
        values = {"loss": 0.5, "acc": 0.9, "lr": 3e-4, "grad_norm": 1.2, "tokens": 4096.0}
        clock = time.perf_counter_ns
        costs = []
        for step in range(args.calls):
            t0 = clock()
            run.log(values, step=step)
            costs.append(clock() - t0)
        start = time.perf_counter()
        for step in range(args.calls, 2 * args.calls):
            run.log(values, step=step)
        mean_us = (time.perf_counter() - start) / args.calls * 1e6
        overhead = statistics.median(-(clock() - clock()) for _ in range(10_000))
        t0 = time.perf_counter()
        run.finish()
        flush_s = time.perf_counter() - t0
        costs.sort()
        pick = lambda q: costs[min(len(costs) - 1, int(q * len(costs)))] / 1000  # noqa: E731
        print(
            f"run.log (5 scalars, sender running): median {pick(0.5):.2f} us, p90 {pick(0.9):.2f} us, "
            f"p99 {pick(0.99):.2f} us per call (timer itself ~{overhead / 1000:.2f} us); "
            f"mean over {args.calls} untimed calls {mean_us:.2f} us"
        )
        stored = stored_points(url, api_key, run.job, "loss")
        print(f"  delivered {stored} of {2 * args.calls} 'loss' points; final flush took {flush_s:.2f} s")

        off, on, off_cpu, on_cpu = [], [], [], []
        for i in range(args.repeats):
            for mode in ("off", "on") if i % 2 == 0 else ("on", "off"):  # alternate the order
                if mode == "off":
                    wall, cpu = training_loop(args.steps, args.size)
                    off.append(wall)
                    off_cpu.append(cpu)
                    continue
                loop_run = jobpulse.init(project="bench", job=f"bench-loop-{stamp}-{i}", **common)
                wall, cpu = training_loop(args.steps, args.size, loop_run)
                t0 = time.perf_counter()
                loop_run.finish()
                flush_loop = time.perf_counter() - t0
                on.append(wall)
                on_cpu.append(cpu)
        base, with_sdk = statistics.median(off), statistics.median(on)
        best = (min(on) - min(off)) / args.steps * 1e6
        cpu_step = (statistics.median(on_cpu) - statistics.median(off_cpu)) / args.steps * 1e6
        per_step = (with_sdk - base) / args.steps * 1e6
        print(
            f"training loop of {args.steps} steps: off {base:.3f} s, on {with_sdk:.3f} s (medians of "
            f"{args.repeats}); overhead {100 * (with_sdk / base - 1):+.1f} %, {per_step:+.2f} us/step "
            f"(a step takes {base / args.steps * 1e6:.1f} us); best of each: {best:+.2f} us/step; "
            f"final flush {flush_loop:.2f} s"
        )
        print(
            f"  process CPU per step (loop thread + sender): {cpu_step:+.2f} us more with the SDK "
            f"(medians: off {statistics.median(off_cpu):.3f} s, on {statistics.median(on_cpu):.3f} s)"
        )
        print(f"  wall off: {', '.join(f'{t:.3f}' for t in off)}; on: {', '.join(f'{t:.3f}' for t in on)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
