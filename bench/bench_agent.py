"""What sampling costs: the agent's CPU share at a given interval (1 s by default).

Builds the collectors ``jobpulse agent`` would use on this machine, ticks them every interval for
N samples, encodes each tick as the ingest request the agent would queue (JSON + zstd; nothing is
sent), and reports process CPU time over wall time, and CPU time per sample. Where NVML finds no
GPU, the NVIDIA collector runs against a recorded 8 x H100 replay (tests/agent/data); the output
says which. A replay costs Python work like the real module but no driver time, so on a real GPU
node the NVML share can differ.

    .venv/bin/python bench/bench_agent.py [--samples 30] [--interval 1] [--scope auto|cgroup|host|process]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "agent"))

from machine import describe  # noqa: E402

from jobpulse.agent.nvidia import NvidiaCollector  # noqa: E402
from jobpulse.agent.outlet import system_body  # noqa: E402
from jobpulse.agent.sampler import Sampler, build_collectors  # noqa: E402
from jobpulse.agent.storage import parse_paths  # noqa: E402


class Timed:
    """Adds up the CPU time one collector spends (thread CPU time: the sampler is one thread)."""

    def __init__(self, collector: object) -> None:
        self.collector = collector
        self.cpu = 0.0

    def collect(self, now: float) -> list:
        t0 = time.thread_time()
        try:
            return self.collector.collect(now)  # type: ignore[attr-defined]
        finally:
            self.cpu += time.thread_time() - t0

    def close(self) -> None:
        close = getattr(self.collector, "close", None)
        if callable(close):
            close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--scope", default="auto", choices=("auto", "cgroup", "host", "process"))
    parser.add_argument("--paths", default="ephemeral=/tmp")
    args = parser.parse_args()

    import orjson
    import zstandard

    real = NvidiaCollector.create()
    if real is not None:
        gpu, gpu_note = real, f"real NVML, {len(real.targets)} GPU(s)"
    else:
        from agent_fakes import h100x8

        gpu = NvidiaCollector(h100x8(), env={})
        gpu_note = "no GPU here: NVML replaced by a recorded replay of 8 x H100 (Python cost only)"
    collectors = build_collectors(
        scope=args.scope,
        pid=os.getpid() if args.scope == "process" else None,
        paths=parse_paths(args.paths),
        use_nvml=False,
    )
    collectors.insert(-1, gpu)
    timed = [Timed(c) for c in collectors]
    compress = zstandard.ZstdCompressor(level=3).compress
    sizes: list[int] = []
    counts: list[int] = []

    def emit(ts_ms: int, samples: list) -> None:
        body = orjson.dumps(system_body("bench", "bench-job", "worker-0", ts_ms, samples))
        sizes.append(len(compress(body)))
        counts.append(len(samples))

    sampler = Sampler(timed, emit, args.interval)
    sampler.tick()  # warm up: first readings, imports, handles
    stop = threading.Event()
    cpu0, wall0 = time.process_time(), time.monotonic()
    sampler.run(stop, max_ticks=args.samples)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    sampler.close()

    per_sample_ms = 1000 * cpu / args.samples
    values = sum(counts[1:]) / max(1, len(counts) - 1)
    request = sum(sizes[1:]) / max(1, len(sizes) - 1)
    share = per_sample_ms / (10 * args.interval)  # % of one core
    print(f"machine:   {describe()}")
    print(f"GPUs:      {gpu_note}")
    print(f"scope:     {args.scope}")
    print(f"samples:   {args.samples} at {args.interval:g} s, {values:.0f} values each")
    print(f"request:   {request:.0f} bytes per tick (JSON + zstd; not sent)")
    print(f"CPU time:  {cpu * 1000:.1f} ms in {wall:.1f} s = {per_sample_ms:.2f} ms per sample (all threads)")
    for t in timed:
        name = type(t.collector).__name__
        print(f"           {name:<18} {1000 * t.cpu / (args.samples + 1):6.3f} ms per sample")
    verdict = "within" if share < 1 else "OVER"
    print(f"CPU share: {share:.3f} % of one core at {args.interval:g} s sampling ({verdict} the 1 % budget)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
