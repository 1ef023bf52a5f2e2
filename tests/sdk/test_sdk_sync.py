"""``jobpulse sync``: the spool sent on demand, against the session's real server."""

from __future__ import annotations

import time

import pytest
import sdk_support as s

from jobpulse.cli import main
from jobpulse.sdk import spool as sp
from jobpulse.sdk.run import Run
from jobpulse.store.identity import now_ms
from jobpulse.testing import free_port

pytestmark = pytest.mark.e2e


def _spooled_run(tmp_path, url: str, api_key: str, job: str, steps: int = 50) -> Run:
    """A finished run that could not deliver to ``url`` (down, or refusing ``api_key``): all of it spooled."""
    run = Run(
        project="sync",
        job=job,
        worker="worker-0",
        url=url,
        api_key=api_key,
        config={"lr": 0.25},
        capture_console=False,
        handle_sigterm=False,
        spool_dir=tmp_path / "spool",
        replay_spool=False,
        flush_timeout=0.5,
        never_raise=True,  # a refused key: keep the data for a later sync instead of raising
    )
    for step in range(steps):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
    delivery = run.finish(timeout=0.5)
    assert delivery is not None and delivery.sent_events == 0 and delivery.spooled_requests > 0
    return run


def _files(tmp_path) -> list:
    return [p for d in sp.orphan_dirs(tmp_path / "spool") for p in sp.spool_files(d)]


def _sync(tmp_path, url: str, api_key: str, *extra: str) -> int:
    return main(["sync", "--spool-dir", str(tmp_path / "spool"), "--url", url, "--api-key", api_key, *extra])


def test_sync_sends_what_a_run_kept_while_its_key_was_refused(server, tmp_path, capsys):
    _spooled_run(tmp_path, server.url, "jp_notakey_0000000000000000", "sync-refused")
    assert _sync(tmp_path, server.url, server.api_key) == 0
    assert "of 1 job(s)" in capsys.readouterr().out
    assert s.all_points(server, "sync-refused", "loss", "loss")["iter"] == list(range(50))
    assert s.api_get(server, "/jp/v1/jobs/sync-refused")["job"]["config"] == {"lr": 0.25}
    assert _files(tmp_path) == []
    assert not (tmp_path / "spool" / "sync-refused").exists()


def test_a_run_synced_later_keeps_the_times_it_ran_at(server, tmp_path):
    ran_from = now_ms()
    _spooled_run(tmp_path, f"http://127.0.0.1:{free_port()}", "k", "sync-late")
    ran_to = now_ms()
    time.sleep(0.05)
    synced_at = now_ms()
    assert _sync(tmp_path, server.url, server.api_key, "--any-url") == 0
    answer = s.api_get(server, "/jp/v1/jobs/sync-late")
    job, (worker,) = answer["job"], answer["workers"]
    assert ran_from <= job["created"] <= job["started"] <= job["ended"] <= ran_to < synced_at
    assert (worker["started"], worker["ended"]) == (job["started"], job["ended"])
    assert worker["updated"] >= synced_at  # when the server stored it


def test_list_shows_what_waits_and_sends_nothing(server, tmp_path, capsys):
    _spooled_run(tmp_path, server.url, "jp_notakey_0000000000000000", "sync-listed")
    waiting = _files(tmp_path)
    capsys.readouterr()
    assert main(["sync", "--list", "--spool-dir", str(tmp_path / "spool")]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[0].split()[:4] == ["JOB", "WORKER", "REQUESTS", "EVENTS"]
    row = listing[1].split()
    assert row[:3] == ["sync-listed", "worker-0", str(len(waiting))]
    assert row[-1] == server.url
    assert _files(tmp_path) == waiting


def test_requests_for_another_server_are_left_unless_any_url_is_given(server, tmp_path, capsys):
    elsewhere = f"http://127.0.0.1:{free_port()}"
    _spooled_run(tmp_path, elsewhere, "k", "sync-moved")
    waiting = _files(tmp_path)
    assert _sync(tmp_path, server.url, server.api_key) == 1
    assert f"left {len(waiting)} request(s) recorded for {elsewhere}" in capsys.readouterr().err
    assert _files(tmp_path) == waiting
    assert _sync(tmp_path, server.url, server.api_key, "--any-url") == 0
    assert len(s.all_points(server, "sync-moved", "loss", "loss")["iter"]) == 50
    assert _files(tmp_path) == []


def test_an_unreachable_server_stops_the_sync_and_keeps_every_request(tmp_path, capsys):
    down = f"http://127.0.0.1:{free_port()}"
    _spooled_run(tmp_path, down, "k", "sync-down")
    waiting = _files(tmp_path)
    assert _sync(tmp_path, down, "k") == 1
    err = capsys.readouterr().err
    assert "stopped: ConnectionRefusedError" in err and f"{len(waiting)} request(s) are still in" in err
    assert _files(tmp_path) == waiting


def test_a_refused_key_stops_the_sync_and_keeps_every_request(server, tmp_path, capsys):
    _spooled_run(tmp_path, server.url, "jp_notakey_0000000000000000", "sync-badkey")
    waiting = _files(tmp_path)
    assert _sync(tmp_path, server.url, "jp_stillnotakey_000000000000") == 1
    assert "stopped: HTTP 401" in capsys.readouterr().err
    assert _files(tmp_path) == waiting


def test_a_directory_a_live_process_writes_is_left_to_it(server, tmp_path, capsys):
    _spooled_run(tmp_path, server.url, "jp_notakey_0000000000000000", "sync-live")
    directory = tmp_path / "spool" / "sync-live" / "worker-0"
    waiting = _files(tmp_path)
    held = sp.claim_dir(directory)  # as the writing process holds it
    assert held is not None
    try:
        assert _sync(tmp_path, server.url, server.api_key) == 0
        assert "a running process writes it" in capsys.readouterr().err
        assert _files(tmp_path) == waiting
    finally:
        sp.release_dir(directory, held, remove=False)


def test_an_empty_spool_is_said_so(tmp_path, capsys):
    assert _sync(tmp_path, "http://127.0.0.1:9", "k") == 0
    assert capsys.readouterr().out.startswith("nothing spooled in")
