"""The chart rollup the writer builds with numpy holds the blocks that the rollup's SQL definition gives."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from helpers import FailingInserts, awkward_points, points_table
from jobpulse.errors import StoreUnavailable
from jobpulse.store import Store
from jobpulse.store.rollup_sql import rollup_select

_KEY = ("job", "metric", "variant", "axis", "level", "block")
_SUMS = ("sum", "n", "count")
_ENVELOPES = ("min", "max", "first_x", "last_x", "first_iter", "last_iter")


def _points(job: str, metric: str, variant: str, iters: np.ndarray, ts_ms: np.ndarray, values: np.ndarray) -> pa.Table:
    return points_table(job, metric, iters, values, variant=variant, ts_ms=ts_ms)


def _blocks(store: Store, source: str) -> dict[tuple, dict[str, Any]]:
    """Rollup rows of ``source`` merged per block, as a chart reads them."""
    table = store.engine.query(
        f"""SELECT {", ".join(_KEY)}, sum(sum) AS sum, sum(n) AS n, sum(count) AS count, min(min) AS min,
            max(max) AS max, max(last) AS last, min(first_x) AS first_x, max(last_x) AS last_x,
            min(first_iter) AS first_iter, max(last_iter) AS last_iter
        FROM {source} GROUP BY {", ".join(_KEY)} HAVING sum(count) != 0"""
    )
    return {tuple(row[k] for k in _KEY): row for row in table.to_pylist()}


def _stored_rollup(store: Store) -> dict[tuple, dict[str, Any]]:
    return _blocks(store, f"{store.database}.scalars_rollup")


def _defined_rollup(store: Store) -> dict[tuple, dict[str, Any]]:
    return _blocks(store, f"({rollup_select(f'{store.database}.scalars FINAL')})")


def _assert_same(got: dict, want: dict, columns: tuple[str, ...]) -> None:
    assert got.keys() == want.keys()
    for key, row in want.items():
        for column in columns:
            if column == "last":  # (x, inserted, value): the x and value of the last point (value may be NaN)
                assert repr((got[key]["last"]["1"], got[key]["last"]["3"])) == repr(
                    (row["last"]["1"], row["last"]["3"])
                ), key
            elif row[column] is not None and column in (*_SUMS, "min", "max"):
                assert got[key][column] == pytest.approx(row[column], rel=1e-12), (key, column)
            else:
                assert got[key][column] == row[column], (key, column)


def test_the_writers_blocks_are_the_blocks_the_sql_definition_gives(store: Store) -> None:
    rng = np.random.default_rng(7)
    for start in (0, 3000, 6000):
        store.writer.write({"scalars": awkward_points(rng, "j", start)})
    got, want = _stored_rollup(store), _defined_rollup(store)
    assert len(want) > 1000
    _assert_same(got, want, (*_SUMS, *_ENVELOPES, "last"))


def test_batches_of_one_point_per_series_give_the_blocks_the_sql_definition_gives(store: Store) -> None:
    # an SDK's batch: every series one new point, so no two blocks of a series join at any level
    for step in range(40):
        iters = np.array([step * 700])
        ts = 1_700_000_000_000 + iters * 97
        batch = [
            _points("j", metric, variant, iters, ts, np.array([np.nan if step == 7 else step / (1 + len(variant))]))
            for metric in ("loss", "lr")
            for variant in ("train", "eval", "test")
        ]
        store.writer.write({"scalars": pa.concat_tables(batch)})
    got, want = _stored_rollup(store), _defined_rollup(store)
    assert len(want) > 1000
    _assert_same(got, want, (*_SUMS, *_ENVELOPES, "last"))


def test_blocks_of_replaced_points_count_the_new_values_alone(store: Store) -> None:
    iters = np.arange(10_000)
    ts = 1_700_000_000_000 + iters * 1000
    store.writer.write({"scalars": _points("j", "loss", "", iters, ts, np.sin(iters / 100))})
    again = iters[2_000:7_000]
    store.writer.write({"scalars": _points("j", "loss", "", again, ts[2_000:7_000] + 5, np.cos(again / 10))})
    got, want = _stored_rollup(store), _defined_rollup(store)
    # sums, counts and last points follow the replacement; minima, maxima and first/last x are an envelope
    _assert_same(got, want, (*_SUMS, "last"))


def test_points_that_fail_to_store_are_taken_back_out_of_the_rollup(store: Store) -> None:
    iters = np.arange(5_000)
    ts = 1_700_000_000_000 + iters * 1000
    store.writer.write({"scalars": _points("j", "loss", "", iters, ts, iters * 1.0)})
    before = _stored_rollup(store)
    failing = Store(FailingInserts(store.engine, "scalars"), store.database)  # type: ignore[arg-type]
    more = np.arange(2_500, 8_000)
    with pytest.raises(StoreUnavailable):
        failing.writer.write({"scalars": _points("j", "loss", "", more, 1_700_000_000_000 + more * 1000, -more * 1.0)})
    _assert_same(_stored_rollup(store), before, (*_SUMS,))
    _assert_same(_stored_rollup(store), _defined_rollup(store), (*_SUMS,))


def test_of_points_at_one_time_the_last_is_the_one_of_the_highest_iteration(store: Store) -> None:
    iters = np.array([3, 1, 2, 0])
    ts = np.full(4, 1_700_000_000_000)
    store.writer.write({"scalars": _points("j", "loss", "", iters, ts, iters * 10.0)})
    got, want = _stored_rollup(store), _defined_rollup(store)
    time_blocks = [row for key, row in got.items() if key[3] == 1]
    assert time_blocks and {row["last"]["3"] for row in time_blocks} == {30.0}
    _assert_same(got, want, ("last",))
