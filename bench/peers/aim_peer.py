"""Aim: its SDK into a local repository, and ``aim server`` for remote tracking.

Workloads: 1 (``Run.track`` of a dict of 10 metrics per step: local repo, then through ``aim server``),
2 (``metric.data.view("val").numpy()``: the full history in step order; ``metric.data.sample(1000)``, the sampling the
SDK and UI use, for the chart), 3 (every run's latest values from ``Run.collect_sequence_info``),
6 (``Run.track`` of 5 scalars, local and remote), 7 (``aim server`` memory, repository bytes per point,
install size). A local run becomes readable once Aim's indexer has indexed it (``aim up`` and
``aim storage reindex`` run the same indexer): that step is part of the measured ingest.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    FIVE,
    LOOPBACK,
    Budget,
    PeakMem,
    Result,
    dir_bytes,
    free_port,
    install_bytes,
    log,
    read_config,
    scalar_value,
    server,
    settle_mem,
    settled_dir_bytes,
    time_calls,
    version_of,
)

os.environ.setdefault("AIM_UI_TELEMETRY_ENABLED", "0")
os.environ.setdefault("AIM_TELEMETRY_ENABLED", "0")
RUN_OPTIONS = {"system_tracking_interval": None, "capture_terminal_logs": False, "log_system_params": False}


def init_repo(path: Path) -> None:
    from aim import Repo

    path.mkdir(parents=True, exist_ok=True)
    Repo.from_path(str(path), init=True)


def index(repo_path: Path, run_hashes: list[str]) -> None:
    """Make closed runs readable, as Aim's own indexer (``aim up``, ``aim storage reindex``) does."""
    from aim import Repo
    from aim.sdk.index_manager import RepoIndexManager

    manager = RepoIndexManager.get_index_manager(Repo.from_path(str(repo_path)))
    for run_hash in run_hashes:
        manager.index(run_hash)


def drain(run) -> None:
    """Wait until a remote run's client has sent everything queued (nothing to do for a local run)."""
    if getattr(run.repo, "is_remote_repo", False):
        run.repo._client.get_queue().wait_for_finish()


def track_stream(run, metrics: int, steps: int, limit_s: float) -> tuple[int, int]:
    """Track one dict of ``metrics`` values per step until ``limit_s``; answers (points, steps).

    Every 100 steps a remote run's queue is drained first, so that the time limit bounds what was stored,
    not only what was queued."""
    start = time.perf_counter()
    names = [f"m{m}" for m in range(metrics)]
    done = 0
    for s in range(steps):
        run.track({names[m]: scalar_value(m, s) for m in range(metrics)}, step=s)
        done = s + 1
        if s % 100 == 99:
            drain(run)
            if time.perf_counter() - start > limit_s:
                break
    return done * metrics, done


def w1(cfg: dict, res: Result, repo: str, label: str, index_path: Path | None) -> None:
    from aim import Run

    c = cfg["w1"]
    for r in range(cfg["repeats"]):
        with res.guard(f"w1.ingest.{label}"):
            start = time.perf_counter()
            run = Run(repo=repo, experiment=f"w1-{label}", **RUN_OPTIONS)
            points, done = track_stream(run, c["metrics"], c["steps"], c["peer_time_s"])
            run_hash = run.hash
            run.close()
            if index_path is not None:
                index(index_path, [run_hash])
            elapsed = time.perf_counter() - start
            res.add(f"w1.ingest.{label}", points / elapsed, "points/s", points=points, steps=done)
            log(f"aim w1 {label} #{r}: {points / elapsed:,.0f} points/s ({points:,} points in {elapsed:.1f} s)")


def w2(cfg: dict, res: Result, repo_path: Path) -> None:
    from aim import Run
    from aim.storage.context import Context

    steps, buckets = cfg["w1"]["steps"], cfg["w2"]["chart_buckets"]
    start = time.perf_counter()
    run = Run(repo=str(repo_path), experiment="w2", **RUN_OPTIONS)
    for s in range(steps):
        run.track(scalar_value(0, s), name="m0", step=s)
    run_hash = run.hash
    run.close()
    index(repo_path, [run_hash])
    res.add("w2.load", steps / (time.perf_counter() - start), "points/s", points=steps)
    for _ in range(cfg["repeats"]):
        begin = time.perf_counter()
        reader = Run(run_hash=run_hash, repo=str(repo_path), read_only=True)
        metric = reader.get_metric("m0", Context({}))
        iters, (values,) = metric.data.view("val").numpy()
        res.add("w2.read_full", time.perf_counter() - begin, "s", points=len(iters))
        if len(iters) != steps or abs(values[-1] - scalar_value(0, steps - 1)) > 1e-12:
            raise RuntimeError(f"read back {len(iters)} points, expected {steps}")
        begin = time.perf_counter()
        reader = Run(run_hash=run_hash, repo=str(repo_path), read_only=True)
        sampled_iters, _ = reader.get_metric("m0", Context({})).data.view("val").sample(buckets).numpy()
        res.add("w2.chart", time.perf_counter() - begin, "s", points=steps)
        if not buckets // 2 <= len(sampled_iters) <= buckets + 2:
            raise RuntimeError(f"sample has {len(sampled_iters)} points")
    res.note(
        "w2.chart",
        "metric.data.sample(1000): the first 1,000 points in storage order (Aim keys points by a "
        "hash of the step, so an effectively random subset), no aggregation",
    )


