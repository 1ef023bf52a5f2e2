"""The chart rollup's coarse blocks kept in memory: charts of the jobs this process wrote, computed without a query,
equal to the rollup's own answers."""

from __future__ import annotations

import math
import random

import numpy as np
import pyarrow as pa
import pytest

from helpers import CountingEngine, FailingInserts, points_table
from jobpulse.store import Store
from jobpulse.store.chart_recent import RecentCharts

FINE = {0: 6, 1: 12}  # the finest levels of the rollup, so that small series are kept too


def _keep_fine_levels(store: Store, blocks: int = 10_000_000) -> RecentCharts:
    """Give ``store`` (before its first write) a memory of every level of the rollup."""
    recent = RecentCharts(blocks, store.changes.deletions, levels=FINE)
    store.scalars._recent = store.writer._charts = recent
    return recent


def _write(store: Store, *tables: pa.Table) -> None:
    store.writer.write({"scalars": pa.concat_tables(tables)})


def _from_tables(store: Store, jobs: list[str], asked: list, axis: str, buckets: int) -> list[dict]:
    """What the rollup table answers: a store over the same database that keeps nothing in memory."""
    replica = Store(store.engine, store.database, recent_chart_blocks=0, sees_every_write=False)
    return replica.scalars.charts(jobs, asked, axis=axis, buckets=buckets)


def _same(found: list[dict], expected: list[dict]) -> bool:
    """Equal charts, NaN equal to NaN, means within rounding (the engine may add a bucket's sums in another
    order)."""

    def equal(a: object, b: object, rel: float) -> bool:
        if isinstance(a, float) and isinstance(b, float):
            return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=rel)
        return a == b

    def alike(a: dict, b: dict) -> bool:
        def values_alike(k: str) -> bool:
            if not isinstance(a[k], list):
                return a[k] == b[k]
            rel = 1e-9 if k == "mean" else 0
            return len(a[k]) == len(b[k]) and all(equal(u, v, rel) for u, v in zip(a[k], b[k], strict=True))

        return a.keys() == b.keys() and all(values_alike(k) for k in a)

    return len(found) == len(expected) and all(
        {k: v for k, v in a.items() if k != "series"} == {k: v for k, v in b.items() if k != "series"}
        and len(a["series"]) == len(b["series"])
        and all(alike(x, y) for x, y in zip(a["series"], b["series"], strict=True))
        for a, b in zip(found, expected, strict=True)
    )


def test_the_chart_of_a_long_series_written_here_is_computed_without_a_query(store):
    _write(store, points_table("j1", "loss", np.arange(300_000), np.sin(np.arange(300_000) / 1000)))
    counting = CountingEngine(store.engine)
    store.scalars._engine = counting
    found = store.scalars.charts(["j1"], [("loss", None, None, None)], axis="iter", buckets=100)
    assert counting.queries == 0  # the extent from the catalogue, the buckets from the memory
    assert _same(found, _from_tables(store, ["j1"], [("loss", None, None, None)], "iter", 100))
    assert found[0]["bucket_width"] == 3072 and len(found[0]["series"][0]["x"]) == 98  # blocks of 512


