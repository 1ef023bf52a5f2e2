"""The catalogue: each job's series extents, remembered where the store sees every write, equal to the summary's."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from helpers import CountingEngine, FailingInserts, awkward_points, points_table, post_columns, scalar_series
from jobpulse.errors import StoreUnavailable
from jobpulse.store import Store


def _from_memory(store: Store, jobs: list[str], metric: str, variants: list[str] | None, axis: str):
    found = store.scalars._catalogue.extent(jobs, metric, variants, axis)
    assert found is not None, "the catalogue does not remember these jobs"
    return found[0]


def _from_summary(store: Store, jobs: list[str], metric: str, variants: list[str] | None, axis: str):
    extent = store.scalars._extents(jobs, [(metric, variants)], axis)[0]
    return None if extent is None else extent[:2]


def _assert_same_extents(store: Store, jobs: list[str]) -> None:
    for metric, variants in (
        ("loss", None),
        ("loss", ["train"]),
        ("loss", ["eval", "train"]),
        ("lr", None),
        ("absent", None),
        ("loss", ["absent"]),
    ):
        for axis in ("iter", "time"):
            for chosen in ([jobs[0]], jobs):
                want = _from_summary(store, chosen, metric, variants, axis)
                assert _from_memory(store, chosen, metric, variants, axis) == want, (metric, variants, axis, chosen)


def test_a_chart_of_a_job_just_written_reads_only_its_buckets(client, store):
    post_columns(client, scalar_series("j1", "loss", [float(i) for i in range(1000)]))
    counting = CountingEngine(store.engine)
    store.scalars._engine = store.scalars._catalogue._engine = counting
    chart = client.get("/jp/v1/jobs/j1/scalars/chart", params={"metric": "loss", "buckets": 4}).json()
    assert chart["range"] == [0, 999] and chart["series"][0]["count"] == [250] * 4
    assert counting.queries == 1 and counting.chart_reads == 1


def test_extents_kept_through_new_resent_replaced_and_deleted_points_equal_the_summarys(store):
    rng = np.random.default_rng(7)
    for step, start in enumerate((0, 2500, 1000, 6000, 6000, -4000)):  # overlaps, a resend, points before all
        store.writer.write(
            {"scalars": pa.concat_tables([awkward_points(rng, "a", start), awkward_points(rng, "b", start + 1)])}
        )
        _assert_same_extents(store, ["a", "b"])
        if step == 3:
            store.jobs.delete_data("a")
            assert store.scalars._catalogue.extent(["a"], "loss", None, "iter") is None  # read again on next write
            assert _from_memory(store, ["b"], "loss", None, "iter") == _from_summary(store, ["b"], "loss", None, "iter")


def test_a_store_opened_over_stored_data_reads_a_jobs_whole_catalogue_on_its_first_write(embedded_engine, store):
    store.writer.write({"scalars": points_table("j", "loss", range(100, 200), [1.0] * 100, variant="train")})
    reopened = Store(embedded_engine, store.database)
    assert reopened.scalars._catalogue.extent(["j"], "loss", None, "iter") is None  # nothing remembered yet
    reopened.writer.write({"scalars": points_table("j", "loss", range(0, 50), [2.0] * 50, variant="eval")})
    assert _from_memory(reopened, ["j"], "loss", None, "iter") == (0, 199)  # the series stored before too
    assert reopened.scalars.chart(["j"], "loss", buckets=2)["range"] == [0, 199]


def test_data_deleted_and_sent_again_elsewhere_has_only_its_new_extent(store):
    store.jobs.ensure({"j": "p"}, {})
    store.writer.write({"scalars": points_table("j", "loss", range(100), [1.0] * 100)})
    store.jobs.delete_data("j")
    store.writer.write({"scalars": points_table("j", "loss", range(1000, 1100), [1.0] * 100)})
    assert _from_memory(store, ["j"], "loss", None, "iter") == (1000, 1099)
    assert store.scalars.chart(["j"], "loss", buckets=4)["range"] == [1000, 1099]


def test_a_batch_whose_points_fail_to_insert_is_in_the_extent_as_in_the_summary(embedded_engine, store):
    store.writer.write({"scalars": points_table("j", "loss", range(100), [1.0] * 100)})
    failing = FailingInserts(embedded_engine, "scalars")
    store.writer._engine = failing
    with pytest.raises(StoreUnavailable):
        store.writer.write({"scalars": points_table("j", "loss", range(100, 150), [1.0] * 50)})
    assert _from_memory(store, ["j"], "loss", None, "iter") == _from_summary(store, ["j"], "loss", None, "iter")


def test_over_a_shared_server_nothing_is_remembered(embedded_engine, store):
    replica = Store(embedded_engine, store.database, sees_every_write=False)
    replica.writer.write({"scalars": points_table("j", "loss", range(10), [1.0] * 10)})
    assert replica.scalars._catalogue.extent(["j"], "loss", None, "iter") is None
    assert replica.scalars.chart(["j"], "loss", buckets=2)["range"] == [0, 9]