def w3(cfg: dict, res: Result, repo_path: Path) -> None:
    from aim import Repo, Run

    c = cfg["w3"]
    runs, metrics, steps = c["runs"], c["metrics"], c["steps"]
    names = [f"m{m}" for m in range(metrics)]
    start = time.perf_counter()
    open_runs = [Run(repo=str(repo_path), experiment="w3", **RUN_OPTIONS) for _ in range(runs)]
    done, chunk = 0, 100
    for first in range(0, steps, chunk):
        stop = min(steps, first + chunk)
        for run in open_runs:
            for s in range(first, stop):
                run.track({names[m]: scalar_value(m, s) for m in range(metrics)}, step=s)
        done = stop
        if time.perf_counter() - start > c["peer_time_s"]:
            break
    hashes = [run.hash for run in open_runs]
    for run in open_runs:
        run.close()
    index(repo_path, hashes)
    elapsed = time.perf_counter() - start
    points = runs * metrics * done
    res.add("w3.ingest", points / elapsed, "points/s", points=points, steps_per_run=done)
    log(f"aim w3: {points:,} points in {elapsed:.1f} s ({done} of {steps} steps per run)")
    for _ in range(cfg["repeats"]):
        begin = time.perf_counter()
        repo = Repo.from_path(str(repo_path))
        latest = {}
        for found in repo.query_runs("run.experiment == 'w3'", report_mode=0).iter_runs():
            info = found.run.collect_sequence_info(sequence_types="metric")
            latest[found.run.hash] = {t["name"]: t["values"]["last"] for t in info["metric"]}
        res.add("w3.latest", time.perf_counter() - begin, "s", runs=len(latest))
        if len(latest) != runs or any(len(v) != metrics for v in latest.values()):
            raise RuntimeError(f"latest values for {len(latest)} runs")
        value = next(iter(latest.values()))[f"m{metrics - 1}"]
        if abs(value - scalar_value(metrics - 1, done - 1)) > 1e-12:
            raise RuntimeError(f"latest value {value} is not the value at step {done - 1}")


def w6(cfg: dict, res: Result, repo: str, label: str) -> None:
    from aim import Run

    c = cfg["w6"]
    run = Run(repo=repo, experiment=f"w6-{label}", **RUN_OPTIONS)
    done = 0
    # a remote run drains its queue at a few hundred points a second when it closes: fewer calls
    cap = c["calls"] if label == "local" else min(c["calls"], c.get("mlflow_calls", 1000))
    for _ in range(cfg["repeats"]):
        us, calls = time_calls(lambda i: run.track(FIVE, step=i), cap, c["time_s"], first_step=done)
        done += calls
        res.add(f"w6.log_call.{label}", us, "us/call", calls=calls)
    start = time.perf_counter()
    run.close()
    res.add(f"w6.flush.{label}", time.perf_counter() - start, "s", calls=done)


def main() -> None:
    cfg = read_config()
    res = Result("aim")
    res.data["versions"] = {"aim": version_of("aim")}
    work = Path(cfg["work_dir"]) / "aim"
    shutil.rmtree(work, ignore_errors=True)  # every run starts from nothing
    work.mkdir(parents=True)
    budget = Budget(cfg.get("budget_s", 900))
    workloads = cfg.get("workloads", [])
    local = work / "local"
    with res.guard("setup"):
        init_repo(local)
    if "w1" in workloads:
        before = dir_bytes(local)
        w1(cfg, res, str(local), "local", local)
        entry = res.data["figures"].get("w1.ingest.local")
        if entry:
            stored = entry["points"] * len(entry["values"])
            size = settled_dir_bytes(local, cfg.get("settle_s", 2))
            res.add("w7.disk_per_million", (size - before) / stored * 1e6, "bytes", points=stored)
    for name, fn in (
        ("w2", lambda: w2(cfg, res, local)),
        ("w3", lambda: w3(cfg, res, local)),
        ("w6", lambda: w6(cfg, res, str(local), "local")),
    ):
        if name in workloads and not budget.over():
            with res.guard(name):
                fn()
    remote = work / "remote"
    if ("w1" in workloads or "w6" in workloads) and not budget.over():
        with res.guard("server"):
            init_repo(remote)
            port = free_port()
            argv = [
                str(Path(sys.executable).with_name("aim")),
                "server",
                "--repo",
                str(remote),
                "--host",
                LOOPBACK,
                "--port",
                str(port),
                "--yes",
            ]
            url = f"http://{LOOPBACK}:{port}"
            with server(argv, work / "server.log", url + "/client/get-version/", timeout=120) as proc:
                res.add("w7.mem_rest", settle_mem(proc.pid), "bytes")
                with PeakMem(proc.pid) as peak:
                    if "w1" in workloads:
                        w1(cfg, res, f"aim://{LOOPBACK}:{port}", "remote", None)
                res.add("w7.mem_peak_w1", peak.peak, "bytes")
                if "w6" in workloads and not budget.over():
                    with res.guard("w6.remote"):
                        w6(cfg, res, f"aim://{LOOPBACK}:{port}", "remote")
    res.add("w7.install_server", install_bytes("aim"), "bytes")
    res.emit()
    os._exit(0)  # Aim's remote-client threads can keep a finished interpreter waiting on a stopped server


if __name__ == "__main__":
    main()
