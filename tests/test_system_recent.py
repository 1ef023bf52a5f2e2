"""The in-memory per-minute rollup: series of the jobs this process wrote, answered without a query, equal to the
rollup's own answers."""

from __future__ import annotations

import math
import random

import pytest

from helpers import T0, CountingEngine, FailingInserts, post_columns
from jobpulse.store import SeriesWindow, Store
from jobpulse.store.columns import columns_to_arrow

HOUR = 3_600_000
T0_HOUR = T0 - T0 % HOUR


def _post(client, job: str, samples: list[tuple[str, str, str, int, float]]) -> None:  # noqa: ANN001
    """Post (worker, metric, device, ts, value) samples of ``job`` as one columnar batch."""
    by_series: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    for worker, metric, device, ts, value in samples:
        by_series.setdefault((worker, metric, device), []).append((ts, value))
    series = [
        {
            "kind": "system",
            "worker": worker,
            "metric": metric,
            "device": device,
            "ts": [ts for ts, _ in points],
            "value": [_json_number(value) for _, value in points],
        }
        for (worker, metric, device), points in by_series.items()
    ]
    answer = post_columns(client, {"project": "proj", "job": job, "series": series})
    assert answer.status_code == 200, answer.text


def _json_number(value: float) -> float | str:
    """``value`` as the ingest API takes it in JSON: NaN and the infinities spelled out."""
    if math.isnan(value):
        return "NaN"
    return value if math.isfinite(value) else "Infinity" if value > 0 else "-Infinity"


def _from_tables(store: Store, job: str, metrics: list[str], window: SeriesWindow) -> list[dict]:
    """What the rollup tables answer: a store over the same database that keeps nothing in memory."""
    return Store(store.engine, store.database, recent_system_cells=0, sees_every_write=False).system.series(
        job, metrics, window
    )


def _same(found: list[dict], expected: list[dict]) -> bool:
    """Equal series, means within rounding (the engine may add a bucket's sums in another order), NaN equal to NaN."""
    if [[s[k] for k in ("worker", "metric", "device", "t", "count")] for s in found] != [
        [s[k] for k in ("worker", "metric", "device", "t", "count")] for s in expected
    ]:
        return False
    for a, b in zip(found, expected, strict=True):
        for field in ("avg", "min", "max", "last"):
            for x, y in zip(a[field], b[field], strict=True):
                if not (math.isnan(x) and math.isnan(y)) and x != pytest.approx(y, rel=1e-12, abs=1e-12):
                    return False
    return True


def test_a_series_of_a_job_written_here_is_answered_without_a_query(client, store):
    _post(client, "j1", [("w0", "gpu_util", "0", T0 + i * 10_000, float(i)) for i in range(18)])
    counting = CountingEngine(store.engine)
    store.system._engine = counting
    window = SeriesWindow(T0, T0 + 179_999, 60_000)
    found = store.system.series("j1", ["gpu_util"], window)
    assert counting.queries == 0
    assert found == _from_tables(store, "j1", ["gpu_util"], window)
    assert found[0]["avg"] == [2.5, 8.5, 14.5] and found[0]["last"] == [5.0, 11.0, 17.0]


def test_every_window_of_the_memory_equals_the_rollups_answer(client, store):
    """Batches out of time order, samples sent again, NaN and infinities, several workers, metrics and devices:
    every window at whole minutes or hours, with and without filters, is the rollup's answer."""
    rng = random.Random(7)
    keys = [(w, m, d) for w in ("w0", "w1", "w10") for m in ("gpu_util", "power") for d in ("0", "1", "")]
    sent = []
    for _ in range(16):
        batch = []
        # over the three hours, or dense in a few minutes (several samples of a series in one minute)
        lo, span = rng.choice([(0, 3 * HOUR), (rng.randrange(0, 3 * HOUR - 300_000, 60_000), 300_000)])
        for _ in range(rng.randint(1, 300)):
            worker, metric, device = rng.choice(keys)
            ts = T0_HOUR + lo + rng.randrange(0, span, 1000)
            value = rng.choice([rng.uniform(-5, 100), float(rng.randint(0, 3)), math.nan, math.inf, -math.inf])
            batch.append((worker, metric, device, ts, value))
            if rng.random() < 0.05:  # another value at the same time, in the same batch
                batch.append((worker, metric, device, ts, rng.choice([math.nan, rng.uniform(-5, 100)])))
        batch += rng.sample(sent, min(len(sent), 20))  # resent: stored once
        sent += batch
        _post(client, "j1", batch)
    windows = [
        SeriesWindow(T0_HOUR, T0_HOUR + 3 * HOUR - 1, 60_000),
        SeriesWindow(T0_HOUR + 60_000, T0_HOUR + 2 * HOUR + 1234, 60_000),
        SeriesWindow(T0_HOUR + 120_000, T0_HOUR + 3 * HOUR, 300_000),
        SeriesWindow(T0_HOUR - 60_000, T0_HOUR + 100 * 60_000 + 1, 420_000),
        SeriesWindow(T0_HOUR, T0_HOUR + 2 * HOUR + 5, HOUR),
        SeriesWindow(T0_HOUR - HOUR, T0_HOUR + 4 * HOUR, 2 * HOUR),
        SeriesWindow(T0_HOUR, T0_HOUR + 3 * HOUR, 60_000, ("w1", "w10")),
        SeriesWindow(T0_HOUR, T0_HOUR + 3 * HOUR, 600_000, None, ("", "1")),
        SeriesWindow(T0_HOUR + 4 * HOUR, T0_HOUR + 5 * HOUR, 60_000),
    ]
    for metrics in (["gpu_util"], ["gpu_util", "power"]):
        for window in windows:
            found = store.system._recent.series("j1", metrics, window)
            assert found is not None
            assert _same(found, _from_tables(store, "j1", metrics, window)), (metrics, window)


