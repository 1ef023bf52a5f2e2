"""The benchmark's jobpulse client: the HTTP wrapper, the request bodies of workload 1 and its ingest paths
(columnar JSON, Arrow, JSON lines, the SDK), and the reads of workload 2 (full history, chart).

``jobpulse_side.py`` runs the workloads with it; ``profile_jobpulse.py`` replays single steps.
"""

from __future__ import annotations

import sys
import time
import urllib.parse
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa

import jobpulse

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

from common import STEP_MS, T0_MS, Http  # noqa: E402 - the shared helpers live beside the peers

PROJECT = "bench"
JSON_NUMPY = orjson.OPT_SERIALIZE_NUMPY


def values_array(metric: int, start: int, stop: int) -> np.ndarray:
    """``scalar_value`` for a range of steps, vectorised (the same numbers, bit for bit)."""
    s = np.arange(start, stop, dtype=np.int64)
    return 1.0 / (1.0 + 1e-4 * s) + 0.01 * metric + ((s * 7919 + metric * 104729) % 1000) * 1e-6


class Jobpulse:
    def __init__(self, url: str, api_key: str) -> None:
        self.url, self.api_key = url, api_key
        self.http = Http(url, {"Authorization": f"Bearer {api_key}"})

    def ingest(self, body: bytes, content_type: str = "application/json", query: str = "") -> dict:
        answer = orjson.loads(self.http.post("/jp/v1/ingest" + query, body, content_type))
        if answer.get("rejected"):
            raise RuntimeError(f"ingest rejected events: {answer}")
        return answer

    def points(self, job: str) -> int:
        found = self.http.get_json(f"/jp/v1/jobs/{job}/scalars")
        return sum(v["points"] for m in found["metrics"] for v in m["variants"])


# -- workload 1: scalar ingest ----------------------------------------------------------------------


def columnar_bodies(job: str, metrics: int, steps: int, batch_steps: int, metric_offset: int = 0):
    """Request bodies of the columnar form, ``batch_steps`` steps of every metric each (encoded lazily)."""
    for start in range(0, steps, batch_steps):
        stop = min(steps, start + batch_steps)
        iters = np.arange(start, stop, dtype=np.int64)
        ts = T0_MS + iters * STEP_MS
        series = [
            {
                "kind": "scalar",
                "metric": f"m{m + metric_offset}",
                "iter": iters,
                "ts": ts,
                "value": values_array(m + metric_offset, start, stop),
            }
            for m in range(metrics)
        ]
        yield (
            orjson.dumps({"project": PROJECT, "job": job, "series": series}, option=JSON_NUMPY),
            metrics * (stop - start),
        )


def ingest_columnar(jp: Jobpulse, job: str, metrics: int, steps: int, batch_steps: int) -> float:
    start = time.perf_counter()
    for body, _n in columnar_bodies(job, metrics, steps, batch_steps):
        jp.ingest(body)
    return time.perf_counter() - start


def arrow_bodies(job: str, metrics: int, steps: int, batch_steps: int):
    """Request bodies of the Arrow form (one row per point), ``batch_steps`` steps of every metric each."""
    names = pa.array([f"m{m}" for m in range(metrics)])
    for start in range(0, steps, batch_steps):
        stop = min(steps, start + batch_steps)
        n = stop - start
        iters = np.arange(start, stop, dtype=np.int64)
        table = pa.table(
            {
                "metric": pa.DictionaryArray.from_arrays(np.repeat(np.arange(metrics, dtype=np.int32), n), names),
                "iter": np.tile(iters, metrics),
                "ts": np.tile(T0_MS + iters * STEP_MS, metrics),
                "value": np.concatenate([values_array(m, start, stop) for m in range(metrics)]),
            }
        )
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        yield sink.getvalue().to_pybytes(), metrics * n


def ingest_arrow(jp: Jobpulse, job: str, metrics: int, steps: int, batch_steps: int) -> float:
    start = time.perf_counter()
    query = f"?project={PROJECT}&job={job}&kind=scalar"
    for body, _n in arrow_bodies(job, metrics, steps, batch_steps):
        jp.ingest(body, "application/vnd.apache.arrow.stream", query)
    return time.perf_counter() - start