def test_every_chart_of_the_memory_equals_the_rollups_answer(store):
    """Batches out of order, points sent again alike or with other values, NaN and infinities, two jobs, several
    series: every chart read from kept levels, on both axes, with and without variants named, is the table's."""
    recent = _keep_fine_levels(store)
    rng = np.random.default_rng(11)
    series = [("j1", "loss", "train"), ("j1", "loss", "eval"), ("j1", "lr", ""), ("j2", "loss", "train")]
    sent: list[pa.Table] = []
    for _ in range(12):
        parts = []
        for job, metric, variant in series:
            start = int(rng.integers(-2_000, 60_000))
            iters = np.arange(start, start + int(rng.integers(1, 8_000)))
            ts = 1_700_000_000_000 + iters * 1_000 + rng.integers(-5_000, 5_000, len(iters))
            values = rng.normal(size=len(iters)) * 100
            values[rng.random(len(iters)) < 0.02] = np.nan
            values[rng.random(len(iters)) < 0.01] = rng.choice([np.inf, -np.inf])
            parts.append(points_table(job, metric, iters, values, variant=variant, ts_ms=ts))
        if sent and rng.random() < 0.5:
            parts.append(sent[int(rng.integers(len(sent)))])  # sent again: points alike, or replaced since
        batch = pa.concat_tables(parts)
        batch = batch.take(pa.array(rng.permutation(batch.num_rows)))
        sent.append(batch)
        _write(store, batch)
    served = []
    chart = recent.chart
    recent.chart = lambda *args, **kwargs: served.append(chart(*args, **kwargs)) or served[-1]  # type: ignore[method-assign]
    random_windows = random.Random(5)
    for axis in ("iter", "time"):
        for jobs in (["j1"], ["j1", "j2"]):
            for variants in (None, ["train"], ["eval", "train", "absent"]):
                for _ in range(6):
                    buckets = random_windows.choice([5, 20, 60, 150])
                    if axis == "iter":
                        lo = random_windows.randrange(-3_000, 40_000)
                        x_range = (lo, lo + random_windows.randrange(20_000, 80_000))
                    else:
                        lo = 1_700_000_000_000 + random_windows.randrange(-3_000_000, 40_000_000)
                        x_range = (lo, lo + random_windows.randrange(20_000_000, 80_000_000))
                    asked = [("loss", variants, *random_windows.choice([x_range, (None, None)]))]
                    store.scalars._memory._entries.clear()
                    found = store.scalars.charts(jobs, asked, axis=axis, buckets=buckets)
                    expected = _from_tables(store, jobs, asked, axis, buckets)
                    assert _same(found, expected), (axis, jobs, asked, buckets)
    assert sum(table is not None for table in served) >= 60  # most were answered by the memory
    stored = (
        store.engine.query(
            f"""SELECT count() AS n FROM (SELECT DISTINCT job, metric, variant, axis, level, block
        FROM {store.database}.scalars_rollup WHERE level >= if(axis = 0, {FINE[0]}, {FINE[1]}))"""
        )
        .column("n")[0]
        .as_py()
    )
    assert stored <= recent.blocks <= 2 * stored  # a block in a few runs at most


def test_points_replaced_by_points_at_other_times_leave_no_bucket_behind(store):
    _keep_fine_levels(store)
    iters = np.arange(20_000)
    _write(store, points_table("j1", "loss", iters, np.ones(20_000), ts_ms=1_700_000_000_000 + iters * 1_000))
    later = 1_800_000_000_000 + iters * 1_000  # the same iterations, reported again 3 years on
    _write(store, points_table("j1", "loss", iters, np.full(20_000, 2.0), ts_ms=later))
    asked = [("loss", None, 1_700_000_000_000, 1_800_000_000_000 + 20_000_000)]
    found = store.scalars.charts(["j1"], asked, axis="time", buckets=50)
    assert _same(found, _from_tables(store, ["j1"], asked, "time", 50))
    (series,) = found[0]["series"]
    assert series["mean"] == [2.0] and series["count"] == [20_000]  # the taken-out buckets are not answered


def test_a_job_stored_before_this_process_is_read_from_the_table(store, embedded_engine):
    _write(store, points_table("j1", "loss", np.arange(300_000), np.ones(300_000)))
    restarted = Store(embedded_engine, store.database)
    _write(restarted, points_table("j1", "loss", np.arange(300_000, 310_000), np.full(10_000, 3.0)))
    assert (
        restarted.scalars._recent.chart(["j1"], "loss", None, axis=0, level=8, blocks=(0, 1400), lo=0, width=3328)
        is None
    )
    chart = restarted.scalars.charts(["j1"], [("loss", None, None, None)], axis="iter", buckets=100)[0]
    assert chart["series"][0]["mean"][-1] == 3.0 and chart["series"][0]["count"][0] == 3328


