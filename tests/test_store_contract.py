"""The store's contract, run on every transport: the embedded engine, and the HTTP transport over a ClickHouse
server when JOBPULSE_TEST_CLICKHOUSE_URL names one, else over the test stand-in (tests/conftest.py)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from jobpulse.errors import StoreUnavailable
from jobpulse.store import Job, LogFilter, SeriesWindow, Store
from jobpulse.store.columns import columns_to_arrow
from jobpulse.store.schema import MIGRATIONS, SCHEMA_VERSION, migrate

T0 = 1_790_000_040_000 - (1_790_000_040_000 % 60_000)


def write_scalars(store: Store, job: str, values: list[float], worker: str = "") -> None:
    n = len(values)
    store.writer.write(
        {
            "scalars": columns_to_arrow(
                "scalars",
                {
                    "job": [job] * n,
                    "metric": ["loss"] * n,
                    "variant": ["train"] * n,
                    "iter": np.arange(n),
                    "ts": T0 + np.arange(n),
                    "value": values,
                    "worker": [worker] * n,
                    "model_event": np.zeros(n, np.uint8),
                },
            )
        }
    )


def test_jobs_round_trip(any_store):
    job, created = any_store.jobs.create(Job(job="j1", project="p", name="n", tags=["t"], config={"lr": 0.1}))
    assert created
    found = any_store.jobs.get("j1")
    assert (found.project, found.tags, found.config, found.status) == ("p", ["t"], {"lr": 0.1}, "created")


def test_a_job_edited_from_a_stale_read_keeps_the_change_made_since(any_store):
    any_store.jobs.create(Job(job="j1", project="p", name="n", config={"a": 1}))
    stale = any_store.jobs.get("j1")
    any_store.jobs.update("j1", {"config": {"a": 1, "b": 2}})
    stale.tags = ["t"]
    any_store.jobs.write(stale)
    found = any_store.jobs.get("j1")
    assert (found.config, found.tags) == ({"a": 1, "b": 2}, ["t"])


def test_scalars_chart_and_latest(any_store):
    write_scalars(any_store, "j1", [float(i) for i in range(100)])
    chart = any_store.scalars.chart(["j1"], "loss", buckets=4)
    assert chart["bucket_width"] == 25 and chart["series"][0]["mean"] == [12.0, 37.0, 62.0, 87.0]
    assert any_store.scalars.latest(["j1"])[0]["value"] == 99.0


def test_replaced_points_are_read_once(any_store):
    write_scalars(any_store, "j1", [1.0, 2.0])
    write_scalars(any_store, "j1", [5.0, 6.0])
    points, _ = any_store.scalars.page("j1", "loss")
    assert points["iter"].tolist() == [0, 1] and points["value"].tolist() == [5.0, 6.0]


def test_each_worker_keeps_its_points_and_reads_show_the_leaders(any_store):
    write_scalars(any_store, "j1", [1.0] * 8, worker="worker-1")
    write_scalars(any_store, "j1", [3.0] * 8, worker="worker-0")
    write_scalars(any_store, "j1", [2.0] * 8, worker="worker-1")  # worker-1 again: it replaces its own points only
    scalars = any_store.scalars
    assert scalars.chart(["j1"], "loss", buckets=2)["series"][0]["mean"] == [3.0, 3.0]
    every = scalars.chart(["j1"], "loss", buckets=2, workers="all")["series"]
    assert [(s["worker"], s["mean"], s["count"]) for s in every] == [
        ("worker-0", [3.0, 3.0], [4, 4]),
        ("worker-1", [2.0, 2.0], [4, 4]),
    ]
    [envelope] = scalars.chart(["j1"], "loss", buckets=2, workers="envelope")["series"]
    assert envelope["median"] == [2.5, 2.5] and envelope["workers"] == [2, 2]
    latest = [(r["worker"], r["value"], r["points"]) for r in scalars.latest(["j1"], workers="all")]
    assert latest == [("worker-0", 3.0, 8), ("worker-1", 2.0, 8)]
    assert (
        scalars.count(["j1"]) == 8 and scalars.page("j1", "loss", worker="worker-1")[0]["value"].tolist() == [2.0] * 8
    )
    progress = [(w.worker, w.last_iter, w.points) for w in any_store.progress("j1")]
    assert progress == [("worker-0", 7, 8), ("worker-1", 7, 8)]


def test_logs_resent_rows_are_dropped(any_store):
    table = columns_to_arrow(
        "logs",
        {
            "job": ["j1"] * 3,
            "ts": [T0] * 3,
            "worker": ["w"] * 3,
            "seq": [1, 2, 3],
            "level": ["info"] * 3,
            "msg": ["a", "b", "c"],
        },
    )
    assert any_store.writer.write({"logs": table}) == {"logs": 3}
    assert any_store.writer.write({"logs": table}) == {"logs": 0}
    assert any_store.logs.count("j1", LogFilter()) == 3
    assert any_store.logs.workers("j1") == [{"worker": "w", "lines": 3, "bytes": 6}]


def test_system_rollup_matches_raw(any_store):
    n = 120
    table = columns_to_arrow(
        "system",
        {
            "job": ["j1"] * n,
            "worker": ["w"] * n,
            "metric": ["gpu_util"] * n,
            "device": ["0"] * n,
            "ts": T0 + np.arange(n) * 1000,
            "value": np.arange(n, dtype=float),
        },
    )
    any_store.writer.write({"system": table})
    rollup = any_store.system.series("j1", ["gpu_util"], SeriesWindow(T0, T0 + n * 1000, 60_000))
    raw = any_store.system.series("j1", ["gpu_util"], SeriesWindow(T0 + 1, T0 + n * 1000, 60_000))
    assert rollup[0]["avg"] == [29.5, 89.5]
    assert raw[0]["count"] == [60, 59]


def test_a_sample_repeated_within_one_batch_is_stored_and_counted_once(any_store):
    """Of two samples of one series at one time in a batch, the first is kept: the per-minute rollup counts it
    once, as the raw samples read it."""
    table = columns_to_arrow(
        "system",
        {
            "job": ["j1"] * 4,
            "worker": ["w"] * 4,
            "metric": ["gpu_util"] * 4,
            "device": ["0", "0", "1", "0"],
            "ts": [T0, T0 + 1000, T0, T0],
            "value": [1.0, 3.0, 7.0, 5.0],
        },
    )
    assert any_store.writer.write({"system": table}) == {"system": 3}
    rollup = any_store.system.series("j1", ["gpu_util"], SeriesWindow(T0, T0 + 59_999, 60_000))
    raw = any_store.system.series("j1", ["gpu_util"], SeriesWindow(T0, T0 + 59_999, 30_000))
    assert [(s["device"], s["count"], s["avg"]) for s in rollup] == [("0", [2], [2.0]), ("1", [1], [7.0])]
    assert [(s["count"], s["avg"]) for s in raw] == [(s["count"], s["avg"]) for s in rollup]


def test_a_log_line_repeated_within_one_batch_is_stored_once(any_store):
    table = columns_to_arrow(
        "logs",
        {
            "job": ["j1"] * 3,
            "ts": [T0] * 3,
            "worker": ["w"] * 3,
            "seq": [1, 1, 2],
            "level": ["info"] * 3,
            "msg": ["a", "a", "b"],
        },
    )
    assert any_store.writer.write({"logs": table}) == {"logs": 2}
    assert any_store.logs.workers("j1") == [{"worker": "w", "lines": 2, "bytes": 4}]


def test_keys_verify_and_revoke(any_store):
    key, token = any_store.keys.create("k", ["p"], "write")
    assert any_store.keys.verify(token).key_id == key.key_id
    any_store.keys.revoke(key.key_id)
    assert any_store.keys.verify(token) is None


def test_delete_removes_every_row_of_the_job(any_store):
    any_store.jobs.create(Job(job="j1", project="p"))
    write_scalars(any_store, "j1", [1.0])
    any_store.jobs.delete("j1")
    assert any_store.jobs.get("j1") is None
    assert any_store.scalars.latest(["j1"]) == []


def test_migrate_is_idempotent_and_records_the_version(any_store):
    assert migrate(any_store.engine, any_store.database) == SCHEMA_VERSION
    versions = any_store.engine.query(f"SELECT version FROM {any_store.database}.schema_version ORDER BY version")
    assert versions.column(0).to_pylist() == list(range(1, SCHEMA_VERSION + 1))


def test_an_upgrade_keeps_existing_data(any_store, monkeypatch):
    write_scalars(any_store, "j1", [1.0, 2.0])
    step = ["ALTER TABLE {db}.jobs ADD COLUMN IF NOT EXISTS upgrade_probe String DEFAULT 'x'"]
    monkeypatch.setattr("jobpulse.store.schema.MIGRATIONS", [*MIGRATIONS, step])
    assert migrate(any_store.engine, any_store.database) == SCHEMA_VERSION
    assert migrate(any_store.engine, any_store.database) == SCHEMA_VERSION + 1
    points, _ = any_store.scalars.page("j1", "loss")
    assert points["value"].tolist() == [1.0, 2.0]
    columns = (
        any_store.engine.query(
            "SELECT name FROM system.columns WHERE database = {db:String} AND table = 'jobs'",
            {"db": any_store.database},
        )
        .column(0)
        .to_pylist()
    )
    assert "upgrade_probe" in columns


def test_raw_system_ttl_is_set_changed_and_removed(any_store):
    from jobpulse.store.schema import set_raw_ttl

    def ttl() -> str:
        return (
            any_store.engine.query(
                "SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = 'system'",
                {"db": any_store.database},
            )
            .column(0)[0]
            .as_py()
        )

    set_raw_ttl(any_store.engine, any_store.database, 14)
    assert "TTL" in ttl() and "14" in ttl()
    set_raw_ttl(any_store.engine, any_store.database, 30)
    assert "30" in ttl()
    set_raw_ttl(any_store.engine, any_store.database, 0)
    assert " TTL " not in ttl()


@pytest.fixture
def python_insert(store: Store, monkeypatch: pytest.MonkeyPatch) -> Store:
    """An embedded store whose every insert goes through the ``Python()`` table function, the embedded engine's
    path for large inserts (small ones are streamed as Arrow IPC, the HTTP transport's only path)."""
    monkeypatch.setattr(store.engine, "stream_rows", 0)
    return store


def _probe_table(store: Store) -> str:
    name = f"{store.database}.insert_probe"
    store.engine.command(
        f"CREATE TABLE {name} (name String, n Int64, at DateTime64(3), tags Array(String)) "
        "ENGINE = MergeTree ORDER BY n"
    )
    return name


def _probe_rows(store: Store, table: str) -> list[dict]:
    return store.engine.query(
        f"SELECT name, n, toUnixTimestamp64Milli(at) AS at, tags FROM {table} ORDER BY n"
    ).to_pylist()


def test_an_insert_takes_every_record_batch_and_arrow_encoding(any_store):
    _takes_every_record_batch_and_arrow_encoding(any_store)


def test_a_python_insert_takes_every_record_batch_and_arrow_encoding(python_insert):
    _takes_every_record_batch_and_arrow_encoding(python_insert)


def test_a_refused_insert_stores_nothing_and_the_engine_takes_the_next_statement(any_store):
    _refused_insert_stores_nothing(any_store)


def test_a_refused_python_insert_stores_nothing_and_the_engine_takes_the_next_statement(python_insert):
    _refused_insert_stores_nothing(python_insert)


def _takes_every_record_batch_and_arrow_encoding(any_store: Store) -> None:
    table = _probe_table(any_store)
    first = pa.record_batch(
        {
            "name": pa.array(["a", "b", "a"]).dictionary_encode(),
            "n": pa.array([1, 2, 3], pa.int32()),
            "at": pa.array([1_000_000, 2_000_000, 3_000_000], pa.timestamp("us")),
            "tags": pa.array([["x"], [], ["y", "z"]]),
        }
    )
    second = pa.record_batch(
        {
            "name": pa.array(["c"]).dictionary_encode(),
            "n": pa.array([4], pa.int32()),
            "at": pa.array([4_000_000], pa.timestamp("us")),
            "tags": pa.array([["w"]]),
        }
    )
    any_store.engine.insert(table, pa.Table.from_batches([first, second]))
    assert _probe_rows(any_store, table) == [
        {"name": "a", "n": 1, "at": 1000, "tags": ["x"]},
        {"name": "b", "n": 2, "at": 2000, "tags": []},
        {"name": "a", "n": 3, "at": 3000, "tags": ["y", "z"]},
        {"name": "c", "n": 4, "at": 4000, "tags": ["w"]},
    ]


def _refused_insert_stores_nothing(any_store: Store) -> None:
    table = _probe_table(any_store)
    good = pa.table({"name": ["kept"], "n": pa.array([1], pa.int64()), "at": pa.array([5], pa.timestamp("ms"))})
    any_store.engine.insert(table, good)
    unknown_column = good.append_column("color", pa.array(["red"]))
    with pytest.raises(StoreUnavailable, match="color"):
        any_store.engine.insert(table, unknown_column)
    not_a_number = pa.table({"name": ["lost", "lost"], "n": pa.array([[2], [3]])})
    with pytest.raises(StoreUnavailable, match="Array"):
        any_store.engine.insert(table, not_a_number)
    any_store.engine.insert(table, good.set_column(1, "n", pa.array([2], pa.int64())))
    assert [(row["name"], row["n"]) for row in _probe_rows(any_store, table)] == [("kept", 1), ("kept", 2)]


BLOB = bytes(range(256)) * 10_240  # 2.5 MiB holding every byte value


def _chunk_rows(store: Store, job: str) -> int:
    table = f"{store.database}.file_chunks"
    counted = store.engine.query(f"SELECT count() AS n FROM {table} WHERE job = {{job:String}}", {"job": job})
    return counted["n"][0].as_py()


def test_a_file_is_read_back_byte_exact_in_chunks_of_a_mebibyte(any_store):
    any_store.files.write("j1", "out/blob.bin", BLOB)
    stored = any_store.files.get("j1", "out/blob.bin")
    assert (stored.size, stored.chunks, stored.head) == (len(BLOB), 3, BLOB[:16])
    pieces = list(any_store.files.chunks(stored))
    assert [len(piece) for piece in pieces] == [1 << 20, 1 << 20, len(BLOB) - (2 << 20)]
    assert b"".join(pieces) == BLOB


def test_a_rewritten_file_is_replaced_and_its_old_chunks_go(any_store):
    any_store.files.write("j1", "a.png", BLOB)
    any_store.files.write("j1", "a.png", b"second")
    stored = any_store.files.get("j1", "a.png")
    assert (stored.size, b"".join(any_store.files.chunks(stored))) == (6, b"second")
    assert [(f.name, f.size) for f in any_store.files.listing("j1")] == [("a.png", 6)]
    assert _chunk_rows(any_store, "j1") == 1


def test_a_deleted_file_is_gone_and_an_empty_file_is_a_file(any_store):
    any_store.files.write("j1", "empty.txt", b"")
    any_store.files.write("j1", "gone.txt", b"x")
    assert any_store.files.delete("j1", "gone.txt") and not any_store.files.delete("j1", "gone.txt")
    assert any_store.files.get("j1", "gone.txt") is None
    empty = any_store.files.get("j1", "empty.txt")
    assert (empty.size, list(any_store.files.chunks(empty))) == (0, [b""])
    assert [f.name for f in any_store.files.listing("j1")] == ["empty.txt"]


def test_deleting_a_job_deletes_its_files(any_store):
    any_store.jobs.create(Job(job="j1", project="p"))
    any_store.files.write("j1", "a.bin", BLOB)
    any_store.files.write("j2", "a.bin", b"other job")
    any_store.jobs.delete("j1")
    assert any_store.files.listing("j1") == [] and _chunk_rows(any_store, "j1") == 0
    assert [f.name for f in any_store.files.listing("j2")] == ["a.bin"]


def test_a_read_of_many_jobs_takes_parameters_longer_than_a_url(any_store):
    """Over HTTP, bind parameters past 4 KiB travel as form data in the body (clickhouse-connect's choice)."""
    names = [f"many-jobs-{n:04d}-{'x' * 40}" for n in range(300)]
    for name in names[:3]:
        any_store.jobs.create(Job(job=name, project="proj", name=name))
    assert set(any_store.jobs.get_many(names)) == set(names[:3])
