"""TensorBoard: event files written with tensorboardX's ``SummaryWriter``, read back with TensorBoard's own
event loader (``EventAccumulator``, ``EventMultiplexer``). No server: TensorBoard reads the files directly.

Workloads: 1 (``add_scalar`` per point; the writer is closed, so everything is on disk), 2 (full history:
an accumulator that keeps every scalar; chart: TensorBoard's own downsampling, reservoir sampling at load
time, with a reservoir of 1,000), 3 (latest values: a multiplexer over the 200 run directories with a
reservoir of 1, which always keeps the last point), 6 (``add_scalar`` for 5 scalars), 7 (event-file
bytes per point, install size).
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    FIVE,
    Budget,
    Result,
    dir_bytes,
    install_bytes,
    log,
    read_config,
    scalar_value,
    time_calls,
    version_of,
)


def write_stream(logdir: Path, metrics: int, steps: int, limit_s: float) -> tuple[int, int, float]:
    from tensorboardX import SummaryWriter

    start = time.perf_counter()
    writer = SummaryWriter(str(logdir))
    add = writer.add_scalar
    names = [f"m{m}" for m in range(metrics)]
    done = 0
    for s in range(steps):
        for m in range(metrics):
            add(names[m], scalar_value(m, s), s)
        done = s + 1
        if s % 500 == 499 and time.perf_counter() - start > limit_s:
            break
    writer.close()
    return done * metrics, done, time.perf_counter() - start


def accumulator(path: Path, scalars: int):
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(path), size_guidance={ea.SCALARS: scalars, ea.TENSORS: scalars})
    acc.Reload()
    return acc


def scalars_of(acc, tag: str) -> list:
    """Scalar events of ``tag``: tensorboardX writes simple values, which the loader lists as scalars."""
    if tag in acc.Tags().get("scalars", []):
        return acc.Scalars(tag)
    raise RuntimeError(f"tag {tag!r} not found; tags: {acc.Tags()}")


def main() -> None:
    cfg = read_config()
    res = Result("tensorboard")
    res.data["versions"] = {"tensorboard": version_of("tensorboard"), "tensorboardX": version_of("tensorboardX")}
    work = Path(cfg["work_dir"]) / "tensorboard"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    budget = Budget(cfg.get("budget_s", 900))
    workloads = cfg.get("workloads", [])
    c1 = cfg["w1"]
    if "w1" in workloads:
        stored, size = 0, 0
        for r in range(cfg["repeats"]):
            with res.guard("w1.ingest"):
                logdir = work / "w1" / f"run-{r}"
                points, done, elapsed = write_stream(logdir, c1["metrics"], c1["steps"], c1["peer_time_s"])
                stored += points
                size += dir_bytes(logdir)
                res.add("w1.ingest", points / elapsed, "points/s", points=points, steps=done)
                log(f"tensorboard w1 #{r}: {points / elapsed:,.0f} points/s ({points:,} in {elapsed:.1f} s)")
        if stored:
            res.add("w7.disk_per_million", size / stored * 1e6, "bytes", points=stored)
    if "w2" in workloads and not budget.over():
        with res.guard("w2"):
            steps, buckets = c1["steps"], cfg["w2"]["chart_buckets"]
            logdir = work / "w2"
            points, _, elapsed = write_stream(logdir, 1, steps, 1e9)
            res.add("w2.load", points / elapsed, "points/s", points=points)
            for _ in range(cfg["repeats"]):
                start = time.perf_counter()
                events = scalars_of(accumulator(logdir, 0), "m0")
                res.add("w2.read_full", time.perf_counter() - start, "s", points=len(events))
                if len(events) != steps or abs(events[-1].value - scalar_value(0, steps - 1)) > 1e-6:
                    raise RuntimeError(f"read back {len(events)} points, expected {steps}")
                start = time.perf_counter()
                events = scalars_of(accumulator(logdir, buckets), "m0")
                res.add("w2.chart", time.perf_counter() - start, "s", points=steps)
                if len(events) != buckets:
                    raise RuntimeError(f"reservoir kept {len(events)} points, expected {buckets}")
            res.note(
                "w2",
                "values are stored as 32-bit floats; the chart is TensorBoard's reservoir sampling "
                "(a uniform random subset, no aggregation), and it still reads the whole file",
            )
    if "w3" in workloads and not budget.over():
        with res.guard("w3"):
            w3(cfg, res, work / "w3")
    if "w6" in workloads and not budget.over():
        with res.guard("w6.log_call"):
            from tensorboardX import SummaryWriter

            writer = SummaryWriter(str(work / "w6"))
            items = list(FIVE.items())

            def call(step: int) -> None:
                for name, value in items:
                    writer.add_scalar(name, value, step)

            done = 0
            for _ in range(cfg["repeats"]):
                us, calls = time_calls(call, cfg["w6"]["calls"], cfg["w6"]["time_s"], first_step=done)
                done += calls
                res.add("w6.log_call", us, "us/call", calls=calls, path="5 x SummaryWriter.add_scalar")
            start = time.perf_counter()
            writer.close()
            res.add("w6.flush", time.perf_counter() - start, "s", calls=done)
    res.add("w7.install_server", install_bytes("tensorboard", "tensorboardX"), "bytes")
    res.emit()


def w3(cfg: dict, res: Result, root: Path) -> None:
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.backend.event_processing import event_multiplexer as em
    from tensorboardX import SummaryWriter

    c = cfg["w3"]
    runs, metrics, steps = c["runs"], c["metrics"], c["steps"]
    names = [f"m{m}" for m in range(metrics)]
    start = time.perf_counter()
    writers = [SummaryWriter(str(root / f"run-{r:03d}")) for r in range(runs)]
    done, chunk = 0, 100
    for first in range(0, steps, chunk):
        stop = min(steps, first + chunk)
        for writer in writers:
            for s in range(first, stop):
                for m in range(metrics):
                    writer.add_scalar(names[m], scalar_value(m, s), s)
        done = stop
        if time.perf_counter() - start > c["peer_time_s"]:
            break
    for writer in writers:
        writer.close()
    elapsed = time.perf_counter() - start
    points = runs * metrics * done
    res.add("w3.ingest", points / elapsed, "points/s", points=points, steps_per_run=done)
    for _ in range(cfg["repeats"]):
        begin = time.perf_counter()
        mux = em.EventMultiplexer(size_guidance={ea.SCALARS: 1, ea.TENSORS: 1})
        mux.AddRunsFromDirectory(str(root))
        mux.Reload()
        latest = {
            run: {tag: mux.Scalars(run, tag)[-1].value for tag in tags["scalars"]} for run, tags in mux.Runs().items()
        }
        res.add("w3.latest", time.perf_counter() - begin, "s", runs=len(latest))
        if len(latest) != runs or any(len(v) != metrics for v in latest.values()):
            raise RuntimeError(f"latest values for {len(latest)} runs")
        value = next(iter(latest.values()))[f"m{metrics - 1}"]
        if abs(value - scalar_value(metrics - 1, done - 1)) > 1e-6:
            raise RuntimeError(f"latest value {value} is not the value at step {done - 1}")
    res.note(
        "w3",
        "a multiplexer with a reservoir of 1 per tag (it keeps the last point); it still reads "
        "every event file in full",
    )


if __name__ == "__main__":
    main()
