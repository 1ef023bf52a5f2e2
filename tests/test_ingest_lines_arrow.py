"""JSON lines read by Arrow's JSON reader: whatever body that path takes, it answers exactly as the per-line path.

Each test compares the batch the Arrow path builds (``read_lines``) with the one the per-line path builds of the same
body (``parse_each_line``): the rows of every table, the counts, the jobs, workers and first timestamps. Bodies the
Arrow path must leave are checked to be left (None), and ``parse_body`` to answer them as the per-line path does.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from helpers import NOW_MS, lines, post_lines
from jobpulse.errors import PayloadTooLarge
from jobpulse.ingest import lines as lines_module
from jobpulse.ingest.batch import Batch
from jobpulse.ingest.lines import parse_each_line
from jobpulse.ingest.lines_arrow import read_lines
from jobpulse.ingest.parse import parse_body
from lines_cases import _MISSING, DEFAULTS, FIELDS, KIND_FIELDS, TS, assert_same, log, scalar, system


def per_line(body: bytes, defaults: dict | None = None, max_events: int = 10_000) -> Batch:
    batch = Batch()
    parse_each_line(body, DEFAULTS if defaults is None else defaults, batch, max_events, NOW_MS)
    return batch


def assert_taken_and_same(body: bytes, defaults: dict | None = None) -> Batch:
    got = read_lines(body, DEFAULTS if defaults is None else defaults, 10_000, NOW_MS)
    assert got is not None
    want = per_line(body, defaults)
    assert want.accepted > 0 and want.rejected == 0
    assert_same(got, want)
    return got


def assert_left_and_answered_as_before(body: bytes, defaults: dict | None = None) -> Batch:
    defaults = DEFAULTS if defaults is None else defaults
    assert read_lines(body, defaults, 10_000, NOW_MS) is None
    got = parse_body(body, "application/x-ndjson", defaults, max_events=10_000, now_ms=NOW_MS)
    assert_same(got, per_line(body, defaults))
    return got


# -- bodies the Arrow path takes -----------------------------------------------------------------------


def test_a_body_of_scalars_is_taken_and_stored_as_the_per_line_path_stores_it():
    body = lines(*(scalar(metric=f"m{i % 10}", iter=i // 10, value=i / 7, ts=TS + i) for i in range(1000)))
    got = assert_taken_and_same(body)
    assert got.accepted == 1000 and got.tables()["scalars"].num_rows == 1000


def test_scalars_with_variants_flags_workers_and_unicode_are_taken():
    body = lines(
        scalar(metric="ünï", variant="训练", iter=3, value=1, model_event=True, worker="host:1"),
        scalar(metric="m", iter=-5, value=2**64 - 1, model_event=False),
        scalar(metric="m" * 255, iter=2**53, value=-1e-300, worker=""),
    )
    assert_taken_and_same(body)


def test_a_body_of_log_lines_is_taken():
    levels = ["WARN", "info", "Error"]
    body = lines(*(log(worker=f"w{i % 2}", seq=i, level=levels[i % 3], msg=f"l{i} ✓") for i in range(30)))
    assert_taken_and_same(body)


def test_a_body_of_system_samples_is_taken():
    body = lines(*(system(worker="node-1", device=str(i % 8), metric="gpu_util", value=float(i)) for i in range(64)))
    assert_taken_and_same(body)


def test_events_naming_their_own_jobs_and_projects_are_taken():
    body = lines(
        scalar(job="a", iter=1),
        scalar(job="b", project="p2", iter=1),
        scalar(job="a", project="p1", iter=2, ts=TS - 5),  # the first project named for job a
        scalar(job="a", project="p3", iter=3),  # a later one does not replace it
    )
    got = assert_taken_and_same(body, {"job": "j1"})
    assert got.jobs == {"a": "p1", "b": "p2"} and got.first_ts["a"] == TS - 5


def test_the_kind_may_come_from_the_query_and_lines_may_end_in_crlf_and_spaces():
    body = b'{"metric":"m","iter":1,"value":2}  \r\n  {"metric":"m", "iter": 2, "value": 3.5}\r\n\r\n'
    assert_taken_and_same(body, {**DEFAULTS, "kind": "scalar"})


def test_events_without_a_timestamp_take_the_arrival_time():
    got = assert_taken_and_same(lines({"kind": "scalar", "metric": "m", "iter": 1, "value": 1.0}))
    assert got.first_ts == {"j1": NOW_MS}


def test_parse_body_answers_through_the_arrow_path():
    body = lines(*(scalar(iter=i, value=float(i)) for i in range(50)))
    got = parse_body(body, "application/x-ndjson", DEFAULTS, max_events=1000, now_ms=NOW_MS)
    assert got.frames and not got.rows
    assert_same(got, per_line(body))


# -- bodies it leaves --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b'{"kind":"scalar","metric":"m","iter":1,"value":1} {"kind":"scalar","metric":"m","iter":2,"value":2}',
        b'{"kind":"scalar","metric":"m","iter":1,\n"value":1}',
        # two objects on a line and one across two: as many rows as lines, and still not one object a line
        b'{"kind":"scalar","metric":"m","iter":1,"value":1} {"kind":"scalar","metric":"m","iter":2,"value":2}\n'
        b'{"kind":"scalar","metric":"m","iter":3,\n"value":3}',
        b'{"kind":"scalar","metric":"m","iter":1,"value":1}\n\n{"kind":"scalar","metric":"m","iter":2,"value":2}',
        b'{"kind":"scalar","metric":"m","iter":1,"value":1}\n \n{"kind":"scalar","metric":"m","iter":2,"value":2}',
        b'\xef\xbb\xbf{"kind":"scalar","metric":"m","iter":1,"value":1}',
    ],
    ids=["two-on-a-line", "across-lines", "both-at-once", "blank-line", "spaces-line", "byte-order-mark"],
)
def test_lines_that_are_not_one_object_each_are_left(body):
    assert_left_and_answered_as_before(body)


@pytest.mark.parametrize(
    "event",
    [
        scalar(variant=None),  # an explicit null
        scalar(iter=2.0),  # a whole float for iter: the reader refuses it, the rules take it
        scalar(ts=float(TS)),
        scalar(value="NaN"),
        scalar(value=-0.0),
        scalar(model_event=1),
        system(device=3),
        {"type": "scalar", "metric": "m", "iter": 1, "value": 1.0},
        scalar(extra=1),
        scalar(value=1, project=""),
        scalar(seq=2**64 - 1),
    ],
    ids=lambda e: ",".join(f"{k}={v!r}" for k, v in e.items() if k not in ("kind", "metric", "ts"))[:40],
)
def test_a_field_the_reader_types_otherwise_than_the_rules_is_left(event):
    assert_left_and_answered_as_before(lines(scalar(iter=0), event) if event.get("kind") == "scalar" else lines(event))


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"-0"])
def test_numbers_that_are_not_json_or_could_lose_their_sign_are_left(literal):
    # beside a float, an integer -0 would be read as the float -0.0, which the rules read as 0
    body = b'{"kind":"scalar","metric":"m","iter":1,"value":0.5}\n{"kind":"scalar","metric":"m","iter":2,"value":%s}'
    body %= literal
    assert_left_and_answered_as_before(body)


def test_integer_values_are_taken_as_the_rules_round_them():
    body = lines(scalar(iter=1, value=2**53 + 1), scalar(iter=2, value=-(2**63)), scalar(iter=3, value=7))
    got = assert_taken_and_same(body)
    assert got.tables()["scalars"]["value"].to_pylist() == [float(2**53 + 1), float(-(2**63)), 7.0]


def test_text_the_reader_takes_for_a_date_is_left():
    assert_left_and_answered_as_before(lines(log(msg="2026-11-22"), log(seq=2, msg="2026-11-23")))


def test_the_word_null_inside_a_text_is_taken_as_text():
    got = assert_taken_and_same(lines(log(msg="null pointer"), log(seq=2, msg="null")))
    assert got.tables()["logs"].column("msg").to_pylist() == ["null pointer", "null"]


@pytest.mark.parametrize(
    "body",
    [
        lines(scalar(variant="v"), scalar(iter=2, variant=None)),  # beside values of the same field
        lines(scalar(iter=1), scalar(iter=2, worker=None)),
        lines(log(msg="null"), log(seq=2, msg=None)),
        lines(scalar(value=[None])),  # inside a list or an object
        lines(scalar(variant={"a": None})),
        b"null",
        lines(scalar()) + b"\nnull",
    ],
    ids=["beside-values", "beside-absent", "beside-the-word", "in-a-list", "in-an-object", "a-line", "a-last-line"],
)
def test_a_json_null_leaves_the_body(body):
    assert_left_and_answered_as_before(body)


def test_a_line_longer_than_the_readers_block_is_answered_as_the_rules_answer_it():
    body = lines(log(seq=1, msg="x" * (1 << 20)), log(seq=2, msg="y" * 300_000 + "✓" * 300_000))
    got = parse_body(body, "application/x-ndjson", DEFAULTS, max_events=10, now_ms=NOW_MS)
    assert_same(got, per_line(body))
    assert got.accepted == 2


@pytest.mark.parametrize("body", [b"{}", b"{}\n{}", b'{"variant":"v"}\n{}'])
def test_lines_without_the_fields_of_an_event_are_left(body):
    got = assert_left_and_answered_as_before(body)
    assert got.accepted == 0 and got.rejected == body.count(b"\n") + 1


@pytest.mark.parametrize(
    "text", [b"a\xed\xa0\x80b", b"a\xc0\xafb", b"\xf4\x90\x80\x80"], ids=["surrogate", "overlong", "past-max"]
)
def test_text_that_is_not_utf8_is_left(text):
    got = assert_left_and_answered_as_before(b'{"kind":"log","seq":1,"msg":"%s"}' % text)
    assert dict(got.errors) == {"invalid_json": 1}


@pytest.mark.parametrize("escaped", [b"\\ud83d\\ude00", b"\\udc00", b"\\ud800x", b"\\u0000", b"\\/"])
def test_escapes_are_answered_as_the_rules_answer_them(escaped):
    body = b'{"kind":"log","seq":1,"msg":"%s"}' % escaped
    got = parse_body(body, "application/x-ndjson", DEFAULTS, max_events=10, now_ms=NOW_MS)
    assert_same(got, per_line(body))


def test_events_of_several_kinds_are_left():
    assert_left_and_answered_as_before(lines(scalar(), log(), system()))


def test_a_body_with_a_bad_event_is_left_for_the_per_line_messages():
    got = assert_left_and_answered_as_before(lines(scalar(iter=1), scalar(metric="m" * 256), scalar(iter=-(2**31) - 1)))
    assert dict(got.errors) == {"invalid_metric": 1, "iter_out_of_range": 1}
    assert [e["index"] for e in got.examples] == [1, 2]


def test_an_empty_project_in_the_query_is_left():
    assert_left_and_answered_as_before(lines(scalar()), {"project": "", "job": "j1"})


def test_more_events_than_a_batch_holds_are_left_and_refused():
    body = lines(*(scalar(iter=i) for i in range(11)))
    assert read_lines(body, DEFAULTS, 10, NOW_MS) is None
    with pytest.raises(PayloadTooLarge):
        parse_body(body, "application/x-ndjson", DEFAULTS, max_events=10, now_ms=NOW_MS)


# -- random bodies -----------------------------------------------------------------------------------------


def random_event(rng: random.Random, kind: str, dirty: bool) -> dict[str, Any]:
    """An event of ``kind`` with JSON values the reader types as the rules do (no null, no whole float...)."""
    event: dict[str, Any] = {"kind": kind}
    spoilt = rng.choice(KIND_FIELDS[kind]) if dirty else None
    for name in KIND_FIELDS[kind]:
        good, bad = FIELDS[name]
        choices = [v for v in (bad if name == spoilt and bad else good) if _plain(name, v)]
        value = rng.choice(choices or [_MISSING])
        if value is not _MISSING:
            event[name] = value
    return event


def _plain(name: str, value: Any) -> bool:
    """Whether the reader types ``value`` of ``name`` as the rules do (otherwise it refuses the body)."""
    if name in ("iter", "ts", "seq"):
        return type(value) is int and -(2**63) <= value < 2**63
    if name == "value":
        return type(value) in (int, float) and value != 0
    if name == "model_event":
        return type(value) is bool
    return type(value) is str


def test_random_bodies_of_one_kind_are_answered_as_the_per_line_path_answers_them():
    rng = random.Random(20261122)
    taken = 0
    for _ in range(600):
        kind = rng.choice(["scalar", "scalar", "log", "system"])
        events = [random_event(rng, kind, dirty=False) for _ in range(rng.randint(1, 8))]
        if rng.random() < 0.3:
            events[rng.randrange(len(events))] = random_event(rng, kind, dirty=True)
        separator = rng.choice([b"\n", b"\r\n", b" \n "])
        body = separator.join(json.dumps(e, ensure_ascii=rng.random() < 0.5).encode() for e in events)
        defaults = rng.choice([DEFAULTS, {"project": None, "job": "j3", "worker": "w0"}, {"job": "j4"}])
        got = parse_body(body, "application/x-ndjson", defaults, max_events=100, now_ms=NOW_MS)
        assert_same(got, per_line(body, defaults, 100))
        taken += read_lines(body, defaults, 100, NOW_MS) is not None
    assert taken > 300  # the comparison covered the Arrow path, not only the others


# -- through the server ------------------------------------------------------------------------------------


def test_through_the_server_an_arrow_read_body_stores_what_the_per_line_path_stores(client, store, monkeypatch):
    taken: list[bool] = []

    def spy(*args: Any) -> Batch | None:
        batch = read_lines(*args)
        taken.append(batch is not None)
        return batch

    monkeypatch.setattr(lines_module, "read_lines", spy)
    events = [scalar(metric=f"m{i % 4}", variant="v", iter=i // 4, value=i * 0.25, ts=TS + i) for i in range(40)]
    events.append(scalar(metric="m0", variant="v", iter=0, value=99.0))  # replaces the first point of m0
    arrow = post_lines(client, *events, project="proj", job="arrow")
    monkeypatch.setattr(lines_module, "read_lines", lambda *args: None)
    slow = post_lines(client, *events, project="proj", job="slow")
    assert taken == [True]
    assert arrow.status_code == slow.status_code == 200
    assert arrow.json() == slow.json() == {"accepted": 41, "rejected": 0, "errors": {}, "examples": []}
    sql = "SELECT metric, variant, iter, ts, value, worker, model_event FROM {db}.scalars FINAL WHERE job = '{job}'"
    sql += " ORDER BY metric, iter"
    rows = [store.engine.query(sql.format(db=store.database, job=job)).to_pylist() for job in ("arrow", "slow")]
    assert rows[0] == rows[1] and len(rows[0]) == 40
    assert rows[0][0]["value"] == 99.0
