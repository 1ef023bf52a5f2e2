"""The spool: bounded, ordered, locked."""

from __future__ import annotations

import os

from jobpulse.sdk import spool as sp
from jobpulse.sdk.wire import Request

URL = "http://127.0.0.1:9"


def request(i: int, size: int = 100) -> Request:
    return Request("POST", "/jp/v1/ingest", bytes([i % 256]) * size, "application/json", "", events=i)


def test_files_replay_in_the_order_they_were_written(tmp_path):
    spool = sp.Spool(tmp_path, "job-1", "worker-0", 1 << 20)
    for i in range(20):
        spool.put(request(i), URL)
    events = []
    for path in spool.files():
        entry = sp.take(path)
        events.append(entry.request.events)
        assert entry.url == URL and entry.request.body == bytes([entry.request.events]) * 100
        sp.done(entry)
    assert events == list(range(20))
    assert spool.files() == []


def test_the_directory_is_bounded_and_the_oldest_files_are_dropped_with_a_count(tmp_path):
    reports = []
    spool = sp.Spool(tmp_path, "job", "w", 5_000, lambda kind, msg: reports.append((kind, msg)))
    for i in range(30):
        spool.put(request(i, 1000), URL)
    assert spool.size() <= 5_000
    kept = [sp.read_header(p)["events"] for p in spool.files()]
    assert kept == list(range(30 - len(kept), 30))  # the newest survive, in order
    assert spool.dropped_requests == 30 - len(kept)
    assert spool.dropped_events == sum(range(30 - len(kept)))
    assert reports and reports[0][0] == "spool-full" and "dropped the oldest" in reports[0][1]


def test_a_file_taken_by_one_replayer_cannot_be_taken_by_another(tmp_path):
    spool = sp.Spool(tmp_path, "job", "w", 1 << 20)
    path = spool.put(request(1), URL)
    first = sp.take(path)
    assert first is not None
    assert sp.take(path) is None  # a second open file description: the flock is held
    sp.done(first)
    assert sp.take(path) is None  # removed


def test_a_file_removed_while_waiting_for_its_lock_is_not_sent_again(tmp_path):
    spool = sp.Spool(tmp_path, "job", "w", 1 << 20)
    path = spool.put(request(1), URL)
    fd = os.open(path, os.O_RDWR)  # a replayer that opened the file before the owner removed it
    entry = sp.take(path)
    sp.done(entry)
    assert os.fstat(fd).st_nlink == 0
    os.close(fd)


def test_the_owner_lock_keeps_other_processes_out_of_a_live_directory(tmp_path):
    spool = sp.Spool(tmp_path, "job", "w", 1 << 20)
    assert spool.claim()
    spool.put(request(1), URL)
    assert sp.claim_dir(spool.dir) is None
    spool.release()
    fd = sp.claim_dir(spool.dir)
    assert fd is not None
    sp.release_dir(spool.dir, fd, remove=True)
    assert spool.dir.exists()  # not removed: a file is still waiting


def test_orphan_dirs_lists_other_directories_with_files(tmp_path):
    mine = sp.Spool(tmp_path, "job-a", "worker-0", 1 << 20)
    other = sp.Spool(tmp_path, "job-b", "worker-1", 1 << 20)
    empty = sp.Spool(tmp_path, "job-c", "worker-0", 1 << 20)
    mine.put(request(1), URL)
    other.put(request(2), URL)
    empty.dir.mkdir(parents=True)
    assert list(sp.orphan_dirs(tmp_path, skip=mine.dir)) == [other.dir]


def test_an_empty_directory_is_removed_when_its_owner_leaves(tmp_path):
    spool = sp.Spool(tmp_path, "job", "w", 1 << 20)
    spool.claim()
    entry = sp.take(spool.put(request(1), URL))
    sp.done(entry)
    spool.release()
    assert not spool.dir.exists() and not spool.dir.parent.exists()


def test_ids_are_made_safe_for_the_file_system():
    assert sp.dir_name("a/b") == "a%2Fb"
    assert sp.dir_name("..") == "%.."
    assert sp.dir_name("worker-0") == "worker-0"


def test_foreign_files_are_never_sent(tmp_path):
    (tmp_path / "j" / "w").mkdir(parents=True)
    path = tmp_path / "j" / "w" / "0001-1-00000001.jpr"
    path.write_bytes(b"not a spool file")
    assert sp.take(path) is None
    assert path.exists()
