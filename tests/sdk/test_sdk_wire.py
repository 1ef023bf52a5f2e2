"""Encoding of queued records into ingest requests."""

from __future__ import annotations

import math

import orjson
import pytest
import zstandard

from jobpulse.sdk.split import split_request
from jobpulse.sdk.values import ITER_MAX, check_iter, plot_json
from jobpulse.sdk.wire import Batch, Request, key_series, wire_number


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, kind, message):
        self.calls.append((kind, message))


def decode(request):
    body = request.body
    if request.encoding == "zstd":
        body = zstandard.ZstdDecompressor().decompressobj().decompress(body)
    if request.content_type == "application/json":
        return orjson.loads(body)
    return [orjson.loads(line) for line in body.splitlines()]


def test_a_key_is_its_series_as_written():
    assert key_series("loss") == ("loss", "loss")
    assert key_series("train/loss") == ("train/loss", "train/loss")
    assert key_series("eval/glue/acc") == ("eval/glue/acc", "eval/glue/acc")
    assert key_series("/x") == ("/x", "/x")
    assert key_series("x/") == ("x/", "x/")


def test_non_finite_values_become_their_wire_strings():
    assert wire_number(float("nan")) == "NaN"
    assert wire_number(float("inf")) == "Infinity"
    assert wire_number(-math.inf) == "-Infinity"
    assert wire_number(3) == 3.0
    assert wire_number(True) == 1.0
    with pytest.raises(TypeError):
        wire_number("1.5")


def test_numpy_scalars_are_numbers():
    np = pytest.importorskip("numpy")
    assert wire_number(np.float32(0.5)) == 0.5
    assert wire_number(np.float64("nan")) == "NaN"
    assert wire_number(np.int64(7)) == 7.0


def test_iteration_range_is_checked():
    assert check_iter(ITER_MAX) == ITER_MAX
    with pytest.raises(ValueError):
        check_iter(ITER_MAX + 1)
    with pytest.raises(ValueError):
        check_iter(-(2**31) - 1)


def test_log_dicts_become_one_columnar_series_per_metric_and_variant():
    batch = Batch("p", "j", "worker-1", Recorder())
    for step in range(3):
        ts_ns = 1_700_000_000_000_000_000 + step * 1_000_000
        batch.add_dict(ts_ns, step, {"train/loss": 1.0 / (step + 1), "lr": 0.1})
    batch.add_dict(1_700_000_000_003_000_000, 3, {"train/loss": float("nan")})
    (request,) = batch.requests(None)
    doc = decode(request)
    assert (doc["project"], doc["job"], doc["worker"]) == ("p", "j", "worker-1")
    series = {(s["metric"], s["variant"]): s for s in doc["series"]}
    assert set(series) == {("train/loss", "train/loss"), ("lr", "lr")}
    loss = series[("train/loss", "train/loss")]
    assert loss["kind"] == "scalar"
    assert loss["iter"] == [0, 1, 2, 3]
    assert loss["ts"] == [1_700_000_000_000, 1_700_000_000_001, 1_700_000_000_002, 1_700_000_000_003]
    assert loss["value"][:3] == [1.0, 0.5, pytest.approx(1 / 3)]
    assert loss["value"][3] == "NaN"
    assert request.events == 7


def test_bad_values_are_dropped_and_reported_once_per_kind():
    problems = Recorder()
    batch = Batch("p", "j", "w", problems)
    batch.add_dict(1_700_000_000_000_000_000, 0, {"a": "text", "b": None, "c": 1.0})
    batch.add_dict(1_700_000_000_000_000_000, "x", {"c": 1.0})
    assert batch.points == 1
    assert [kind for kind, _ in problems.calls] == ["not-a-number", "not-a-number", "bad-step"]


def test_log_lines_are_grouped_by_level_and_keep_their_seq_and_ts():
    batch = Batch("p", "j", "w", Recorder())
    batch.add_line(1_700_000_000_000, 11, "info", "a")
    batch.add_line(1_700_000_000_001, 12, "error", "b")
    batch.add_line(1_700_000_000_002, 13, "info", "c")
    doc = decode(batch.requests(None)[0])
    logs = {s["level"]: s for s in doc["series"]}
    assert logs["info"]["seq"] == [11, 13] and logs["info"]["msg"] == ["a", "c"]
    assert logs["info"]["ts"] == [1_700_000_000_000, 1_700_000_000_002] and logs["info"]["kind"] == "log"
    assert logs["error"]["seq"] == [12]


def test_vectors_and_plots_travel_as_json_lines():
    batch = Batch("p", "j", "w", Recorder())
    batch.add_vector(1_700_000_000_000_000_000, "hist", "h", 5, [1, float("inf")])
    batch.add_plot(1_700_000_000_000_000_000, "fig", "f", 5, plot_json({"data": [{"y": [1, 2]}]}))
    (request,) = batch.requests(None)
    assert request.content_type == "application/x-ndjson"
    vector, plot = decode(request)
    assert vector["values"] == [1.0, "Infinity"] and vector["job"] == "j" and vector["iter"] == 5
    assert plot["plot"] == {"data": [{"y": [1, 2]}]}


def test_large_bodies_are_zstd_compressed():
    batch = Batch("p", "j", "w", Recorder())
    for i in range(500):
        batch.add_dict(1_700_000_000_000_000_000, i, {"loss": i * 0.5})
    compress = zstandard.ZstdCompressor(level=3).compress
    (request,) = batch.requests(compress)
    assert request.encoding == "zstd"
    assert decode(request)["series"][0]["iter"] == list(range(500))


