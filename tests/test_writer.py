"""The writer's handling of points that repeat an iteration, within one batch or against stored ones."""

from __future__ import annotations

import pyarrow as pa

from helpers import CountingEngine, points_table
from jobpulse.store import Store


def _points(job: str, metric: str, iters: list[int], values: list[float], variant: str = "") -> pa.Table:
    return points_table(job, metric, iters, values, variant=variant)


def _stored(store: Store, job: str, metric: str, variant: str = "") -> dict[int, float]:
    page, _ = store.scalars.page(job, metric, variant=variant)
    return dict(zip(page["iter"], page["value"], strict=True))


def _bucket(store: Store, job: str, metric: str) -> dict:
    series = store.scalars.chart([job], metric, buckets=1)["series"][0]
    return {"count": series["count"][0], "mean": series["mean"][0]}


def test_an_iteration_repeated_within_a_batch_keeps_its_last_row(store: Store) -> None:
    batch = _points("j", "loss", [3, 1, 2, 1, 3, 0], [30.0, 10.0, 20.0, 11.0, 31.0, 0.0])
    assert store.writer.write({"scalars": batch}) == {"scalars": 4}
    assert _stored(store, "j", "loss") == {0: 0.0, 1: 11.0, 2: 20.0, 3: 31.0}
    assert _bucket(store, "j", "loss") == {"count": 4, "mean": (0.0 + 11.0 + 20.0 + 31.0) / 4}


def test_iterations_out_of_order_but_distinct_are_all_kept(store: Store) -> None:
    batch = _points("j", "loss", [5, 4, 3, 2, 1], [5.0, 4.0, 3.0, 2.0, 1.0])
    assert store.writer.write({"scalars": batch}) == {"scalars": 5}
    assert _stored(store, "j", "loss") == {1: 1.0, 2: 2.0, 3: 3.0, 4: 4.0, 5: 5.0}


def test_a_batch_overlapping_the_middle_of_a_stored_series_replaces_only_those_points(store: Store) -> None:
    store.writer.write({"scalars": _points("j", "loss", list(range(100)), [1.0] * 100)})
    store.writer.write({"scalars": _points("j", "acc", list(range(100)), [1.0] * 100)})
    batch = pa.concat_tables(
        [
            _points("j", "loss", list(range(40, 60)), [3.0] * 20),  # replaces 20 stored points
            _points("j", "acc", list(range(100, 110)), [2.0] * 10),  # new points above the stored ones
        ]
    )
    assert store.writer.write({"scalars": batch}) == {"scalars": 30}
    assert _bucket(store, "j", "loss") == {"count": 100, "mean": (80 * 1.0 + 20 * 3.0) / 100}
    assert _bucket(store, "j", "acc") == {"count": 110, "mean": (100 * 1.0 + 10 * 2.0) / 110}


def test_series_whose_names_join_alike_stay_apart(store: Store) -> None:
    batch = pa.concat_tables(
        [
            _points("ab", "c", [0, 1], [1.0, 2.0]),
            _points("a", "bc", [0, 1], [5.0, 6.0]),
            _points("a", "b", [0, 1], [7.0, 8.0], variant="c"),
        ]
    )
    assert store.writer.write({"scalars": batch}) == {"scalars": 6}
    store.writer.write({"scalars": _points("a", "bc", [1], [9.0])})  # replaces one point of one series only
    assert _stored(store, "ab", "c") == {0: 1.0, 1: 2.0}
    assert _stored(store, "a", "bc") == {0: 5.0, 1: 9.0}
    assert _stored(store, "a", "b", variant="c") == {0: 7.0, 1: 8.0}


def test_points_above_the_stored_ones_are_written_without_a_lookup(store: Store) -> None:
    store.writer.write({"scalars": _points("j", "loss", [0, 1, 2], [1.0, 2.0, 3.0])})
    counting = CountingEngine(store.engine)
    store.writer._engine = store.writer._catalogue._engine = counting
    assert store.writer.write({"scalars": _points("j", "loss", [3, 4], [4.0, 5.0])}) == {"scalars": 2}
    assert counting.queries == 0
    assert _stored(store, "j", "loss") == {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0, 4: 5.0}


def test_points_sent_again_after_the_jobs_data_was_deleted_are_stored_anew(store: Store) -> None:
    store.jobs.ensure({"j": "p"}, {})
    store.writer.write({"scalars": _points("j", "loss", list(range(10)), [1.0] * 10)})
    store.jobs.delete_data("j")
    assert store.writer.write({"scalars": _points("j", "loss", list(range(10)), [2.0] * 10)}) == {"scalars": 10}
    assert _stored(store, "j", "loss") == {i: 2.0 for i in range(10)}
    assert _bucket(store, "j", "loss") == {"count": 10, "mean": 2.0}


def test_series_interleaved_row_by_row_are_told_apart_by_every_name(store: Store) -> None:
    # more rows than the writer looks at first, and a name of each kind that varies while the others do not
    names = [("j1", "loss", ""), ("j1", "acc", ""), ("j2", "loss", ""), ("j1", "loss", "val")]
    steps = 2000
    rows = [(*name, step, step * 10.0 + k) for step in range(steps) for k, name in enumerate(names)]
    columns = list(zip(*rows, strict=True))
    n = len(rows)
    batch = pa.table(
        {
            "job": columns[0],
            "metric": columns[1],
            "variant": columns[2],
            "iter": pa.array(columns[3], pa.int64()),
            "ts": pa.array([1_700_000_000_000 + s for s in columns[3]], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
            "value": pa.array(columns[4], pa.float64()),
            "worker": [""] * n,
            "model_event": pa.array([0] * n, pa.uint8()),
        }
    )
    assert store.writer.write({"scalars": batch}) == {"scalars": n}
    for k, (job, metric, variant) in enumerate(names):
        stored = _stored(store, job, metric, variant=variant)
        assert stored == {step: step * 10.0 + k for step in range(steps)}, (job, metric, variant)
