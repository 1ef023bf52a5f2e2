"""The fast path of JSON lines: whatever body it takes, it stores and answers exactly what the per-line path would.

Each test runs both paths on the same body in-process (``add_events_fast`` and ``parse_each_line``) and compares
everything a batch carries: the rows of every table, the accepted count, the errors per reason with their examples, the
jobs with their projects, the workers and the first timestamps. Bodies the fast path must leave (a bad line, another
kind) are checked to leave the batch untouched, so that the per-line path's answer stands as it was.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pytest

from helpers import NOW_MS, lines, post_lines
from jobpulse.errors import BadRequest, PayloadTooLarge
from jobpulse.ingest import lines as lines_module
from jobpulse.ingest.batch import Batch
from jobpulse.ingest.lines import load_lines, parse_each_line
from jobpulse.ingest.lines_fast import add_events_fast
from jobpulse.ingest.parse import parse_body
from lines_cases import DEFAULTS, TS, assert_same, log, random_event, scalar, system


def fast_path(body: bytes, defaults: dict, batch: Batch, max_events: int = 10_000) -> bool:
    """Whether the fast path takes ``body`` (it then fills ``batch``)."""
    events = load_lines(body, max_events)
    return events is not None and add_events_fast(events, defaults, batch, NOW_MS)


def both(body: bytes, defaults: dict | None = None, max_events: int = 10_000) -> tuple[bool, Batch, Batch]:
    """Whether the fast path took ``body``, what it built, and what the per-line path builds of it."""
    defaults = DEFAULTS if defaults is None else defaults
    fast, slow = Batch(), Batch()
    took = fast_path(body, defaults, fast, max_events)
    parse_each_line(body, defaults, slow, max_events, NOW_MS)
    return took, fast, slow


def assert_taken_and_same(body: bytes, defaults: dict | None = None) -> Batch:
    took, fast, slow = both(body, defaults)
    assert took
    assert slow.accepted > 0 and slow.rejected == 0
    assert_same(fast, slow)
    return fast


# -- bodies the fast path takes ------------------------------------------------------------------------


def test_a_body_of_scalars_is_taken_and_stored_as_the_per_line_path_stores_it():
    body = lines(*(scalar(metric=f"m{i % 3}", iter=i // 3, value=i / 7, ts=TS + i) for i in range(300)))
    fast = assert_taken_and_same(body)
    assert fast.accepted == 300 and fast.tables()["scalars"].num_rows == 300


def test_parse_body_answers_a_fast_body_as_the_per_line_path_does():
    body = lines(*(scalar(iter=i, value=float(i)) for i in range(50)), log(), system())
    slow = Batch()
    parse_each_line(body, DEFAULTS, slow, 1000, NOW_MS)
    got = parse_body(body, "application/x-ndjson", DEFAULTS, max_events=1000, now_ms=NOW_MS)
    assert got.frames and not got.rows  # taken by the fast path
    assert_same(got, slow)


def test_events_naming_their_own_jobs_projects_and_workers():
    events = [
        scalar(job="a", iter=1),
        scalar(job="b", project="p2", iter=1, worker="host:1"),
        scalar(job="a", project="p1", iter=2, ts=TS - 5),  # the first project named for job a
        scalar(job="a", project="p3", iter=3),  # a later one does not replace it
        log(job="c", project=None, worker="w/1", seq=3),
        system(job="b", worker="w@2", ts=TS - 9),
        log(job="a", seq=4),
    ]
    fast = assert_taken_and_same(lines(*events), {"project": None, "job": None, "worker": None})
    assert list(fast.jobs.items()) == [("a", "p1"), ("b", "p2"), ("c", None)]


@pytest.mark.parametrize("jobs", [["j1"], ["a", "b"]], ids=["one job", "two jobs"])
def test_a_job_starts_at_its_earliest_event_not_its_first(jobs):
    offsets = [5, -3, 0, 7, -8, 2]
    events = [scalar(job=jobs[i % len(jobs)], iter=i, ts=TS + d) for i, d in enumerate(offsets)]
    fast = assert_taken_and_same(lines(*events))
    assert fast.first_ts == ({"j1": TS - 8} if len(jobs) == 1 else {"a": TS - 8, "b": TS - 3})


def test_mixed_kinds_keep_their_order_within_each_table():
    events = [
        log(seq=1, msg="first"),
        scalar(iter=1, value=1.0),
        system(ts=TS + 1),
        scalar(iter=1, value=2.0),  # the same point twice: the later one must stay later
        log(seq=2, msg="second"),
        system(ts=TS + 2, device="1"),
        scalar(iter=0, value=3.0),
    ]
    fast = assert_taken_and_same(lines(*events))
    assert list(fast.tables()) == ["logs", "scalars", "system"]
    assert fast.tables()["scalars"]["value"].to_pylist() == [1.0, 2.0, 3.0]


def test_unicode_names_messages_and_escapes():
    events = [
        scalar(metric="pérte/λ", variant="训练"),
        scalar(metric="emoji 😀", variant='tab\tand "quotes" \\ back', iter=2),
        log(msg="ünïcödé ✓ \u2028 line\nbreak 😀"),
        system(metric="temp_°C"),
    ]
    as_utf8 = lines(*events)
    as_escapes = b"\n".join(json.dumps(e).encode() for e in events)  # \uXXXX escapes, surrogate pairs included
    fast = assert_taken_and_same(as_utf8)
    assert_same(assert_taken_and_same(as_escapes), fast)
    assert fast.tables()["scalars"]["metric"].to_pylist() == ["pérte/λ", "emoji 😀"]


def test_numbers_as_ints_or_floats():
    events = [
        scalar(iter=0, value=1),  # an int value: stored as the float 1.0
        scalar(iter=1.0, value=2.5),  # a whole float iter: taken as the int 1
        scalar(iter=2, value=-0.0, ts=TS + 0.9),  # a float ts: truncated
        scalar(iter=3, value=2**53 + 1),  # ints past float precision round as float(int) does
        scalar(iter=4, value=2**63 + 1),
        scalar(iter=5, value=2**64 - 1),
        scalar(iter=6, value=-(2**63)),
        scalar(iter=-(2**31), value=1e308),
        scalar(iter=2**53, value=5e-324),
        scalar(iter=9, value=float(TS)),
    ]
    fast = assert_taken_and_same(lines(*events))
    table = fast.tables()["scalars"]
    assert table["value"].to_pylist()[:6] == [1.0, 2.5, -0.0, float(2**53 + 1), float(2**63 + 1), float(2**64 - 1)]
    assert table["iter"].to_pylist()[:3] == [0, 1, 2]


def test_non_finite_values_spelled_as_strings():
    events = [scalar(iter=i, value=v) for i, v in enumerate(["NaN", "nan", "Infinity", "inf", "-Infinity", "-inf", 1])]
    fast = assert_taken_and_same(lines(*events))
    values = fast.tables()["scalars"]["value"].to_pylist()
    assert np.isnan(values[:2]).all() and values[2:] == [np.inf, np.inf, -np.inf, -np.inf, 1.0]


def test_missing_optional_fields_take_their_defaults():
    events = [
        {"kind": "scalar", "metric": "loss", "iter": 1, "value": 0.5},  # no ts: now; no variant, no worker
        {"kind": "scalar", "metric": "loss", "variant": None, "iter": 2, "value": 0.5},
        {"type": "scalar", "metric": "loss", "iter": 3, "value": 0.5},  # 'type' stands for a missing 'kind'
        {"kind": "log", "seq": 0, "msg": ""},  # no level: info; no worker: worker-0
        {"kind": "system", "metric": "cpu", "value": 3},  # no device: the host
        {"kind": "log", "seq": 1, "msg": "x", "worker": "", "level": None},
    ]
    fast = assert_taken_and_same(lines(*events))
    assert fast.tables()["scalars"]["ts"].cast(pa.int64()).to_pylist() == [NOW_MS] * 3
    assert fast.tables()["logs"]["worker"].to_pylist() == ["worker-0", "worker-0"]


def test_spellings_the_rules_normalise():
    events = [
        log(seq=1, level="WARN"),
        log(seq=2, level="fatal"),
        log(seq=3, level="Info"),
        log(seq=2**63 + 5),  # seq is unsigned 64-bit
        system(device=3),  # an integer device is written as a string
        system(device="3", ts=TS + 1),
        system(device=""),
    ]
    fast = assert_taken_and_same(lines(*events))
    assert fast.tables()["logs"]["level"].to_pylist() == ["warning", "critical", "info", "info"]
    assert fast.tables()["system"]["device"].to_pylist() == ["3", "3", ""]


def test_model_event_is_any_true_value():
    flags = [True, 1, "yes", [0], {"a": 1}, False, 0, "", [], None]
    fast = assert_taken_and_same(lines(*(scalar(iter=i, model_event=f) for i, f in enumerate(flags))))
    assert fast.tables()["scalars"]["model_event"].to_pylist() == [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]


def test_blank_lines_crlf_and_surrounding_spaces_are_skipped_as_before():
    one, two = orjson.dumps(scalar(iter=1)), orjson.dumps(scalar(iter=2))
    body = b"\n  \n" + one + b"\r\n\t\n  " + two + b" \r\n\n"
    assert assert_taken_and_same(body).accepted == 2


def test_unknown_and_nested_fields_are_ignored():
    events = [scalar(extra={"nested": [1, {"deep": None}]}, tags=["a"]), log(context=None, meta={"k": 1.5})]
    assert assert_taken_and_same(lines(*events)).accepted == 2


def test_a_duplicate_key_counts_as_its_last_value():
    body = b'{"kind":"scalar","metric":"a","metric":"b","iter":1,"value":1,"value":2}'
    fast = assert_taken_and_same(body)
    assert fast.tables()["scalars"]["metric"].to_pylist() == ["b"]


def test_dropping_a_job_drops_its_rows_from_the_frames():
    events = [scalar(job="a", iter=1), log(job="b"), scalar(job="b", iter=2), system(job="a"), scalar(job="a")]
    took, fast, slow = both(lines(*events))
    assert took
    assert fast.drop_job("a") == slow.drop_job("a") == 3
    assert_same(fast, slow)


# -- bodies the fast path leaves to the per-line path --------------------------------------------------

BAD_LINES = {
    "not JSON": (b"{not json", {"invalid_json": 1}),
    "an array": (b"[1, 2]", {"invalid_event": 1}),
    "a number": (b"7", {"invalid_event": 1}),
    "unknown kind": (lines({"kind": "teapot"}), {"invalid_kind": 1}),
    "no kind": (lines({"metric": "m", "iter": 1, "value": 1}), {"invalid_kind": 1}),
    "null kind beside a type": (lines(scalar(kind=None, type="scalar")), {"invalid_kind": 1}),
    "string value": (lines(scalar(value="high")), {"invalid_value": 1}),
    "bool value": (lines(scalar(value=True)), {"invalid_value": 1}),
    "null value": (lines(scalar(value=None)), {"invalid_value": 1}),
    "missing iter": (lines({"kind": "scalar", "metric": "m", "value": 1}), {"invalid_iter": 1}),
    "fractional iter": (lines(scalar(iter=1.5)), {"invalid_iter": 1}),
    "bool iter": (lines(scalar(iter=False)), {"invalid_iter": 1}),
    "iter out of range": (lines(scalar(iter=2**53 + 1)), {"iter_out_of_range": 1}),
    "iter past int64": (lines(scalar(iter=2**63)), {"iter_out_of_range": 1}),
    "bool ts": (lines(scalar(ts=True)), {"invalid_ts": 1}),
    "string ts": (lines(scalar(ts="2024-01-01")), {"invalid_ts": 1}),
    "ts too old": (lines(scalar(ts=5)), {"ts_out_of_range": 1}),
    "ts in the future": (lines(scalar(ts=NOW_MS + 8 * 86_400_000)), {"ts_out_of_range": 1}),
    "bad job": (lines(scalar(job="-x")), {"invalid_job": 1}),
    "null job": (lines(scalar(job=None)), {"invalid_job": 1}),
    "number job": (lines(scalar(job=1)), {"invalid_job": 1}),
    "bad project": (lines(scalar(project="a b")), {"invalid_project": 1}),
    "bad worker": (lines(log(worker="a b")), {"invalid_worker": 1}),
    "bool worker": (lines(scalar(worker=False)), {"invalid_worker": 1}),
    "empty metric": (lines(scalar(metric="")), {"invalid_metric": 1}),
    "long metric": (lines(scalar(metric="m" * 256)), {"invalid_metric": 1}),
    "number variant": (lines(scalar(variant=1)), {"invalid_variant": 1}),
    "long variant": (lines(scalar(variant="v" * 256)), {"invalid_variant": 1}),
    "negative seq": (lines(log(seq=-1)), {"invalid_seq": 1}),
    "float seq": (lines(log(seq=1.0)), {"invalid_seq": 1}),
    "seq past uint64": (json.dumps(log(seq=2**64)).encode(), {"invalid_seq": 1}),
    "null msg": (lines(log(msg=None)), {"invalid_msg": 1}),
    "long msg": (lines(log(msg="x" * ((1 << 20) + 1))), {"msg_too_long": 1}),
    "unknown level": (lines(log(level="loud")), {"invalid_level": 1}),
    "float device": (lines(system(device=0.0)), {"invalid_device": 1}),
    "bool device": (lines(system(device=False)), {"invalid_device": 1}),
    "null device": (lines(system(device=None)), {"invalid_device": 1}),
    "long device": (lines(system(device="d" * 65)), {"invalid_device": 1}),
    "list metric": (lines(system(metric=["gpu"])), {"invalid_metric": 1}),
}


@pytest.mark.parametrize("bad", list(BAD_LINES), ids=list(BAD_LINES))
def test_a_body_with_one_bad_line_is_left_to_the_per_line_path(bad):
    line, errors = BAD_LINES[bad]
    good = [orjson.dumps(e) for e in (scalar(iter=1), log(seq=1), system(), scalar(iter=2))]
    body = b"\n".join([*good[:2], line, *good[2:]])
    took, fast, slow = both(body)
    assert not took
    assert_same(fast, Batch())  # untouched
    assert slow.accepted == 4 and dict(slow.errors) == errors and slow.examples[0]["index"] == 2
    assert_same(parse_body(body, "application/x-ndjson", DEFAULTS, max_events=100, now_ms=NOW_MS), slow)


@pytest.mark.parametrize(
    "other",
    [
        {"kind": "vector", "metric": "h", "iter": 1, "values": [1, 2]},
        {"kind": "plot", "metric": "p", "iter": 1, "plot": {"data": []}},
        {"kind": "image", "metric": "i", "iter": 1, "url": "/x.png"},
    ],
    ids=["vector", "plot", "image"],
)
def test_a_body_with_another_kind_of_event_is_left_to_the_per_line_path(other):
    body = lines(scalar(), other, log())
    took, fast, slow = both(body)
    assert not took and slow.accepted == 3 and slow.rejected == 0
    assert_same(fast, Batch())
    assert_same(parse_body(body, "application/x-ndjson", DEFAULTS, max_events=100, now_ms=NOW_MS), slow)


def test_a_body_past_max_events_is_refused_as_before():
    body = lines(*(scalar(iter=i) for i in range(11)))
    with pytest.raises(PayloadTooLarge, match="at most 10 events"):
        parse_body(body, "application/x-ndjson", DEFAULTS, max_events=10, now_ms=NOW_MS)


def test_a_body_of_blank_lines_is_refused_as_before():
    with pytest.raises(BadRequest, match="no events"):
        parse_body(b"\n \r\n", "application/x-ndjson", DEFAULTS, max_events=10, now_ms=NOW_MS)


def test_a_job_given_only_by_a_missing_default_is_left_to_the_per_line_path():
    took, fast, slow = both(lines(scalar()), {"project": "proj"})
    assert not took and dict(slow.errors) == {"invalid_job": 1}


# -- random bodies -------------------------------------------------------------------------------------


def test_random_bodies_are_answered_as_the_per_line_path_answers_them():
    import random

    rng = random.Random(20240611)
    taken = 0
    for _ in range(1500):
        events = [random_event(rng, dirty=False) for _ in range(rng.randint(1, 8))]
        if rng.random() < 0.5:  # one event with one field the rules refuse
            events[rng.randrange(len(events))] = random_event(rng, dirty=True)
        if rng.random() < 0.05:
            events.append(rng.choice([{"kind": "vector", "metric": "h", "iter": 1, "values": [1]}, [1], "x"]))
        body = b"\n".join(json.dumps(e, ensure_ascii=rng.random() < 0.5).encode() for e in events)
        defaults = rng.choice([DEFAULTS, {"project": None, "job": "j3", "worker": "w0"}, {}])
        slow = Batch()
        parse_each_line(body, defaults, slow, 100, NOW_MS)
        got = parse_body(body, "application/x-ndjson", defaults, max_events=100, now_ms=NOW_MS)
        assert_same(got, slow)
        taken += bool(got.frames)
    assert taken > 500  # the comparison covered the fast path, not only the fallback


# -- through the server --------------------------------------------------------------------------------


def stored(store: Any, table: str, job: str) -> list[dict[str, Any]]:
    """The rows of ``job`` in ``table`` as the store keeps them (duplicates replaced), without the job."""
    columns = {
        "scalars": "metric, variant, iter, ts, value, worker, model_event",
        "logs": "ts, worker, seq, level, msg",
        "system": "worker, metric, device, ts, value",
    }[table]
    sql = f"SELECT {columns} FROM {store.database}.{table} FINAL WHERE job = '{job}' ORDER BY {columns}"
    return store.engine.query(sql).to_pylist()


def test_through_the_server_a_fast_body_stores_and_answers_as_the_per_line_path(client, store, monkeypatch):
    taken: list[bool] = []

    def spy(*args: Any) -> bool:
        taken.append(add_events_fast(*args))
        return taken[-1]

    monkeypatch.setattr(lines_module, "add_events_fast", spy)
    events = [
        *(scalar(metric=f"m{i % 4}", variant="v", iter=i // 4, value=i * 0.25, ts=TS + i) for i in range(40)),
        scalar(metric="m0", variant="v", iter=0, value=99.0),  # replaces the first point of m0
        scalar(metric="ünï", iter=1, value="Infinity", model_event=True),
        *(log(worker="w1", seq=i, level="WARN" if i % 2 else None, msg=f"line {i} ✓", ts=TS + i) for i in range(10)),
        *(system(worker="w2", device=i % 2, value=float(i), ts=TS + 1000 * i) for i in range(10)),
    ]
    fast = post_lines(client, *events, project="proj", job="fast")
    slow = post_lines(client, *events, {"kind": "teapot"}, project="proj", job="slow")  # one bad line: per line
    assert taken == [True, False]
    assert fast.status_code == slow.status_code == 200
    assert fast.json() == {"accepted": len(events), "rejected": 0, "errors": {}, "examples": []}
    assert slow.json()["accepted"] == len(events) and slow.json()["errors"] == {"invalid_kind": 1}
    for table in ("scalars", "logs", "system"):
        assert stored(store, table, "fast") == stored(store, table, "slow"), table
    assert stored(store, "scalars", "fast")[0]["value"] == 99.0
    jobs = [client.get(f"/jp/v1/jobs/{job}").json() for job in ("fast", "slow")]
    assert [w["worker"] for w in jobs[0]["workers"]] == [w["worker"] for w in jobs[1]["workers"]] == ["w1", "w2"]
    assert jobs[0]["job"]["started"] == jobs[1]["job"]["started"] == TS


def test_through_the_server_a_bad_line_gives_the_same_counts_and_messages(client, monkeypatch):
    monkeypatch.setattr(lines_module, "add_events_fast", lambda *args: False)
    events = [scalar(iter=1), scalar(value="high"), log(seq=-1), scalar(iter=2)]
    before = post_lines(client, *events, project="proj", job="j1").json()  # the per-line path alone
    monkeypatch.undo()
    after = post_lines(client, *events, project="proj", job="j2").json()
    assert after == before
    assert after["errors"] == {"invalid_value": 1, "invalid_seq": 1}
    assert [e["index"] for e in after["examples"]] == [1, 2]