def test_deleting_a_jobs_data_ends_its_memory_and_new_points_start_it_again(store):
    recent = _keep_fine_levels(store)
    _write(store, points_table("j1", "loss", np.arange(10_000), np.ones(10_000)))
    store.jobs.delete_data("j1")
    blocks = {"axis": 0, "level": 6, "blocks": (0, 200), "lo": 0, "width": 256}
    assert recent.chart(["j1"], "loss", None, **blocks) is None
    _write(store, points_table("j1", "loss", np.arange(5_000), np.full(5_000, 2.0)))
    kept = recent.chart(["j1"], "loss", None, **blocks)
    assert kept is not None and kept.column("mean").to_pylist() == [2.0] * 20
    assert kept.column("count").to_pylist() == [256] * 19 + [5_000 - 19 * 256]


def test_the_jobs_written_longest_ago_leave_the_memory_first(store):
    recent = _keep_fine_levels(store, blocks=300)
    for job in ("a", "b"):  # 10,000 iterations (and 10 s): about 225 blocks at the levels kept
        _write(store, points_table(job, "loss", np.arange(10_000), np.ones(10_000)))
    blocks = {"axis": 0, "level": 6, "blocks": (0, 200), "lo": 0, "width": 256}
    assert recent.chart(["a"], "loss", None, **blocks) is None
    assert recent.chart(["b"], "loss", None, **blocks) is not None
    assert 0 < recent.blocks <= 300
    _write(store, points_table("a", "loss", np.arange(10_000, 10_100), np.ones(100)))  # no longer kept
    assert recent.chart(["a"], "loss", None, **blocks) is None


def test_a_failed_insert_ends_the_memory_of_its_job(store):
    recent = _keep_fine_levels(store)
    _write(store, points_table("j1", "loss", np.arange(10_000), np.ones(10_000)))
    failing = FailingInserts(store.engine, "scalars")
    store.writer._engine = failing
    with pytest.raises(Exception, match="no space left"):
        _write(store, points_table("j1", "loss", np.arange(10_000, 20_000), np.full(10_000, 5.0)))
    failing.failing = False
    _write(store, points_table("j1", "loss", np.arange(20_000, 30_000), np.full(10_000, 3.0)))
    assert recent.chart(["j1"], "loss", None, axis=0, level=6, blocks=(0, 500), lo=0, width=256) is None
    found = store.scalars.charts(["j1"], [("loss", None, None, None)], axis="iter", buckets=10)
    assert _same(found, _from_tables(store, ["j1"], [("loss", None, None, None)], "iter", 10))
    assert set(found[0]["series"][0]["mean"]) == {1.0, 3.0}  # none of the points whose insert failed


def test_a_store_that_does_not_see_every_write_keeps_nothing(store):
    replica = Store(store.engine, store.database, sees_every_write=False)
    assert replica.scalars._recent is None and replica.writer._charts is None
    assert Store(store.engine, store.database, recent_chart_blocks=0).scalars._recent is None


def test_a_batch_of_more_jobs_than_one_merge_takes_keeps_each_job_as_the_table_does(store, monkeypatch):
    import jobpulse.store.chart_recent as chart_recent

    monkeypatch.setattr(chart_recent, "_JOBS_AT_ONCE", 2)
    _keep_fine_levels(store)
    jobs = [f"j{k}" for k in range(5)]
    for start in (0, 3_000):  # two batches, each of the five jobs
        _write(
            store,
            *(
                points_table(job, "loss", np.arange(start, start + 3_000), np.full(3_000, float(k)))
                for k, job in enumerate(jobs)
            ),
        )
    asked = [("loss", None, None, None)]
    counting = CountingEngine(store.engine)
    store.scalars._engine = counting
    found = store.scalars.charts(jobs, asked, axis="iter", buckets=20)
    assert counting.chart_reads == 0  # every job's buckets from the memory
    assert _same(found, _from_tables(store, jobs, asked, "iter", 20))
    assert [s["mean"][0] for s in found[0]["series"]] == [0.0, 1.0, 2.0, 3.0, 4.0]
