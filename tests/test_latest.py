"""Each series' summary row, built by the writer with numpy, is the row the summary's SQL definition gives."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from helpers import awkward_points, points_table
from jobpulse.errors import StoreUnavailable
from jobpulse.store import Store
from jobpulse.store.schema import LATEST_SELECT

_MERGED = """SELECT job, metric, variant, max(last) AS last, min(first_iter) AS first_iter,
    max(last_iter) AS last_iter, min(first_ts) AS first_ts, max(last_ts) AS last_ts, min(min_value) AS min_value,
    max(max_value) AS max_value, sum(points) AS points
FROM {source} GROUP BY job, metric, variant"""


def _rows(store: Store, source: str) -> dict[tuple, dict[str, Any]]:
    table = store.engine.query(_MERGED.format(source=source))
    return {(r["job"], r["metric"], r["variant"]): r for r in table.to_pylist()}


def _stored(store: Store) -> dict[tuple, dict[str, Any]]:
    return _rows(store, f"{store.database}.scalars_latest")


def _defined(store: Store) -> dict[tuple, dict[str, Any]]:
    """The definition over every point version stored: each insert counted what it carried."""
    return _rows(store, f"({LATEST_SELECT.format(source=f'{store.database}.scalars')})")


def _assert_same(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for key, row in want.items():
        for column, value in row.items():
            if column == "last":  # (iter, inserted, value): value may be NaN
                assert repr(got[key][column]) == repr(value), key
            else:
                assert got[key][column] == value, (key, column)


def test_the_writers_rows_are_the_rows_the_sql_definition_gives(store: Store) -> None:
    rng = np.random.default_rng(11)
    for start in (0, 3000, 6000):
        store.writer.write({"scalars": awkward_points(rng, "j", start)})
    got = _stored(store)
    _assert_same(got, _defined(store))
    assert got[("j", "lr", "")]["points"] == 9000 and got[("j", "lr", "")]["first_iter"] == -500


def test_replaced_and_resent_points_are_counted_as_the_definition_counts_them(store: Store) -> None:
    store.writer.write({"scalars": points_table("j", "loss", range(10), np.arange(10.0))})
    store.writer.write({"scalars": points_table("j", "loss", range(5, 10), np.arange(5.0, 10.0))})  # resent alike
    store.writer.write({"scalars": points_table("j", "loss", [9], [99.0])})  # the last point replaced
    got = _stored(store)
    _assert_same(got, _defined(store))
    assert got[("j", "loss", "")]["last"]["3"] == 99.0 and got[("j", "loss", "")]["points"] == 11


def test_a_series_without_finite_values_has_no_minimum_or_maximum(store: Store) -> None:
    store.writer.write({"scalars": points_table("j", "nan", range(3), [np.nan, np.inf, -np.inf])})
    row = _stored(store)[("j", "nan", "")]
    assert row["min_value"] is None and row["max_value"] is None
    _assert_same(_stored(store), _defined(store))


class _FailingInserts:
    """An engine whose inserts into one table fail; everything else passes through."""

    def __init__(self, engine: Any, table: str) -> None:
        self._engine, self._table = engine, table

    def insert(self, table: str, *args: Any, **kwargs: Any) -> None:
        if table.endswith("." + self._table):
            raise StoreUnavailable("the engine failed")
        self._engine.insert(table, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


def test_points_that_fail_to_insert_leave_the_summary_as_it_was(store: Store) -> None:
    store.writer.write({"scalars": points_table("j", "loss", range(10), np.arange(10.0))})
    before = _stored(store)
    store.writer._engine = _FailingInserts(store.engine, "scalars")
    with pytest.raises(StoreUnavailable):
        store.writer.write({"scalars": points_table("j", "loss", range(10, 20), np.arange(10.0, 20.0))})
    assert _stored(store) == before


def test_a_summary_that_fails_to_insert_leaves_the_points_stored_and_counted_once(store: Store) -> None:
    store.writer.write({"scalars": points_table("j", "loss", range(10), np.arange(10.0))})
    store.writer._engine = _FailingInserts(store.engine, "scalars_latest")
    batch = points_table("j", "loss", range(10, 20), np.arange(10.0, 20.0))
    with pytest.raises(StoreUnavailable):
        store.writer.write({"scalars": batch})
    store.writer._engine = store.engine
    store.writer.write({"scalars": batch})  # the client's resend: its points are stored alike already
    db = store.database
    stored = store.engine.query(f"SELECT count() AS n FROM {db}.scalars FINAL").column("n")[0].as_py()
    counted = store.engine.query(
        f"SELECT sum(count) AS n FROM {db}.scalars_rollup WHERE axis = 0 AND level = 6"
    ).column("n")[0].as_py()
    assert stored == counted == 20
