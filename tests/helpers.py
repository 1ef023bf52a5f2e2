"""Small builders of ingest bodies used across tests."""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from jobpulse.sdk.run import Run
from jobpulse.testing import CHROMIUM, CHROMIUM_ARGS, ServerProcess  # noqa: F401 - the browser tests' binary and flags

NOW_MS = int(time.time() * 1000)


def lines(*events: dict[str, Any]) -> bytes:
    return b"\n".join(orjson.dumps(e) for e in events)


def post_lines(client: Any, *events: dict[str, Any], **params: str) -> Any:
    return client.post(
        "/jp/v1/ingest",
        params=params,
        content=lines(*events),
        headers={"Content-Type": "application/x-ndjson"},
    )


def post_columns(client: Any, body: dict[str, Any], **params: str) -> Any:
    return client.post(
        "/jp/v1/ingest",
        params=params,
        content=orjson.dumps(body),
        headers={"Content-Type": "application/json"},
    )


def scalar_series(
    job: str, metric: str, values: list, variant: str = "train", start: int = 0, project: str = "proj"
) -> dict[str, Any]:
    n = len(values)
    return {
        "project": project,
        "job": job,
        "series": [
            {
                "kind": "scalar",
                "metric": metric,
                "variant": variant,
                "iter": list(range(start, start + n)),
                "ts": [NOW_MS - 10_000_000 + i for i in range(start, start + n)],
                "value": values,
            }
        ],
    }


T0 = 1_790_000_040_000 - (1_790_000_040_000 % 60_000)  # a whole minute


def ingest_samples(
    client,
    worker: str,
    metric: str,
    device: str,
    values: list[float],
    every_ms: int = 10_000,
    job: str = "j1",
) -> None:
    body = {
        "project": "proj",
        "job": job,
        "series": [
            {
                "kind": "system",
                "worker": worker,
                "metric": metric,
                "device": device,
                "ts": [T0 + i * every_ms for i in range(len(values))],
                "value": values,
            }
        ],
    }
    assert post_columns(client, body).json()["accepted"] == len(values)


class CountingEngine:
    """The real engine, with a count of its queries and of those that read the chart rollup or the points."""

    def __init__(self, engine) -> None:  # noqa: ANN001
        self._engine = engine
        self.chart_reads = 0
        self.queries = 0

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self._engine, name)

    def query(self, sql: str, params=None):  # noqa: ANN001, ANN201
        self.queries += 1
        if "scalars_rollup" in sql or "scalars FINAL" in sql:
            self.chart_reads += 1
        return self._engine.query(sql, params)


class FailingInserts:
    """The real engine, except that inserts into ``table`` fail (a disk full, say) while ``failing`` is true."""

    def __init__(self, engine: Any, table: str) -> None:
        self._engine = engine
        self.table = table
        self.failing = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def insert(self, table: str, data: pa.Table, settings: dict[str, Any] | None = None) -> None:
        if self.failing and table.endswith("." + self.table):
            from jobpulse.errors import StoreUnavailable

            raise StoreUnavailable("storage engine error: no space left on device")
        self._engine.insert(table, data, settings)


def points_table(job: str, metric: str, iters: Any, values: Any, *, variant: str = "", ts_ms: Any = None) -> pa.Table:
    """Points of one series as the writer takes them; ``ts_ms`` defaults to 1,700,000,000,000 + iter."""
    iters = np.asarray(iters, dtype=np.int64)
    n = len(iters)
    return pa.table(
        {
            "job": [job] * n,
            "metric": [metric] * n,
            "variant": [variant] * n,
            "iter": pa.array(iters),
            "ts": pa.array(1_700_000_000_000 + iters if ts_ms is None else ts_ms, pa.int64()).cast(
                pa.timestamp("ms", tz="UTC")
            ),
            "value": pa.array(values, pa.float64()),
            "worker": [""] * n,
            "model_event": pa.array(np.zeros(n, dtype=np.uint8)),
        }
    )


def awkward_points(rng: np.random.Generator, job: str, start: int) -> pa.Table:
    """Points of three series interleaved row by row, 3,000 each from iteration ``start - 500``: negative
    iterations, times that go back, NaN and infinities, and a run of 200 values with none finite."""
    parts = []
    for k, (metric, variant) in enumerate((("loss", "train"), ("loss", "eval"), ("lr", ""))):
        iters = np.arange(start, start + 3000) - 500
        ts = 1_700_000_000_000 + iters * (137 + 400 * k) + rng.integers(-3000, 3000, size=len(iters))
        values = rng.normal(size=len(iters)) * 10**k
        values[rng.random(len(iters)) < 0.02] = np.nan
        values[rng.random(len(iters)) < 0.01] = np.inf
        values[100:300] = np.nan
        parts.append(points_table(job, metric, iters, values, variant=variant, ts_ms=ts))
    table = pa.concat_tables(parts)
    return table.take(pa.array(rng.permutation(table.num_rows)))


_databases = itertools.count()


def fresh_database() -> str:
    """A database name no other test of this process uses."""
    return f"t{os.getpid()}_{next(_databases)}"


def child_env(server: ServerProcess, tmp_path: Path, drop: tuple[str, ...] = ("JOBPULSE_",)) -> dict[str, str]:
    """The environment of a child process that reports to ``server``: this one's less the variables starting with
    ``drop``, with cache and config folders of its own under ``tmp_path``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        JOBPULSE_URL=server.url,
        JOBPULSE_API_KEY=server.api_key,
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
    )
    return env


def quiet_run(server: ServerProcess, project: str, job: str, spool: Path) -> Run:
    """An SDK run of ``job`` reporting to ``server`` that leaves the test process alone: no console capture, no
    SIGTERM handler, a spool of its own, nothing replayed from earlier runs."""
    return Run(
        project=project,
        job=job,
        url=server.url,
        api_key=server.api_key,
        capture_console=False,
        handle_sigterm=False,
        spool_dir=spool,
        replay_spool=False,
    )
