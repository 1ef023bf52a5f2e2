"""Each series' summary row, built by the writer with numpy, is the row the summary's SQL definition gives."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from helpers import FailingInserts, awkward_points, points_table
from jobpulse.errors import StoreUnavailable
from jobpulse.store import Store
from jobpulse.store.rollup_sql import LATEST_SELECT

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
    """The definition over every point version stored: an iteration reported again counts once."""
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
    assert got[("j", "loss", "")]["last"]["3"] == 99.0 and got[("j", "loss", "")]["points"] == 10


def test_a_series_without_finite_values_has_no_minimum_or_maximum(store: Store) -> None:
    store.writer.write({"scalars": points_table("j", "nan", range(3), [np.nan, np.inf, -np.inf])})
    row = _stored(store)[("j", "nan", "")]
    assert row["min_value"] is None and row["max_value"] is None
    _assert_same(_stored(store), _defined(store))


def _counts(store: Store) -> tuple[int, int, int]:
    """The points stored, the points the rollup counts, and the points the summary counts."""
    db = store.database

    def one(sql: str) -> int:
        return store.engine.query(sql).column("n")[0].as_py()

    return (
        one(f"SELECT count() AS n FROM {db}.scalars FINAL"),
        one(f"SELECT sum(count) AS n FROM {db}.scalars_rollup WHERE axis = 0 AND level = 6"),
        one(f"SELECT sum(points) AS n FROM {db}.scalars_latest"),
    )


def _failed_then_resent(store: Store, table: str, sees_every_write: bool) -> tuple[tuple[int, int, int], float]:
    """Store points 0-9, send points 10-19 while inserts into ``table`` fail, and resend them to the same
    writer once they succeed; answers ``_counts`` and the summary's last value after the failure."""
    engine = FailingInserts(store.engine, table)
    writer = Store(engine, store.database, sees_every_write=sees_every_write).writer  # type: ignore[arg-type]
    engine.failing = False
    writer.write({"scalars": points_table("j", "loss", range(10), np.arange(10.0))})
    batch = points_table("j", "loss", range(10, 20), np.arange(10.0, 20.0))
    engine.failing = True
    with pytest.raises(StoreUnavailable):
        writer.write({"scalars": batch})
    after_failure = _counts(store), _stored(store)[("j", "loss", "")]["last"]["3"]
    engine.failing = False
    writer.write({"scalars": batch})  # the client's resend
    return after_failure


@pytest.mark.parametrize("sees_every_write", [True, False], ids=["embedded", "shared"])
def test_a_summary_that_fails_to_insert_stores_nothing_of_its_batch(store: Store, sees_every_write: bool) -> None:
    assert _failed_then_resent(store, "scalars_latest", sees_every_write)[0] == (10, 10, 10)
    assert _counts(store) == (20, 20, 20)
    assert _stored(store)[("j", "loss", "")]["last"]["3"] == 19.0


@pytest.mark.parametrize("sees_every_write", [True, False], ids=["embedded", "shared"])
def test_a_rollup_that_fails_to_insert_takes_its_batchs_points_back_until_resent(
    store: Store, sees_every_write: bool
) -> None:
    # the points were inserted beside the rollup and are deleted; the summary counts what was sent
    assert _failed_then_resent(store, "scalars_rollup", sees_every_write) == ((10, 10, 20), 19.0)
    assert _counts(store) == (20, 20, 30)
    assert store.scalars.chart(["j"], "loss", buckets=20)["series"][0]["count"] == [1] * 20


@pytest.mark.parametrize("sees_every_write", [True, False], ids=["embedded", "shared"])
def test_points_that_fail_to_insert_stay_in_the_summary_until_resent_and_count_once_in_the_rollup(
    store: Store, sees_every_write: bool
) -> None:
    # the summary counts what was sent; its last point is the failed batch's
    assert _failed_then_resent(store, "scalars", sees_every_write) == ((10, 10, 20), 19.0)
    assert _counts(store) == (20, 20, 30)
