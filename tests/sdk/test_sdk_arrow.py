"""Scalars sent as Arrow streams: what the stream holds, how it splits, and what happens without pyarrow."""

from __future__ import annotations

import math
import subprocess
import sys
import urllib.parse

import orjson
import pyarrow as pa
import pytest
import sdk_support as s

from jobpulse.sdk.arrow import CONTENT_TYPE, load
from jobpulse.sdk.split import split_request
from jobpulse.sdk.wire import Batch

TS_NS = 1_700_000_000_000_000_000


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, kind, message):
        self.calls.append((kind, message))


def rows(request) -> list[dict]:
    return pa.ipc.open_stream(request.body).read_all().to_pylist()


def logged_batch(problems=None) -> Batch:
    batch = Batch("vision", "run 1", "worker-0", problems or Recorder())
    for step in range(3):
        batch.add_dict(TS_NS + step * 1_000_000, step, {"train/loss": 1.0 / (step + 1), "lr": 0.1})
    batch.add_dict(TS_NS + 3_000_000, 3, {"train/loss": float("nan"), "lr": float("-inf")})
    batch.add_scalar(TS_NS + 4_000_000, "eval", "acc", 3, 0.75)
    return batch


def test_scalars_travel_as_one_arrow_stream_named_by_its_query():
    batch = logged_batch()
    batch.add_line(1_700_000_000_000, 7, "info", "hello")
    arrow, lines = batch.requests(None, load())
    assert arrow.content_type == CONTENT_TYPE and arrow.encoding == "" and arrow.events == 9
    path, _, query = arrow.path.partition("?")
    assert path == "/jp/v1/ingest"
    assert dict(urllib.parse.parse_qsl(query)) == {
        "project": "vision", "job": "run 1", "worker": "worker-0", "kind": "scalar"
    }  # fmt: skip
    got = [(r["metric"], r["variant"], r["iter"], r["ts"], r["value"]) for r in rows(arrow)]
    loss = ("train/loss", "train/loss")
    assert got[:4] == [(*loss, i, 1_700_000_000_000 + i, v) for i, v in enumerate([1.0, 0.5, 1 / 3])] + [
        (*loss, 3, 1_700_000_000_003, got[3][4])
    ]
    assert math.isnan(got[3][4])
    assert got[4:8] == [("lr", "lr", i, 1_700_000_000_000 + i, v) for i, v in enumerate([0.1, 0.1, 0.1, -math.inf])]
    assert got[8] == ("eval", "acc", 3, 1_700_000_000_004, 0.75)
    assert lines.content_type == "application/json"  # log lines keep the columnar form
    assert [s["kind"] for s in orjson.loads(lines.body)["series"]] == ["log"]


def test_the_stream_is_compressed_and_its_names_are_dictionaries():
    batch = Batch("p", "j", "w", Recorder())
    for step in range(5000):
        batch.add_dict(TS_NS + step * 1_000_000, step, {"loss": 1.0, "acc": 0.5})
    (request,) = batch.requests(None, load())
    table = pa.ipc.open_stream(request.body).read_all()
    assert pa.types.is_dictionary(table.schema.field("metric").type)
    assert table.num_rows == 10_000 and len(request.body) < 10_000 * 24 // 4


def test_an_arrow_request_splits_into_two_streams_of_the_same_points():
    (request,) = logged_batch().requests(None, load())
    first, second = split_request(request)
    assert (first.events, second.events) == (4, 5)
    assert first.path == second.path == request.path and first.content_type == CONTENT_TYPE
    whole = [tuple(r.values()) for r in rows(request)]
    parts = [tuple(r.values()) for part in (first, second) for r in rows(part)]
    assert repr(parts) == repr(whole)  # NaN compares unequal to itself; its repr does not


def test_a_failing_encoder_leaves_the_points_to_the_columnar_form():
    class Broken:
        def body(self, scalars):
            raise RuntimeError("no memory")

    problems = Recorder()
    (request,) = logged_batch(problems).requests(None, Broken())
    assert request.content_type == "application/json" and request.events == 9
    assert [kind for kind, _ in problems.calls] == ["arrow-error"]


def test_encoding_imports_neither_pandas_nor_anything_at_interpreter_exit():
    # pyarrow.array() of a Python list imports pandas when it is installed; at exit that import fails
    code = """
import atexit, sys
def at_exit():
    from jobpulse.sdk.arrow import load
    from jobpulse.sdk.wire import Batch
    batch = Batch("p", "j", "w", print)
    batch.add_dict(1, 0, {"a": 1.0, "b": float("nan")})
    (request,) = batch.requests(None, load())
    print(request.content_type, request.events, "pandas" in sys.modules)
atexit.register(at_exit)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [CONTENT_TYPE, "2", "False"]
    assert done.stderr == ""


@pytest.mark.parametrize("send_arrow", [True, False])
def test_the_sender_loads_the_encoder_as_it_starts_unless_told_not_to(tmp_path, send_arrow):
    from collections import deque

    from jobpulse.sdk.sender import Sender, SenderConfig

    config = SenderConfig("http://jobpulse.invalid:1", None, "p", "j", "w", tmp_path / "spool", arrow=send_arrow)
    sender = Sender(config, deque(), Recorder())
    sender._startup()
    assert (sender._arrow is not None) is send_arrow
    sender.spool.release()


def test_both_forms_store_the_same_points(server, tmp_path):
    from jobpulse.sdk.run import Run

    stored = {}
    for send_arrow in (True, False):
        job = f"arrow-{send_arrow}".lower()
        run = Run(project="e2e", job=job, **s.run_options(server, tmp_path / job, send_arrow=send_arrow))
        for step in range(2000):
            value = float("nan") if step == 7 else float("inf") if step == 8 else step / 3
            run.log({"train/loss": value, "lr": 0.5}, step=step)
        run.scalar("eval", "acc", 0.75, iter=1999)
        delivery = run.finish()
        assert delivery.sent_events == 4001 and delivery.dropped_events == 0
        stored[send_arrow] = [
            {field: found[field] for field in ("metric", "variant", "iter", "value")}
            for metric, variant in (("train/loss", "train/loss"), ("lr", "lr"), ("eval", "acc"))
            for found in [s.all_points(server, job, metric, variant)]
        ]
    assert stored[True] == stored[False]
    loss = stored[True][0]
    assert loss["iter"] == list(range(2000)) and loss["value"][7:10] == ["NaN", "Infinity", 3.0]
