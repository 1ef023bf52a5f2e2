"""Upgrading a store that holds data gives the answers a store created new gives for the same data."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from starlette.testclient import TestClient

from jobpulse.server import create_app
from jobpulse.settings import Settings
from jobpulse.store import SeriesWindow, Store, schema
from jobpulse.store.engine import EmbeddedEngine
from jobpulse.store.rollup_sql import (
    LATEST_SELECT,
    ROLLUP_LEVELS,
    STEP4_LEVELS,
    STEP16_LEVELS,
    by_worker,
    rollup_select,
)


def fresh_database() -> str:
    return f"upgrade_{uuid.uuid4().hex[:12]}"


T0 = 1_700_000_000_000 - 1_700_000_000_000 % 3_600_000  # a whole hour
SECONDS = 3 * 3600 + 125  # three hours and a bit, every 5 s


def _body() -> dict:
    iters = list(range(5000))
    series = [
        {
            "kind": "scalar",
            "metric": "loss",
            "variant": v,
            "iter": iters,
            "ts": [T0 + i * 100 for i in iters],
            "value": [((i * 37 + k) % 101) / 7 for i in iters],
        }
        for k, v in enumerate(("train", "eval"))
    ]
    ts = list(range(T0, T0 + SECONDS * 1000, 5000))
    for worker in ("worker-0", "worker-1"):
        for device in ("0", "1"):
            series.append(
                {
                    "kind": "system",
                    "worker": worker,
                    "metric": "gpu_util",
                    "device": device,
                    "ts": ts,
                    "value": [float((t // 5000 * 13 + int(device) * 7 + len(worker)) % 100) for t in ts],
                }
            )
    return {"project": "up", "job": "job-1", "series": series}


def _load(store: Store, tmp_path) -> None:  # noqa: ANN001
    token = store.keys.create("admin", ["*"], "admin")[1]
    app = create_app(store, Settings(data_dir=tmp_path, write_credentials=False))
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as client:
        answer = client.post("/jp/v1/ingest", json=_body())
        assert answer.status_code == 200, answer.text
        assert not answer.json().get("rejected")


def _load_as_written_then(engine: EmbeddedEngine, database: str) -> None:
    """The rows of ``_body`` inserted straight into the tables, as the writer of an older schema did;
    the views that schema defined build its rollups."""
    body = _body()
    for table, kind, per_series, per_point in (
        ("scalars", "scalar", ("metric", "variant"), {"iter": pa.int64(), "ts": pa.int64(), "value": pa.float64()}),
        ("system", "system", ("worker", "metric", "device"), {"ts": pa.int64(), "value": pa.float64()}),
    ):
        series = [s for s in body["series"] if s["kind"] == kind]
        columns: dict = {"job": [body["job"]] * sum(len(s["ts"]) for s in series)}
        columns.update({name: [s[name] for s in series for _ in s["ts"]] for name in per_series})
        columns.update({name: pa.array([v for s in series for v in s[name]], t) for name, t in per_point.items()})
        columns["ts"] = columns["ts"].cast(pa.timestamp("ms"))
        engine.insert(f"{database}.{table}", pa.table(columns))


def _rounded(answer: object) -> object:
    """``answer`` with its floats to 12 significant digits: sums taken in another order (SQL in an upgrade,
    numpy in the writer) may differ in their last bits."""
    if isinstance(answer, float):
        return float(f"{answer:.12g}")
    if isinstance(answer, dict):
        return {k: _rounded(v) for k, v in answer.items()}
    if isinstance(answer, (list, tuple)):
        return [_rounded(v) for v in answer]
    return answer


def _answers(store: Store) -> dict:
    return {
        "chart_iter": store.scalars.chart(["job-1"], "loss", buckets=40),
        "chart_time": store.scalars.chart(["job-1"], "loss", axis="time", buckets=20),
        "minutes": store.system.series("job-1", ["gpu_util"], SeriesWindow(T0, T0 + SECONDS * 1000, 300_000)),
        "hours": store.system.series("job-1", ["gpu_util"], SeriesWindow(T0, T0 + SECONDS * 1000, 3_600_000)),
    }


@pytest.fixture
def at_step_3(embedded_engine: EmbeddedEngine, tmp_path, monkeypatch: pytest.MonkeyPatch) -> str:  # noqa: ANN001
    """A database created by the first three schema steps and loaded with data as it was written then."""
    database = fresh_database()
    with monkeypatch.context() as patch:
        patch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:3])
        patch.setattr(schema, "SCHEMA_VERSION", 3)
        old = Store(embedded_engine, database)
        assert old.previous_version == 0
        _load_as_written_then(embedded_engine, database)
    return database


def test_step_4_keeps_charts_and_series(embedded_engine: EmbeddedEngine, at_step_3: str, tmp_path) -> None:  # noqa: ANN001
    upgraded = Store(embedded_engine, at_step_3)
    assert upgraded.previous_version == 3
    fresh = Store(embedded_engine, fresh_database())
    _load(fresh, tmp_path)
    got, want = _answers(upgraded), _answers(fresh)
    for name in want:
        assert _rounded(got[name]) == _rounded(want[name]), name
    assert len(want["hours"]) == 4 and len(want["hours"][0]["t"]) == 4
    assert want["chart_iter"]["series"] and len(want["chart_iter"]["series"]) == 2


def test_step_4_upgraded_rollups_keep_taking_new_samples(
    embedded_engine: EmbeddedEngine,
    at_step_3: str,
    tmp_path,  # noqa: ANN001
) -> None:
    upgraded = Store(embedded_engine, at_step_3)
    later = T0 + 4 * 3_600_000
    upgraded.engine.command(
        f"INSERT INTO {at_step_3}.system (job, worker, metric, device, ts, value) VALUES "
        "('job-1', 'worker-0', 'gpu_util', '0', fromUnixTimestamp64Milli({t:Int64}), 42)",
        {"t": later},
    )
    for step in (60_000, 3_600_000):
        window = SeriesWindow(later, later, step, workers=("worker-0",), devices=("0",))
        series = upgraded.system.series("job-1", ["gpu_util"], window)
        assert [(s["t"], s["avg"], s["last"], s["count"]) for s in series] == [([later], [42.0], [42.0], [1])]


def _step_before(marker: str) -> int:
    """How many schema steps come before the step that holds a statement with ``marker``."""
    return next(i for i, step in enumerate(schema.MIGRATIONS) if any(marker in statement for statement in step))


def _at_step(
    embedded_engine: EmbeddedEngine,
    monkeypatch: pytest.MonkeyPatch,
    steps: int,
    *,
    per_worker: bool = False,
    levels: dict[int, tuple[int, ...]] = ROLLUP_LEVELS,
) -> str:
    """A database created by the first ``steps`` schema steps, holding the points of ``_body`` as the writer of
    those steps stored them: the points (of the worker ""), their summary rows and their chart rollup (of
    ``levels``; keyed per worker too where ``per_worker``, as from the step that keyed scalars per worker on)."""
    database = fresh_database()
    with monkeypatch.context() as patch:
        patch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:steps])
        patch.setattr(schema, "SCHEMA_VERSION", steps)
        Store(embedded_engine, database)
    _load_as_written_then(embedded_engine, database)
    source = f"{database}.scalars FINAL"
    latest, rollup = LATEST_SELECT, rollup_select(source, levels=levels)
    if per_worker:
        latest, rollup = by_worker(latest), by_worker(rollup)
    embedded_engine.command(f"INSERT INTO {database}.scalars_latest " + latest.format(source=source))
    embedded_engine.command(f"INSERT INTO {database}.scalars_rollup " + rollup)
    return database


def test_step_8_counts_each_stored_point_of_a_series_once(embedded_engine: EmbeddedEngine, monkeypatch):  # noqa: ANN001
    database = _at_step(embedded_engine, monkeypatch, 7)
    # the summary rows the writer of step 7 added when the same iterations were reported a second time
    embedded_engine.command(f"INSERT INTO {database}.scalars_latest SELECT * FROM {database}.scalars_latest")
    upgraded = Store(embedded_engine, database)
    assert upgraded.previous_version == 7
    [loss] = upgraded.scalars.metrics("job-1")
    assert [(v["variant"], v["points"], v["first_iter"], v["last_iter"]) for v in loss["variants"]] == [
        ("eval", 5000, 0, 4999),
        ("train", 5000, 0, 4999),
    ]
    last = [((4999 * 37 + k) % 101) / 7 for k in (1, 0)]  # eval, train
    got = [(r["variant"], r["points"], r["iter"], r["value"]) for r in upgraded.scalars.latest(["job-1"])]
    assert got == [("eval", 5000, 4999, last[0]), ("train", 5000, 4999, last[1])]


def test_the_step_keying_scalars_per_worker_keeps_every_answer(
    embedded_engine: EmbeddedEngine,
    tmp_path,  # noqa: ANN001
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steps = _step_before("scalars_by_worker")
    database = _at_step(embedded_engine, monkeypatch, steps)
    upgraded = Store(embedded_engine, database)
    assert upgraded.previous_version == steps
    fresh = Store(embedded_engine, fresh_database())
    _load(fresh, tmp_path)
    got, want = _answers(upgraded), _answers(fresh)
    for name in want:
        assert _rounded(got[name]) == _rounded(want[name]), name
    assert upgraded.scalars.metrics("job-1") == fresh.scalars.metrics("job-1")
    assert upgraded.scalars.latest(["job-1"]) == fresh.scalars.latest(["job-1"])
    assert upgraded.scalars.count(["job-1"]) == 10_000
    keys = upgraded.engine.query(
        f"SELECT sorting_key FROM system.tables WHERE database = '{database}' AND name = 'scalars'"
    )
    assert keys.column("sorting_key")[0].as_py() == "job, metric, variant, worker, iter"


def test_the_step_keying_scalars_per_worker_keeps_each_workers_stored_points(
    embedded_engine: EmbeddedEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = _at_step(embedded_engine, monkeypatch, _step_before("scalars_by_worker"))
    embedded_engine.command(
        f"INSERT INTO {database}.scalars (job, metric, variant, iter, ts, value, worker) "
        "SELECT 'job-2', 'loss', '', number, fromUnixTimestamp64Milli(toInt64(1700000000000 + number)), number, "
        "'worker-3' FROM numbers(10)"
    )
    upgraded = Store(embedded_engine, database)
    assert upgraded.scalars.latest(["job-2"], workers="all") == [
        {
            "job": "job-2",
            "metric": "loss",
            "variant": "",
            "worker": "worker-3",
            "value": 9.0,
            "iter": 9,
            "ts": 1_700_000_000_009,
            "min": 0.0,
            "max": 9.0,
            "points": 10,
        }
    ]
    assert upgraded.scalars.chart(["job-2"], "loss", workers="all", buckets=2)["series"][0]["worker"] == "worker-3"


@pytest.mark.parametrize(
    ("marker", "levels_before"),
    [
        # the step capping the levels at 2**20 iterations and 2**26 ms: written up to 2**24 and 2**30 before it
        ("DELETE FROM {db}.scalars_rollup WHERE (axis", STEP4_LEVELS),
        # the step keeping every other level: written at every power of two before it
        ("DELETE FROM {db}.scalars_rollup WHERE level % 2", STEP16_LEVELS),
    ],
)
def test_the_steps_dropping_rollup_levels_keep_every_answer_and_drop_only_those_blocks(
    embedded_engine: EmbeddedEngine,
    tmp_path,  # noqa: ANN001
    monkeypatch: pytest.MonkeyPatch,
    marker: str,
    levels_before: dict[int, tuple[int, ...]],
) -> None:
    steps = _step_before(marker)
    # the chart rollup as the writer of that step stored it
    database = _at_step(embedded_engine, monkeypatch, steps, per_worker=True, levels=levels_before)
    levels = f"SELECT DISTINCT axis, level FROM {database}.scalars_rollup ORDER BY axis, level"
    assert {(r["axis"], r["level"]) for r in embedded_engine.query(levels).to_pylist()} == {
        (axis, level) for axis, of_axis in levels_before.items() for level in of_axis
    }
    upgraded = Store(embedded_engine, database)
    assert upgraded.previous_version == steps
    assert {(r["axis"], r["level"]) for r in embedded_engine.query(levels).to_pylist()} == {
        (axis, level) for axis, of_axis in ROLLUP_LEVELS.items() for level in of_axis
    }
    fresh = Store(embedded_engine, fresh_database())
    _load(fresh, tmp_path)
    got, want = _answers(upgraded), _answers(fresh)
    for name in want:
        assert _rounded(got[name]) == _rounded(want[name]), name
