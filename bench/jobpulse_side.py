"""The jobpulse side of every workload, against a real ``jobpulse server`` process on loopback.

Run as a worker: ``python bench/jobpulse_side.py CONFIG_JSON`` prints one JSON result (see peers/common.py);
``measure(config)`` does the same in-process and returns the result dictionary.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

from common import (  # noqa: E402 - the shared helpers live beside the peers
    STEP_MS,
    SYSTEM_METRICS,
    T0_MS,
    Budget,
    PeakMem,
    Result,
    dir_bytes,
    install_bytes,
    log,
    log_message,
    mem_bytes,
    read_config,
    scalar_value,
    settle_mem,
    settled_dir_bytes,
    system_value,
)
from jobpulse_client import (  # noqa: E402 - beside this file
    JSON_NUMPY,
    PROJECT,
    Jobpulse,
    chart,
    columnar_bodies,
    ingest_arrow,
    ingest_columnar,
    ingest_jsonl,
    ingest_sdk,
    read_full,
    sdk_run,
    values_array,
)

# -- workload 1: scalar ingest ----------------------------------------------------------------------


def w1(jp: Jobpulse, cfg: dict, res: Result, server_pid: int, spool: Path) -> None:
    c = cfg["w1"]
    metrics, steps, batch = c["metrics"], c["steps"], c["batch_steps"]
    points = metrics * steps
    with PeakMem(server_pid) as peak:
        for path, fn in (
            ("columnar", lambda j: ingest_columnar(jp, j, metrics, steps, batch)),
            ("arrow", lambda j: ingest_arrow(jp, j, metrics, steps, batch)),
            ("jsonl", lambda j: ingest_jsonl(jp, j, metrics, steps, batch, prepared=True)),
            ("jsonl_python", lambda j: ingest_jsonl(jp, j, metrics, steps, batch, prepared=False)),
            ("sdk", lambda j: ingest_sdk(jp, j, metrics, steps, spool)),
        ):
            for r in range(cfg["repeats"]):
                job = f"w1-{path}-{r}"
                with res.guard(f"w1.{path}"):
                    elapsed = fn(job)
                    stored = jp.points(job)
                    if stored != points:
                        raise RuntimeError(f"{job}: {stored} points stored, {points} sent")
                    res.add(f"w1.ingest.{path}", points / elapsed, "points/s", points=points)
                    log(f"jobpulse w1 {path} #{r}: {points / elapsed:,.0f} points/s")
    res.add("w7.mem_peak_w1", peak.peak, "bytes")
    res.note(
        "w1.sdk",
        "jobpulse.init and run.log of 10 scalars a step; the SDK sends scalars as Arrow streams, since pyarrow is "
        "installed here (without it, or with send_arrow=False, as columnar JSON compressed with zstd)",
    )


# -- workload 2: read back ----------------------------------------------------------------------------


def check_full(iters: list, values: list, steps: int, metric: int) -> None:
    if len(iters) != steps or iters[0] != 0 or iters[-1] != steps - 1:
        raise RuntimeError(f"read back {len(iters)} points, expected {steps}")
    for i in (0, steps // 2, steps - 1):
        if abs(values[i] - scalar_value(metric, i)) > 1e-12:
            raise RuntimeError(f"point {i} is {values[i]}, expected {scalar_value(metric, i)}")


def check_chart(answer: dict, buckets: int) -> int:
    n = len(answer["series"][0]["x"]) if answer.get("series") else 0
    if not buckets // 2 <= n <= buckets:
        raise RuntimeError(f"chart has {n} buckets, asked for {buckets}")
    return n


def timed_charts(jp: Jobpulse, res: Result, name: str, job: str, buckets: int, points: int) -> None:
    """The chart of a series asked for twice: the first answer is computed (``NAME_first``), the second comes
    from the server's memory of recent answers (``NAME``). Each repeat charts a series of its own job, so
    its first answer finds nothing of the series in that memory (neither its extent nor a chart)."""
    with res.guard(name):
        for figure in (f"{name}_first", name):
            start = time.perf_counter()
            answer = chart(jp, job, "m0", buckets)
            res.add(figure, time.perf_counter() - start, "s", points=points)
            check_chart(answer, buckets)


def w2(jp: Jobpulse, cfg: dict, res: Result) -> None:
    steps, buckets = cfg["w1"]["steps"], cfg["w2"]["chart_buckets"]
    for r in range(cfg["repeats"]):
        job = f"w1-columnar-{r}"  # one job of workload 1 per repeat
        with res.guard("w2.read_full"):
            start = time.perf_counter()
            iters, values = read_full(jp, job, "m0")
            res.add("w2.read_full", time.perf_counter() - start, "s", points=len(iters))
            check_full(iters, values, steps, 0)
        timed_charts(jp, res, "w2.chart", job, buckets, steps)
    big = cfg["w2"]["big_points"]
    for r in range(cfg["repeats"]):
        job = f"w2-big-{r}"
        with res.guard("w2.chart_big"):
            start = time.perf_counter()
            for body, _n in columnar_bodies(job, 1, big, cfg["w2"]["big_batch"]):
                jp.ingest(body)
            res.add("w2.ingest_big", big / (time.perf_counter() - start), "points/s", points=big)
            log(f"jobpulse w2 loaded a {big:,}-point series")
        timed_charts(jp, res, "w2.chart_big", job, buckets, big)


# -- workload 3: many runs, latest values --------------------------------------------------------------


def w3(jp: Jobpulse, cfg: dict, res: Result) -> None:
    c = cfg["w3"]
    runs, metrics, steps = c["runs"], c["metrics"], c["steps"]
    jobs = [f"w3-run-{r:03d}" for r in range(runs)]
    per_request = max(1, c["points_per_request"] // (metrics * steps))
    with res.guard("w3.ingest"):
        iters = np.arange(steps, dtype=np.int64)
        ts = T0_MS + iters * STEP_MS
        cols = [values_array(m, 0, steps) for m in range(metrics)]
        start = time.perf_counter()
        for first in range(0, runs, per_request):
            series = [
                {"kind": "scalar", "job": job, "metric": f"m{m}", "iter": iters, "ts": ts, "value": cols[m]}
                for job in jobs[first : first + per_request]
                for m in range(metrics)
            ]
            jp.ingest(orjson.dumps({"project": PROJECT, "series": series}, option=JSON_NUMPY))
        elapsed = time.perf_counter() - start
        res.add("w3.ingest", runs * metrics * steps / elapsed, "points/s", points=runs * metrics * steps)
    for _ in range(cfg["repeats"]):
        with res.guard("w3.latest"):
            start = time.perf_counter()
            answer = orjson.loads(
                jp.http.post("/jp/v1/scalars/latest", orjson.dumps({"jobs": jobs}), "application/json")
            )
            res.add("w3.latest", time.perf_counter() - start, "s", runs=runs)
            got = answer["jobs"]
            if len(got) != runs or any(len(got[j]) != metrics for j in jobs):
                raise RuntimeError("latest values are missing for some runs or metrics")
            sample = got[jobs[-1]][metrics - 1]
            if (
                sample["iter"] != steps - 1
                or abs(float(sample["value"]) - scalar_value(metrics - 1, steps - 1)) > 1e-12
            ):
                raise RuntimeError(f"latest value is wrong: {sample}")


# -- workload 4: system metrics -----------------------------------------------------------------------------


def w4(jp: Jobpulse, cfg: dict, res: Result) -> None:
    c = cfg["w4"]
    gpus, per_worker, metrics, seconds = c["gpus"], c["gpus_per_worker"], c["metrics"], c["seconds"]
    t0 = cfg["sys_t0_ms"]
    samples = gpus * metrics * seconds
    sec = np.arange(seconds, dtype=np.int64)
    ts = t0 + sec * 1000
    for r in range(cfg["repeats"]):
        job = f"w4-sys-{r}"
        with res.guard("w4.ingest"):
            start = time.perf_counter()
            for w in range(gpus // per_worker):
                series = []
                for g in range(w * per_worker, (w + 1) * per_worker):
                    for m in range(metrics):
                        vals = 50.0 + m + (g % 8) + ((sec * 31 + g * 17 + m * 7) % 100) * 0.1
                        series.append(
                            {
                                "kind": "system",
                                "worker": f"worker-{w}",
                                "metric": SYSTEM_METRICS[m],
                                "device": str(g % per_worker),
                                "ts": ts,
                                "value": vals,
                            }
                        )
                jp.ingest(orjson.dumps({"project": PROJECT, "job": job, "series": series}, option=JSON_NUMPY))
            res.add("w4.ingest", samples / (time.perf_counter() - start), "samples/s", samples=samples)
    for r in range(cfg["repeats"]):
        # each repeat's own job: its first answer is computed, the same request again comes from memory
        with res.guard("w4.query"):
            for figure in ("w4.query_first", "w4.query"):
                start = time.perf_counter()
                answer = jp.http.get_json(
                    f"/jp/v1/jobs/w4-sys-{r}/system/series",
                    # the means only: what VictoriaMetrics' avg_over_time answers (min, max, last, count left out)
                    {"metric": "gpu_util", "start": t0, "end": t0 + seconds * 1000 - 1, "step": "1m", "fields": "avg"},
                )
                res.add(figure, time.perf_counter() - start, "s", series=len(answer["series"]))
                check_system(answer, gpus, per_worker, seconds, t0)


def check_system(answer: dict, gpus: int, per_worker: int, seconds: int, t0: int) -> None:
    series = answer["series"]
    if len(series) != gpus:
        raise RuntimeError(f"{len(series)} GPU series, expected {gpus}")
    one = series[0]
    if len(one["t"]) != seconds // 60 or one["t"][0] != t0:
        raise RuntimeError(f"{len(one['t'])} one-minute points from {one['t'][0]}, expected {seconds // 60}")
    gpu = int(one["worker"].split("-")[1]) * per_worker + int(one["device"])
    want = sum(system_value(0, gpu, s) for s in range(60)) / 60
    if abs(one["avg"][0] - want) > 1e-9:
        raise RuntimeError(f"first minute of {one['worker']}/{one['device']} is {one['avg'][0]}, expected {want}")


# -- workload 5: logs -------------------------------------------------------------------------------------


def w5(jp: Jobpulse, cfg: dict, res: Result) -> None:
    c = cfg["w5"]
    lines, workers, batch, tail = c["lines"], c["workers"], c["batch"], c["tail"]
    per_worker = lines // workers
    job = "w5-logs"
    with res.guard("w5.ingest"):
        start = time.perf_counter()
        for first in range(0, per_worker, batch // workers):
            stop = min(per_worker, first + batch // workers)
            seq = np.arange(first, stop, dtype=np.int64)
            series = [
                {
                    "kind": "log",
                    "worker": f"worker-{w}",
                    "seq": seq,
                    "ts": T0_MS + seq * 10 + w,
                    "level": "info",
                    "msg": [log_message(w, s) for s in range(first, stop)],
                }
                for w in range(workers)
            ]
            jp.ingest(orjson.dumps({"project": PROJECT, "job": job, "series": series}, option=JSON_NUMPY))
        res.add(
            "w5.ingest",
            per_worker * workers / (time.perf_counter() - start),
            "lines/s",
            lines=per_worker * workers,
        )
    for _ in range(cfg["repeats"]):
        with res.guard("w5.tail"):
            start = time.perf_counter()
            page = jp.http.get_json(f"/jp/v1/jobs/{job}/logs", {"worker": "worker-3", "start": "tail", "limit": tail})
            res.add("w5.tail", time.perf_counter() - start, "s", lines=len(page["lines"]))
            last = page["lines"][-1]
            if len(page["lines"]) != tail or last["worker"] != "worker-3" or last["seq"] != per_worker - 1:
                raise RuntimeError(f"tail is wrong: {len(page['lines'])} lines, last {last}")
        with res.guard("w5.search"):
            start = time.perf_counter()
            page = jp.http.get_json(f"/jp/v1/jobs/{job}/logs", {"q": "NaN-detected", "start": "tail", "limit": tail})
            res.add("w5.search", time.perf_counter() - start, "s", lines=len(page["lines"]))
            expected = min(tail, workers * (per_worker // 1000))
            if len(page["lines"]) != expected or "NaN-detected" not in page["lines"][-1]["msg"]:
                raise RuntimeError(f"search found {len(page['lines'])} lines, expected {expected}")


# -- workload 6: SDK cost per call ------------------------------------------------------------------------


def w6(jp: Jobpulse, cfg: dict, res: Result, spool: Path) -> None:

    c = cfg["w6"]
    for r in range(cfg["repeats"]):
        with res.guard("w6.log_call"):
            run = sdk_run(jp, f"w6-sdk-{r}", spool)
            log_call = run.log
            calls, limit = 0, time.perf_counter() + c["time_s"]
            start = time.perf_counter()
            while calls < c["calls"]:
                for i in range(calls, calls + 1000):
                    log_call(
                        {"loss": 0.5, "acc": 0.9, "lr": 3e-4, "grad_norm": 1.5, "tokens_per_s": 12345.0},
                        step=i,
                    )
                calls += 1000
                if time.perf_counter() > limit:
                    break
            elapsed = time.perf_counter() - start
            delivery = run.finish(timeout=600)
            res.add("w6.log_call", elapsed / calls * 1e6, "us/call", calls=calls)
            if delivery is not None and (delivery.spooled_events or delivery.dropped_events):
                raise RuntimeError(f"the SDK did not deliver everything: {delivery}")
            stored = jp.points(f"w6-sdk-{r}")
            if stored != calls * 5:
                raise RuntimeError(f"{stored} points stored, {calls * 5} logged")


# -- the whole side -----------------------------------------------------------------------------------------


def server_extras() -> list[str]:
    import importlib.metadata as md

    names = []
    for req in md.requires("jobpulse") or []:
        if 'extra == "server"' in req:
            names.append(req.split(";")[0].strip().split("=")[0].split(">")[0].split("<")[0].strip())
    return names


def measure(cfg: dict) -> dict[str, Any]:
    from jobpulse.testing import running_server
    from jobpulse.version import __version__ as version

    res = Result("jobpulse")
    res.data["versions"] = {"jobpulse": version, "chdb": _version("chdb"), "chdb-core": _version("chdb-core")}
    work = Path(cfg["work_dir"]) / "jobpulse"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spool = work / "spool"
    budget = Budget(cfg.get("budget_s", 1800))
    workloads = cfg.get("workloads", ["w1", "w2", "w3", "w4", "w5", "w6", "w7"])
    with running_server(work / "server") as srv:
        pid = srv.process.pid
        jp = Jobpulse(srv.url, srv.api_key)
        res.add("w7.mem_rest", settle_mem(pid), "bytes")
        data_dir = srv.data_dir
        before = dir_bytes(data_dir)
        steps = [
            ("w1", lambda: w1(jp, cfg, res, pid, spool)),
            ("w2", lambda: w2(jp, cfg, res)),
            ("w3", lambda: w3(jp, cfg, res)),
            ("w4", lambda: w4(jp, cfg, res)),
            ("w5", lambda: w5(jp, cfg, res)),
            ("w6", lambda: w6(jp, cfg, res, spool)),
        ]
        for name, fn in steps:
            if name not in workloads:
                continue
            if budget.over():
                res.error(name, "skipped: the time budget was spent")
                continue
            log(f"jobpulse {name}")
            fn()
            if name == "w1" and "w1.ingest.columnar" in res.data["figures"]:
                stored = (
                    sum(
                        len(res.data["figures"].get(f"w1.ingest.{p}", {}).get("values", []))
                        for p in ("columnar", "arrow", "jsonl", "jsonl_python", "sdk")
                    )
                    * cfg["w1"]["metrics"]
                    * cfg["w1"]["steps"]
                )
                res.add(
                    "w7.disk_per_million",
                    (settled_dir_bytes(data_dir, cfg.get("settle_s", 2)) - before) / stored * 1e6,
                    "bytes",
                    points=stored,
                )
        res.add("w7.mem_after", mem_bytes(pid), "bytes")
        jp.http.close()
    if "w7" in workloads:
        res.add("w7.install_sdk", install_bytes("jobpulse"), "bytes")
        res.add("w7.install_server", install_bytes("jobpulse", *server_extras()), "bytes")
    return res.data


def _version(name: str) -> str:
    import importlib.metadata as md

    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "not installed"


def main() -> None:
    cfg = read_config()
    data = measure(cfg)
    sys.stdout.write("\n" + orjson.dumps(data).decode() + "\n")


if __name__ == "__main__":
    main()