def jsonl_bodies(metrics: int, steps: int, batch_steps: int):
    """JSON-lines bodies, one object per point as a Python client writes it with orjson, ``batch_steps`` steps of
    every metric each."""
    dumps = orjson.dumps
    for first in range(0, steps, batch_steps):
        stop = min(steps, first + batch_steps)
        cols = [values_array(m, first, stop).tolist() for m in range(metrics)]
        lines = [
            dumps(
                {
                    "kind": "scalar",
                    "metric": f"m{m}",
                    "iter": s,
                    "ts": T0_MS + s * STEP_MS,
                    "value": cols[m][s - first],
                }
            )
            for s in range(first, stop)
            for m in range(metrics)
        ]
        yield b"\n".join(lines)


def ingest_jsonl(jp: Jobpulse, job: str, metrics: int, steps: int, batch_steps: int, prepared: bool) -> float:
    """Post JSON-lines bodies: written before the clock starts where ``prepared`` (a file of lines posted as it is,
    or lines from a shipper that is not Python), else written in the loop by Python as a training script would."""
    query = f"?project={PROJECT}&job={job}"
    bodies = list(jsonl_bodies(metrics, steps, batch_steps)) if prepared else None
    start = time.perf_counter()
    for body in bodies if bodies is not None else jsonl_bodies(metrics, steps, batch_steps):
        jp.ingest(body, "application/x-ndjson", query)
    return time.perf_counter() - start


def sdk_run(jp: Jobpulse, job: str, spool: Path) -> jobpulse.Run:
    """An SDK run of ``job`` against ``jp`` as the workloads start one: no console capture or signal handler,
    a spool of the benchmark's own that is not replayed, and time enough to deliver everything at the end."""
    return jobpulse.init(
        PROJECT,
        job,
        "worker-0",
        url=jp.url,
        api_key=jp.api_key,
        capture_console=False,
        handle_sigterm=False,
        spool_dir=spool,
        replay_spool=False,
        flush_timeout=600,
    )


def ingest_sdk(jp: Jobpulse, job: str, metrics: int, steps: int, spool: Path) -> float:

    names = [f"m{m}" for m in range(metrics)]
    cols = [values_array(m, 0, steps).tolist() for m in range(metrics)]
    start = time.perf_counter()
    run = sdk_run(jp, job, spool)
    log_call = run.log
    for s in range(steps):
        log_call({names[m]: cols[m][s] for m in range(metrics)}, step=s)
    delivery = run.finish(timeout=600)
    elapsed = time.perf_counter() - start
    if delivery is not None and (delivery.spooled_events or delivery.dropped_events):
        raise RuntimeError(f"the SDK did not deliver everything: {delivery}")
    return elapsed


# -- workload 2: read back ----------------------------------------------------------------------------


def read_full(jp: Jobpulse, job: str, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Every point's iteration and value as numpy arrays (what Aim's read answers), in pages of the points
    endpoint as Arrow IPC streams (``Accept: application/vnd.apache.arrow.stream``): no number parsing."""
    iters, values, cursor = [], [], ""
    for _ in range(1000):
        params = {"metric": metric, "limit": 200_000, "fields": "iter,value"}
        if cursor:
            params["cursor"] = cursor
        path = f"/jp/v1/jobs/{job}/scalars/points?" + urllib.parse.urlencode(params)
        status, body = jp.http.request("GET", path, headers={"Accept": "application/vnd.apache.arrow.stream"})
        if status != 200:
            raise RuntimeError(f"GET {path} answered {status}: {body[:300]!r}")
        page = pa.ipc.open_stream(body).read_all()
        iters.append(page.column("iter").to_numpy())
        values.append(page.column("value").to_numpy())
        cursor = page.schema.metadata[b"next_cursor"].decode()
        if not cursor:
            break
    return np.concatenate(iters), np.concatenate(values)


def chart(jp: Jobpulse, job: str, metric: str, buckets: int) -> dict:
    return jp.http.get_json(f"/jp/v1/jobs/{job}/scalars/chart", {"metric": metric, "buckets": buckets})