def test_plot_json_accepts_figures_dicts_and_strings():
    assert orjson.loads(plot_json('{"data": []}')) == {"data": []}
    with pytest.raises(TypeError):
        plot_json([1, 2])
    plotly = pytest.importorskip("plotly.graph_objects")
    fig = plotly.Figure(data=[plotly.Scatter(y=[1, 2, 3])])
    assert orjson.loads(plot_json(fig))["data"][0]["y"] == [1, 2, 3]


def test_log_dicts_with_changing_keys_and_scalars_keep_the_order_of_every_series():
    problems = Recorder()
    batch = Batch("p", "j", "w", problems)
    ts = 1_700_000_000_000_000_000
    batch.add_dict(ts, 0, {"loss": 1.0, "lr": 0.1})
    batch.add_dict(ts, 1, {"lr": 0.2, "loss": 2.0})  # same keys, another order: same block
    batch.add_dict(ts, 2, {"loss": 3.0, "eval/acc": 0.5})
    batch.add_scalar(ts, "loss", "loss", 2, 3.5)  # after the run.log point of the same iteration
    batch.add_dict(ts, 3, {"loss": 4.0, 7: 1.0, "lr": float("inf")})
    batch.add_dict(ts, 4, {"loss": 5.0, "lr": 0.5})
    assert batch.points == 11
    (request,) = batch.requests(None)
    series = {(s["metric"], s["variant"]): (s["iter"], s["value"]) for s in decode(request)["series"]}
    assert series == {
        ("loss", "loss"): ([0, 1, 2, 2, 3, 4], [1.0, 2.0, 3.0, 3.5, 4.0, 5.0]),
        ("lr", "lr"): ([0, 1, 3, 4], [0.1, 0.2, "Infinity", 0.5]),
        ("eval/acc", "eval/acc"): ([2], [0.5]),
    }
    assert request.events == 11
    assert [kind for kind, _ in problems.calls] == ["bad-key"]


@pytest.mark.parametrize("encoding", ["", "zstd"])
def test_split_request_halves_the_events_and_keeps_every_field(encoding):
    batch = Batch("p", "j", "w", Recorder())
    for i in range(7):
        batch.add_dict(1_700_000_000_000_000_000 + i * 1_000_000, i, {"a": float(i), "b/c": -float(i)})
    batch.add_line(1_700_000_000_000, 5, "info", "hello")
    compress = zstandard.ZstdCompressor(level=3).compress if encoding else None
    (request,) = batch.requests(compress)
    assert request.encoding == encoding and request.events == 15
    first, second = split_request(request)
    assert (first.events, second.events) == (7, 8) and first.encoding == second.encoding == encoding
    whole = decode(request)
    points = []
    for part in (first, second):
        doc = decode(part)
        assert (doc["project"], doc["job"], doc["worker"]) == ("p", "j", "w")
        for s in doc["series"]:
            fixed = {k: v for k, v in s.items() if not isinstance(v, list)}
            columns = [k for k, v in s.items() if isinstance(v, list)]
            points.extend((tuple(fixed.items()), *(s[k][n] for k in columns)) for n in range(len(s["ts"])))
    expected = []
    for s in whole["series"]:
        fixed = {k: v for k, v in s.items() if not isinstance(v, list)}
        columns = [k for k, v in s.items() if isinstance(v, list)]
        expected.extend((tuple(fixed.items()), *(s[k][n] for k in columns)) for n in range(len(s["ts"])))
    assert points == expected


def test_split_request_of_json_lines_and_what_cannot_be_split():
    batch = Batch("p", "j", "w", Recorder())
    for i in range(5):
        batch.add_vector(1_700_000_000_000_000_000, "hist", "h", i, [1, 2])
    (request,) = batch.requests(None)
    first, second = split_request(request)
    assert [e["iter"] for e in decode(first)] == [0, 1] and [e["iter"] for e in decode(second)] == [2, 3, 4]
    assert (first.events, second.events) == (2, 3)
    one = Batch("p", "j", "w", Recorder())
    one.add_dict(1_700_000_000_000_000_000, 0, {"a": 1.0})
    assert split_request(one.requests(None)[0]) is None  # a single event
    assert split_request(Request("PUT", "/jp/v1/jobs/j/files/x", b"\x89PNG", "image/png", kind="file")) is None
    assert split_request(Request("POST", "/jp/v1/ingest", b"{not json", events=2)) is None


def test_a_batch_is_fresh_while_every_point_is_above_its_series_frontier():
    ts = 1_700_000_000_000_000_000
    assert Batch("p", "j", "w", Recorder()).fresh  # empty: fresh
    unknown = Batch("p", "j", "w", Recorder())  # no frontier known: nothing is fresh
    unknown.add_dict(ts, 10, {"loss": 1.0})
    assert not unknown.fresh
    frontier = {("loss", "loss"): 9, ("train/acc", "train/acc"): 20}
    batch = Batch("p", "j", "w", Recorder(), frontier)
    batch.add_dict(ts, 10, {"loss": 1.0, "lr": 0.1})  # lr: nothing stored
    batch.add_dict(ts, 5, {"lr": 0.1})
    batch.add_scalar(ts, "train/acc", "train/acc", 21, 0.5)
    assert batch.fresh
    batch.add_dict(ts, 20, {"train/acc": 0.5})  # iteration 20 of train/acc is stored
    assert not batch.fresh
    batch.requests(None)
    batch.advance(frontier)
    assert frontier == {("loss", "loss"): 10, ("train/acc", "train/acc"): 21, ("lr", "lr"): 10}
