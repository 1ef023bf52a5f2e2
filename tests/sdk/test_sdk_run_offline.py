"""A run whose server cannot be reached: nothing raises, nothing blocks, everything is spooled."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import pytest

from jobpulse.sdk import spool as sp
from jobpulse.sdk.run import Run
from jobpulse.testing import free_port


@pytest.fixture
def offline_run(tmp_path):
    runs = []

    def make(**options):
        opts = dict(
            project="offline",
            job="offline-1",
            url=f"http://127.0.0.1:{free_port()}",  # nothing listens there
            api_key="k",
            capture_console=False,
            handle_sigterm=False,
            spool_dir=tmp_path / "spool",
            replay_spool=False,
            flush_timeout=1.0,
        )
        opts.update(options)
        run = Run(**opts)
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.finish(timeout=0.5)


def test_bad_values_never_raise_and_are_reported_once_per_kind(offline_run, capfd):
    run = offline_run()
    run.log({"x": "not a number"}, step=1)
    run.log({"x": object()}, step=2)
    run.plot(object())
    run.image(12345)
    run.vector("m", "v", 5)  # type: ignore[arg-type]
    run.flush(timeout=0.5)
    err = capfd.readouterr().err
    assert err.count("is not a number") == 1
    assert "run.plot could not encode" in err
    assert "image" in err and "could not be read" in err
    assert "run.vector values are not a sequence" in err


def test_finish_spools_what_it_cannot_deliver_and_says_where(offline_run, capfd):
    run = offline_run()
    for step in range(100):
        run.log({"loss": 1.0 / (step + 1), "acc": step / 100}, step=step)
    run.text("a line")
    started = time.monotonic()
    delivery = run.finish()
    elapsed = time.monotonic() - started
    assert elapsed < 3.0  # flush_timeout is 1 s
    assert delivery.sent_events == 0
    assert delivery.spooled_events == 201
    spool_dir = delivery.spool_dir
    assert sum(sp.read_header(p)["events"] for p in sp.spool_files(spool_dir)) == 201
    err = capfd.readouterr().err
    assert "201 event(s)" in err and str(spool_dir) in err and "`jobpulse sync` sends them" in err


def test_report_calls_after_finish_are_ignored(offline_run, capfd):
    run = offline_run()
    run.finish(timeout=0.2)
    run.log({"x": 1.0})
    run.scalar("x", "x", 1.0, 1)
    assert len(run._q) == 0
    assert "after the run offline-1/worker-0 finished is ignored" in capfd.readouterr().err


def test_a_full_queue_drops_records_and_says_so(offline_run, capfd):
    run = offline_run(max_queue=5, flush_interval=60.0)
    for step in range(50):
        run.log({"x": 1.0}, step=step)
    assert len(run._q) <= 5
    assert "the report queue is full" in capfd.readouterr().err


def test_the_context_manager_marks_an_exception_as_failed(offline_run):
    run = offline_run()
    with pytest.raises(ZeroDivisionError), run:
        1 / 0  # noqa: B018
    assert run.status == "failed"
    lines = [rec for rec in _spooled_lines(run)]
    assert any("ZeroDivisionError" in msg for level, msg in lines if level == "error")


def _spooled_lines(run):
    import orjson
    import zstandard

    for path in sp.spool_files(run.delivery.spool_dir):
        entry = sp.take(path)
        body = entry.request.body
        sp.put_back(entry)
        if entry.request.encoding == "zstd":
            body = zstandard.ZstdDecompressor().decompressobj().decompress(body)
        if entry.request.path != "/jp/v1/ingest" or entry.request.content_type != "application/json":
            continue
        for series in orjson.loads(body)["series"]:
            if series["kind"] == "log":
                for msg in series["msg"]:
                    yield series["level"], msg


def test_steps_count_on_from_the_last_one(offline_run):
    run = offline_run(flush_interval=60.0)
    run.log({"a": 1.0})
    run.log({"a": 1.0})
    run.log({"a": 1.0}, step=10)
    run.log({"a": 1.0})
    assert [rec[2] for rec in list(run._q) if rec[0] == 0] == [0, 1, 10, 11]


def test_log_is_cheap_with_the_sender_running(offline_run):
    run = offline_run(flush_interval=0.05)
    values = {"loss": 0.5, "acc": 0.9, "lr": 3e-4, "grad_norm": 1.2, "tokens": 4096.0}
    costs = []
    clock = time.perf_counter_ns
    for step in range(20_000):
        t0 = clock()
        run.log(values, step=step)
        costs.append(clock() - t0)
    assert statistics.median(costs) / 1000 < 20  # µs; bench/bench_sdk.py measures it properly


def test_importing_jobpulse_starts_nothing_and_loads_nothing_heavy():
    code = (
        "import sys, threading, jobpulse\n"
        "assert threading.active_count() == 1\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('orjson', 'zstandard', 'fastapi', 'chdb', "
        "'pyarrow', 'numpy') or m.startswith(('jobpulse.sdk', 'jobpulse.server', 'jobpulse.store'))]\n"
        "assert not heavy, heavy\n"
        "jobpulse.init\n"
        "server = [m for m in sys.modules if m.split('.')[0] in ('fastapi', 'chdb', 'pyarrow', 'numpy') "
        "or m.startswith(('jobpulse.server', 'jobpulse.store'))]\n"
        "assert not server, server\n"
        "assert threading.active_count() == 1\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
