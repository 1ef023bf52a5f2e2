"""Log lines and system samples sent again are stored once, and a batch newer than everything stored needs no lookup."""

from __future__ import annotations

import pyarrow as pa
import pytest

from helpers import CountingEngine, FailingInserts, points_table
from jobpulse.store import Store

T0 = 1_700_000_000_000


def _lines(job: str, worker: str, seqs: range, *, ts0: int = T0) -> pa.Table:
    return pa.table(
        {
            "job": [job] * len(seqs),
            "ts": pa.array([ts0 + s for s in seqs], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
            "worker": [worker] * len(seqs),
            "seq": pa.array(list(seqs), pa.uint64()),
            "level": ["info"] * len(seqs),
            "msg": [f"line {s}" for s in seqs],
        }
    )


def _samples(job: str, worker: str, seconds: range) -> pa.Table:
    return pa.table(
        {
            "job": [job] * len(seconds),
            "ts": pa.array([T0 + s * 1000 for s in seconds], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
            "worker": [worker] * len(seconds),
            "metric": ["gpu_util"] * len(seconds),
            "device": ["0"] * len(seconds),
            "value": pa.array([float(s) for s in seconds]),
        }
    )


def _counting(store: Store) -> CountingEngine:
    """Count the writer's lookups from now on."""
    counting = CountingEngine(store.engine)
    store.writer._resends._engine = store.writer._resends._newest._engine = counting
    return counting


def _stored(store: Store, table: str) -> int:
    return store.engine.query(f"SELECT count() AS n FROM {store.database}.{table} FINAL").column("n")[0].as_py()


def _log_size(store: Store, job: str) -> dict[str, int]:
    return {w["worker"]: w["lines"] for w in store.logs.workers(job)}


def test_log_lines_newer_than_every_stored_line_of_their_worker_are_written_without_a_lookup(store: Store) -> None:
    store.writer.write({"logs": _lines("j", "w0", range(0, 100))})
    counting = _counting(store)
    assert store.writer.write({"logs": _lines("j", "w0", range(100, 200))}) == {"logs": 100}
    assert counting.queries == 0
    assert _log_size(store, "j") == {"w0": 200}


def test_log_lines_sent_again_are_stored_once_and_counted_once(store: Store) -> None:
    store.writer.write({"logs": _lines("j", "w0", range(0, 100))})
    assert store.writer.write({"logs": _lines("j", "w0", range(0, 100))}) == {"logs": 0}
    # half sent again, half new
    assert store.writer.write({"logs": _lines("j", "w0", range(50, 150))}) == {"logs": 50}
    assert _stored(store, "logs") == 150
    assert _log_size(store, "j") == {"w0": 150}


def test_a_batch_overlapping_its_workers_stored_lines_keeps_only_the_new_ones(store: Store) -> None:
    store.writer.write({"logs": pa.concat_tables([_lines("j", "w0", range(0, 10)), _lines("j", "w1", range(0, 90))])})
    # w0's lines 5..14 overlap its stored ones; w1 sends nothing
    assert store.writer.write({"logs": _lines("j", "w0", range(5, 15))}) == {"logs": 5}
    assert _log_size(store, "j") == {"w0": 15, "w1": 90}


def test_lines_stored_before_this_store_opened_are_found_when_sent_again(store: Store) -> None:
    store.writer.write({"logs": _lines("j", "w0", range(0, 100))})
    reopened = Store(store.engine, store.database)  # another process over the same data: it remembers nothing
    assert reopened.writer.write({"logs": _lines("j", "w0", range(90, 110))}) == {"logs": 10}
    assert _log_size(reopened, "j") == {"w0": 110}


def test_lines_sent_again_after_the_jobs_logs_were_deleted_are_stored_anew(store: Store) -> None:
    store.writer.write({"logs": _lines("j", "w0", range(0, 100))})
    store.logs.delete("j")
    assert store.writer.write({"logs": _lines("j", "w0", range(0, 100))}) == {"logs": 100}
    assert _log_size(store, "j") == {"w0": 100}


def test_over_a_server_other_replicas_write_so_every_batch_is_looked_up(store: Store) -> None:
    replica = Store(store.engine, store.database, sees_every_write=False)
    replica.writer.write({"logs": _lines("j", "w0", range(0, 100))})
    counting = _counting(replica)
    assert replica.writer.write({"logs": _lines("j", "w0", range(100, 200))}) == {"logs": 100}
    assert counting.queries == 1
    store.writer.write({"logs": _lines("j", "w0", range(150, 250))})  # another replica's batch, half known
    assert _log_size(store, "j") == {"w0": 250}


def test_system_samples_sent_again_are_stored_once_and_new_ones_without_a_lookup(store: Store) -> None:
    store.writer.write({"system": _samples("j", "node-1", range(0, 60))})
    assert store.writer.write({"system": _samples("j", "node-1", range(30, 90))}) == {"system": 30}
    counting = _counting(store)
    assert store.writer.write({"system": _samples("j", "node-1", range(90, 120))}) == {"system": 30}
    assert counting.queries == 0
    assert _stored(store, "system") == 120


def test_a_table_that_fails_leaves_the_others_of_its_batch_written_and_its_resend_stores_the_rest(
    store: Store,
) -> None:
    failing = FailingInserts(store.engine, "logs")
    store.writer._engine = failing
    batch = {
        "scalars": points_table("j", "loss", [0, 1, 2], [1.0, 2.0, 3.0]),
        "logs": _lines("j", "w0", range(0, 10)),
        "system": _samples("j", "node-1", range(0, 10)),
    }
    with pytest.raises(Exception, match="no space left"):
        store.writer.write(batch)
    assert _stored(store, "scalars") == 3 and _stored(store, "system") == 10 and _stored(store, "logs") == 0
    failing.failing = False
    assert store.writer.write(batch) == {"scalars": 0, "logs": 10, "system": 0}
    assert _log_size(store, "j") == {"w0": 10}
