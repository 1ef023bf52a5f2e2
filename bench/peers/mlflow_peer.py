"""MLflow: its tracking server on a SQLite backend store, driven by its own client.

Workloads: 1 (``log_batch``), 2 (``get_metric_history``; the chart through the server's sampled-history
endpoint ``get-history-bulk-interval``, the one MLflow's UI charts use), 3 (``search_runs`` answers every
run's latest metric values), 6 (``mlflow.log_metrics(..., synchronous=False)``: the asynchronous logger),
7 (server memory, SQLite bytes per point, install size).
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
    STEP_MS,
    T0_MS,
    Budget,
    Http,
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

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_LOGGING", "false")
BATCH = 1000  # the most metrics one log_batch request may carry


def metric_stream(metrics: int, steps: int, chunk: int):
    """(metric, first step, last step + 1) chunks in metric-major order (metric 0 complete first)."""
    for m in range(metrics):
        for start in range(0, steps, chunk):
            yield m, start, min(steps, start + chunk)


def ingest(client, run_id: str, metrics: int, steps: int, limit_s: float) -> tuple[int, float, int]:
    """Log the W1 stream until ``limit_s`` is spent; answers (points, seconds, steps of metric 0 stored)."""
    from mlflow.entities import Metric

    points, start = 0, time.perf_counter()
    m0_steps = 0
    for m, first, stop in metric_stream(metrics, steps, BATCH):
        batch = [Metric(f"m{m}", scalar_value(m, s), T0_MS + s * STEP_MS, s) for s in range(first, stop)]
        client.log_batch(run_id, metrics=batch, synchronous=True)
        points += len(batch)
        if m == 0:
            m0_steps = stop
        if time.perf_counter() - start > limit_s:
            break
    return points, time.perf_counter() - start, m0_steps


def main() -> None:
    cfg = read_config()
    res = Result("mlflow")
    res.data["versions"] = {"mlflow": version_of("mlflow")}
    work = Path(cfg["work_dir"]) / "mlflow"
    shutil.rmtree(work, ignore_errors=True)  # every run starts from nothing
    work.mkdir(parents=True)
    budget = Budget(cfg.get("budget_s", 900))
    port = free_port()
    url = f"http://{LOOPBACK}:{port}"
    db = work / "mlflow.db"
    argv = [
        str(Path(sys.executable).with_name("mlflow")),
        "server",
        "--backend-store-uri",
        f"sqlite:///{db}",
        "--default-artifact-root",
        str(work / "artifacts"),
        "--host",
        LOOPBACK,
        "--port",
        str(port),
    ]
    res.note("server", "mlflow server --backend-store-uri sqlite:///... (its default workers)")
    try:
        with server(argv, work / "server.log", url + "/health", timeout=180) as proc:
            run_all(cfg, res, url, proc.pid, db, budget)
    except Exception as exc:  # noqa: BLE001
        res.error("server", exc)
    res.add("w7.install_server", install_bytes("mlflow"), "bytes")
    res.emit()


def run_all(cfg: dict, res: Result, url: str, pid: int, db: Path, budget: Budget) -> None:
    import mlflow
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=url)
    res.add("w7.mem_rest", settle_mem(pid), "bytes")
    workloads = cfg.get("workloads", [])
    c1 = cfg["w1"]
    metrics, steps = c1["metrics"], c1["steps"]
    read_run = None
    if "w1" in workloads:
        exp = client.create_experiment("w1")
        stored = 0
        db_before = dir_bytes(db.parent)
        with PeakMem(pid) as peak:
            for r in range(cfg["repeats"]):
                with res.guard("w1.ingest"):
                    run_id = client.create_run(exp).info.run_id
                    points, elapsed, m0 = ingest(client, run_id, metrics, steps, c1["peer_time_s"])
                    stored += points
                    res.add("w1.ingest", points / elapsed, "points/s", points=points, path="log_batch")
                    log(f"mlflow w1 #{r}: {points / elapsed:,.0f} points/s ({points:,} points in {elapsed:.1f} s)")
                    if r == 0 and m0 == steps:
                        read_run = run_id
        res.add("w7.mem_peak_w1", peak.peak, "bytes")
        if stored:
            size = settled_dir_bytes(db.parent, cfg.get("settle_s", 2))
            res.add("w7.disk_per_million", (size - db_before) / stored * 1e6, "bytes", points=stored)
    if "w2" in workloads and not budget.over():
        with res.guard("w2"):
            if read_run is None:
                exp = client.create_experiment("w2")
                read_run = client.create_run(exp).info.run_id
                points, elapsed, _ = ingest(client, read_run, 1, steps, 1e9)
                res.add("w2.load", points / elapsed, "points/s", points=points)
            http = Http(url)
            for _ in range(cfg["repeats"]):
                start = time.perf_counter()
                history = client.get_metric_history(read_run, "m0")
                res.add("w2.read_full", time.perf_counter() - start, "s", points=len(history))
                if len(history) != steps or abs(history[-1].value - scalar_value(0, history[-1].step)) > 1e-12:
                    raise RuntimeError(f"history has {len(history)} points, expected {steps}")
                start = time.perf_counter()
                sampled = http.get_json(
                    "/ajax-api/2.0/mlflow/metrics/get-history-bulk-interval",
                    {"run_ids": read_run, "metric_key": "m0", "max_results": cfg["w2"]["chart_buckets"]},
                )
                res.add("w2.chart", time.perf_counter() - start, "s", points=steps)
                n = len(sampled.get("metrics", []))
                if not cfg["w2"]["chart_buckets"] // 2 <= n <= cfg["w2"]["chart_buckets"] + 2:
                    raise RuntimeError(f"sampled history has {n} points")
            res.note(
                "w2.chart",
                "get-history-bulk-interval (the sampled history MLflow's UI charts use): "
                "it picks points, it does not aggregate",
            )
    if "w3" in workloads and not budget.over():
        with res.guard("w3"):
            w3(client, cfg, res)
    if "w6" in workloads and not budget.over():
        with res.guard("w6.log_call"):
            mlflow.set_tracking_uri(url)
            c6 = cfg["w6"]
            calls_cap = min(c6["calls"], c6.get("mlflow_calls", 1000))
            with mlflow.start_run(experiment_id=client.create_experiment("w6")):
                done = 0
                for _ in range(cfg["repeats"]):
                    us, calls = time_calls(
                        lambda i: mlflow.log_metrics(FIVE, step=i, synchronous=False),
                        calls_cap,
                        c6["time_s"],
                        first_step=done,
                    )
                    done += calls
                    res.add("w6.log_call", us, "us/call", calls=calls, path="mlflow.log_metrics(synchronous=False)")
                flush = time.perf_counter()
            res.add("w6.flush", time.perf_counter() - flush, "s", calls=done)
            res.note(
                "w6.log_call",
                f"mlflow.log_metrics(..., synchronous=False), {calls_cap} calls per repeat "
                "(its queue then takes long to drain: see w6.flush)",
            )


def w3(client, cfg: dict, res: Result) -> None:
    from mlflow.entities import Metric

    c = cfg["w3"]
    runs, metrics, steps = c["runs"], c["metrics"], c["steps"]
    exp = client.create_experiment("w3")
    start = time.perf_counter()
    ids = [client.create_run(exp, run_name=f"w3-run-{r:03d}").info.run_id for r in range(runs)]
    chunk = max(1, BATCH // metrics // 5)  # 200 steps x 5 metrics = 1,000 metrics per request at most
    points, done = 0, 0
    for first in range(0, steps, chunk):
        stop = min(steps, first + chunk)
        for run_id in ids:
            batch = [
                Metric(f"m{m}", scalar_value(m, s), T0_MS + s * STEP_MS, s)
                for s in range(first, stop)
                for m in range(metrics)
            ]
            client.log_batch(run_id, metrics=batch, synchronous=True)
            points += len(batch)
        done = stop
        if time.perf_counter() - start > c["peer_time_s"]:
            break
    elapsed = time.perf_counter() - start
    res.add("w3.ingest", points / elapsed, "points/s", points=points, steps_per_run=done)
    log(f"mlflow w3: {points:,} points in {elapsed:.1f} s ({done} of {steps} steps per run)")
    for _ in range(cfg["repeats"]):
        begin = time.perf_counter()
        found = client.search_runs([exp], max_results=runs)
        res.add("w3.latest", time.perf_counter() - begin, "s", runs=len(found))
        if len(found) != runs or any(len(r.data.metrics) != metrics for r in found):
            raise RuntimeError("search_runs is missing runs or metrics")
        last = found[0].data.metrics[f"m{metrics - 1}"]
        if abs(last - scalar_value(metrics - 1, done - 1)) > 1e-12:
            raise RuntimeError(f"latest value {last} is not the value at step {done - 1}")


if __name__ == "__main__":
    main()