def test_a_job_stored_before_this_process_is_read_from_the_tables(client, store, embedded_engine):
    _post(client, "j1", [("w0", "gpu_util", "0", T0 + i * 10_000, float(i)) for i in range(6)])
    restarted = Store(embedded_engine, store.database)
    restarted.writer.write(store_batch("j1", [("w0", "gpu_util", "0", T0 + 60_000, 100.0)]))
    window = SeriesWindow(T0, T0 + 119_999, 60_000)
    assert restarted.system._recent.series("j1", ["gpu_util"], window) is None
    assert restarted.system.series("j1", ["gpu_util"], window)[0]["avg"] == [2.5, 100.0]


def store_batch(job: str, samples: list[tuple[str, str, str, int, float]]) -> dict:
    """The tables the writer takes for ``samples`` of ``job``."""
    worker, metric, device, ts, value = (list(column) for column in zip(*samples, strict=True))
    names = {"worker": worker, "metric": metric, "device": device, "ts": ts, "value": value}
    return {"system": columns_to_arrow("system", {"job": [job] * len(samples), **names})}


def test_deleting_a_jobs_data_ends_its_memory_and_new_samples_start_it_again(client, store):
    _post(client, "j1", [("w0", "gpu_util", "0", T0 + i * 10_000, 1.0) for i in range(6)])
    window = SeriesWindow(T0, T0 + 119_999, 60_000)
    store.jobs.delete_data("j1")
    assert store.system._recent.series("j1", ["gpu_util"], window) is None
    assert store.system.series("j1", ["gpu_util"], window) == []
    _post(client, "j1", [("w0", "gpu_util", "0", T0 + 60_000, 7.0)])
    kept = store.system._recent.series("j1", ["gpu_util"], window)
    assert kept == _from_tables(store, "j1", ["gpu_util"], window) and kept[0]["avg"] == [7.0]


def test_the_jobs_written_longest_ago_leave_the_memory_first(embedded_engine):
    store = Store(embedded_engine, f"recent{random.randrange(1 << 30)}", recent_system_cells=5)
    window = SeriesWindow(T0, T0 + 10 * 60_000, 60_000)
    for job, minutes in (("a", 3), ("b", 2)):
        store.writer.write(store_batch(job, [("w0", "m", "0", T0 + i * 60_000, float(i)) for i in range(minutes)]))
    assert store.system._recent.cells == 5
    store.writer.write(store_batch("a", [("w0", "m", "0", T0 + 3 * 60_000, 3.0)]))  # a: 4 minutes
    assert store.system._recent.series("b", ["m"], window) is None  # 4 + 2 > 5: b went, a stays
    assert store.system._recent.series("a", ["m"], window)[0]["avg"] == [0.0, 1.0, 2.0, 3.0]
    assert store.system._recent.cells == 4
    store.writer.write(store_batch("b", [("w0", "m", "0", T0 + 2 * 60_000, 2.0)]))  # no longer kept
    assert store.system._recent.cells == 4
    assert store.system.series("b", ["m"], window)[0]["avg"] == [0.0, 1.0, 2.0]
    embedded_engine.command(f"DROP DATABASE {store.database}")


def test_a_failed_insert_ends_the_memory_of_its_job(client, store):
    _post(client, "j1", [("w0", "gpu_util", "0", T0, 1.0)])
    failing = FailingInserts(store.engine, "system")
    store.writer._engine = failing
    with pytest.raises(Exception, match="no space left"):
        store.writer.write(store_batch("j1", [("w0", "gpu_util", "0", T0 + 60_000, 2.0)]))
    failing.failing = False
    store.writer.write(store_batch("j1", [("w0", "gpu_util", "0", T0 + 120_000, 3.0)]))
    window = SeriesWindow(T0, T0 + 179_999, 60_000)
    assert store.system._recent.series("j1", ["gpu_util"], window) is None
    assert store.system.series("j1", ["gpu_util"], window)[0]["avg"] == [1.0, 3.0]


def test_a_store_that_does_not_see_every_write_keeps_nothing_in_memory(embedded_engine, store):
    replica = Store(embedded_engine, store.database, sees_every_write=False)
    assert replica.system._recent is None
