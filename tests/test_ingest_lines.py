"""JSON lines through the one parser: what each body stores and answers.

The parser reads a body one of two ways (Arrow's reader for a large body of plain objects, orjson line by line for
the rest) and must answer alike: the tests at the end hold the two to it on random bodies and through the server.
"""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pytest

from helpers import NOW_MS, lines, post_lines
from jobpulse.errors import BadRequest, PayloadTooLarge
from jobpulse.ingest import lines as lines_module
from jobpulse.ingest.batch import Batch
from jobpulse.ingest.limits import scan_lines
from jobpulse.ingest.parse import parse_body
from jobpulse.ingest.rules import check_events
from lines_cases import _MISSING, DEFAULTS, FIELDS, KIND_FIELDS, TS, assert_same, log, random_event, scalar, system


def parse(body: bytes, defaults: dict | None = None, max_events: int = 10_000) -> Batch:
    return parse_body(body, "application/x-ndjson", DEFAULTS if defaults is None else defaults,
                      max_events=max_events, now_ms=NOW_MS)  # fmt: skip


def readings(body: bytes, defaults: dict | None = None) -> tuple[Batch, Batch | None]:
    """The batch of ``body`` read line by line, and read whole by Arrow's reader (None where it does not read it)."""
    defaults = DEFAULTS if defaults is None else defaults
    found = scan_lines(body, 10_000)
    each = Batch()
    check_events(lines_module.read_each(body, found, defaults), each, NOW_MS)
    events = lines_module.read_whole(body, found, defaults) if found.objects(body) else None
    if events is None:
        return each, None
    whole = Batch()
    check_events(events, whole, NOW_MS)
    return each, whole


def stored(batch: Batch, table: str, column: str) -> list[Any]:
    return batch.tables()[table][column].to_pylist()


# -- what a body stores --------------------------------------------------------------------------------------


def test_a_body_of_scalars_is_stored_row_for_row():
    batch = parse(lines(*(scalar(metric=f"m{i % 3}", iter=i // 3, value=i / 7, ts=TS + i) for i in range(300))))
    assert batch.accepted == 300 and not batch.errors
    assert stored(batch, "scalars", "value") == [i / 7 for i in range(300)]
    assert stored(batch, "scalars", "metric")[:4] == ["m0", "m1", "m2", "m0"]


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
    batch = parse(lines(*events), {"project": None, "job": None, "worker": None})
    assert list(batch.jobs.items()) == [("a", "p1"), ("b", "p2"), ("c", None)]
    assert batch.workers == {("c", "w/1"), ("b", "w@2"), ("a", "worker-0")}


@pytest.mark.parametrize("jobs", [["j1"], ["a", "b"]], ids=["one job", "two jobs"])
def test_a_job_starts_at_its_earliest_event_not_its_first(jobs):
    offsets = [5, -3, 0, 7, -8, 2]
    batch = parse(lines(*(scalar(job=jobs[i % len(jobs)], iter=i, ts=TS + d) for i, d in enumerate(offsets))))
    assert batch.first_ts == ({"j1": TS - 8} if len(jobs) == 1 else {"a": TS - 8, "b": TS - 3})


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
    batch = parse(lines(*events))
    assert list(batch.tables()) == ["logs", "scalars", "system"]  # in the order their first event came
    assert stored(batch, "scalars", "value") == [1.0, 2.0, 3.0]
    assert stored(batch, "logs", "msg") == ["first", "second"]


def test_unicode_names_messages_and_escapes():
    events = [
        scalar(metric="pérte/λ", variant="训练"),
        scalar(metric="emoji 😀", variant='tab\tand "quotes" \\ back', iter=2),
        log(msg="ünïcödé ✓ \u2028 line\nbreak 😀"),
        system(metric="temp_°C"),
    ]
    as_utf8 = parse(lines(*events))
    as_escapes = parse(b"\n".join(json.dumps(e).encode() for e in events))  # \uXXXX escapes, surrogate pairs too
    assert_same(as_escapes, as_utf8)
    assert stored(as_utf8, "scalars", "metric") == ["pérte/λ", "emoji 😀"]
    assert stored(as_utf8, "logs", "msg") == ["ünïcödé ✓ \u2028 line\nbreak 😀"]


def test_numbers_as_ints_or_floats():
    events = [
        scalar(iter=0, value=1),  # an int value: stored as the float 1.0
        scalar(iter=1.0, value=2.5),  # a whole float iter: taken as the int 1
        scalar(iter=2, value=-0.0, ts=TS + 0.9),  # a float ts: its fraction dropped
        scalar(iter=3, value=2**53 + 1),  # ints past float precision round as float(int) does
        scalar(iter=4, value=2**63 + 1),
        scalar(iter=5, value=2**64 - 1),
        scalar(iter=6, value=-(2**63)),
        scalar(iter=-(2**31), value=1e308),
        scalar(iter=2**53, value=5e-324),
    ]
    batch = parse(lines(*events))
    values = stored(batch, "scalars", "value")
    assert values[:7] == [1.0, 2.5, -0.0, float(2**53 + 1), float(2**63 + 1), float(2**64 - 1), float(-(2**63))]
    assert np.signbit(values[2]) and values[7:] == [1e308, 5e-324]
    assert stored(batch, "scalars", "iter") == [0, 1, 2, 3, 4, 5, 6, -(2**31), 2**53]
    assert batch.tables()["scalars"]["ts"].cast(pa.int64()).to_pylist()[2] == TS


def test_non_finite_values_spelled_as_strings():
    events = [scalar(iter=i, value=v) for i, v in enumerate(["NaN", "nan", "Infinity", "inf", "-Infinity", "-inf", 1])]
    values = stored(parse(lines(*events)), "scalars", "value")
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
    batch = parse(lines(*events))
    assert batch.tables()["scalars"]["ts"].cast(pa.int64()).to_pylist() == [NOW_MS] * 3
    assert stored(batch, "scalars", "variant") == [""] * 3 and stored(batch, "scalars", "worker") == [""] * 3
    assert stored(batch, "logs", "worker") == ["worker-0"] * 2 and stored(batch, "logs", "level") == ["info"] * 2
    assert stored(batch, "system", "device") == [""]


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
    batch = parse(lines(*events))
    assert stored(batch, "logs", "level") == ["warning", "critical", "info", "info"]
    assert stored(batch, "logs", "seq")[3] == 2**63 + 5
    assert stored(batch, "system", "device") == ["3", "3", ""]


def test_model_event_is_any_true_value():
    flags = [True, 1, "yes", [0], {"a": 1}, False, 0, "", [], None]
    batch = parse(lines(*(scalar(iter=i, model_event=f) for i, f in enumerate(flags))))
    assert stored(batch, "scalars", "model_event") == [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]


def test_blank_lines_crlf_and_surrounding_spaces_are_skipped():
    one, two = orjson.dumps(scalar(iter=1)), orjson.dumps(scalar(iter=2))
    batch = parse(b"\n  \n" + one + b"\r\n\t\n  " + two + b" \r\n\n")
    assert batch.accepted == 2 and stored(batch, "scalars", "iter") == [1, 2]


def test_unknown_and_nested_fields_are_ignored():
    events = [scalar(extra={"nested": [1, {"deep": None}]}, tags=["a"]), log(context=None, meta={"k": 1.5})]
    assert parse(lines(*events)).accepted == 2


def test_a_duplicate_key_counts_as_its_last_value():
    batch = parse(b'{"kind":"scalar","metric":"a","metric":"b","iter":1,"value":1,"value":2}')
    assert stored(batch, "scalars", "metric") == ["b"] and stored(batch, "scalars", "value") == [2.0]


def test_dropping_a_job_drops_its_rows_from_every_table():
    batch = parse(
        lines(scalar(job="a", iter=1), log(job="b"), scalar(job="b", iter=2), system(job="a"), scalar(job="a"))
    )
    assert batch.drop_job("a") == 3
    assert batch.accepted == 2 and list(batch.jobs) == ["b"]
    assert {name: table.num_rows for name, table in batch.tables().items()} == {"scalars": 1, "logs": 1}


def test_events_of_every_kind_are_stored():
    events = [
        scalar(),
        {"kind": "vector", "metric": "h", "iter": 1, "values": [1, "NaN", 2.5]},
        {"kind": "plot", "metric": "p", "iter": 1, "plot": {"data": [{"x": [0, 1]}]}},
        {"kind": "plot", "metric": "p", "iter": 2, "plot": '{"data": []}'},
        {"kind": "image", "metric": "i", "variant": "v", "iter": 3, "url": "/x.png"},
        {"kind": "image", "metric": "i", "iter": 4, "url": "/y.png", "key": "k", "meta": {"w": 2}},
        log(),
    ]
    batch = parse(lines(*events))
    assert batch.accepted == 7 and not batch.errors
    assert stored(batch, "events", "payload") == [
        "[1,null,2.5]",
        '{"data":[{"x":[0,1]}]}',
        '{"data": []}',
        "",
        '{"w":2}',
    ]
    assert stored(batch, "events", "key") == ["", "", "", "i/v/3", "k"]
    assert stored(batch, "events", "url") == ["", "", "", "/x.png", "/y.png"]


# -- what a bad line is refused for --------------------------------------------------------------------------

BAD_LINES = {
    "not JSON": (b"{not json", "invalid_json"),
    "an array": (b"[1, 2]", "invalid_event"),
    "a number": (b"7", "invalid_event"),
    "null": (b"null", "invalid_event"),
    "unknown kind": (lines({"kind": "teapot"}), "invalid_kind"),
    "no kind": (lines({"metric": "m", "iter": 1, "value": 1}), "invalid_kind"),
    "null kind beside a type": (lines(scalar(kind=None, type="scalar")), "invalid_kind"),
    "string value": (lines(scalar(value="high")), "invalid_value"),
    "bool value": (lines(scalar(value=True)), "invalid_value"),
    "null value": (lines(scalar(value=None)), "invalid_value"),
    "missing iter": (lines({"kind": "scalar", "metric": "m", "value": 1}), "invalid_iter"),
    "fractional iter": (lines(scalar(iter=1.5)), "invalid_iter"),
    "bool iter": (lines(scalar(iter=False)), "invalid_iter"),
    "iter out of range": (lines(scalar(iter=2**53 + 1)), "iter_out_of_range"),
    "iter past int64": (lines(scalar(iter=2**63)), "iter_out_of_range"),
    "bool ts": (lines(scalar(ts=True)), "invalid_ts"),
    "string ts": (lines(scalar(ts="2024-01-01")), "invalid_ts"),
    "ts too old": (lines(scalar(ts=5)), "ts_out_of_range"),
    "ts in the future": (lines(scalar(ts=NOW_MS + 8 * 86_400_000)), "ts_out_of_range"),
    "bad job": (lines(scalar(job="-x")), "invalid_job"),
    "null job": (lines(scalar(job=None)), "invalid_job"),
    "number job": (lines(scalar(job=1)), "invalid_job"),
    "job ending in a line break": (lines(scalar(job="j1\n")), "invalid_job"),
    "bad project": (lines(scalar(project="a b")), "invalid_project"),
    "empty project": (lines(scalar(project="")), "invalid_project"),
    "bad worker": (lines(log(worker="a b")), "invalid_worker"),
    "bool worker": (lines(scalar(worker=False)), "invalid_worker"),
    "empty metric": (lines(scalar(metric="")), "invalid_metric"),
    "long metric": (lines(scalar(metric="m" * 256)), "invalid_metric"),
    "number variant": (lines(scalar(variant=1)), "invalid_variant"),
    "long variant": (lines(scalar(variant="v" * 256)), "invalid_variant"),
    "negative seq": (lines(log(seq=-1)), "invalid_seq"),
    "float seq": (lines(log(seq=1.0)), "invalid_seq"),
    "seq past uint64": (json.dumps(log(seq=2**64)).encode(), "invalid_seq"),
    "null msg": (lines(log(msg=None)), "invalid_msg"),
    "long msg": (lines(log(msg="x" * ((1 << 20) + 1))), "msg_too_long"),
    "unknown level": (lines(log(level="loud")), "invalid_level"),
    "float device": (lines(system(device=0.0)), "invalid_device"),
    "bool device": (lines(system(device=False)), "invalid_device"),
    "null device": (lines(system(device=None)), "invalid_device"),
    "long device": (lines(system(device="d" * 65)), "invalid_device"),
    "list metric": (lines(system(metric=["gpu"])), "invalid_metric"),
    "vector of text": (lines({"kind": "vector", "metric": "h", "iter": 1, "values": ["a"]}), "invalid_values"),
    "vector of lists": (lines({"kind": "vector", "metric": "h", "iter": 1, "values": [[1]]}), "invalid_values"),
    "plot not JSON": (lines({"kind": "plot", "metric": "p", "iter": 1, "plot": "{x"}), "invalid_plot"),
    "plot a number": (lines({"kind": "plot", "metric": "p", "iter": 1, "plot": 3}), "invalid_plot"),
    "image without url": (lines({"kind": "image", "metric": "i", "iter": 1}), "invalid_url"),
    "image of empty url": (lines({"kind": "image", "metric": "i", "iter": 1, "url": ""}), "invalid_url"),
    "image of number key": (lines({"kind": "image", "metric": "i", "iter": 1, "url": "/x", "key": 5}), "invalid_key"),
}


@pytest.mark.parametrize("bad", list(BAD_LINES), ids=list(BAD_LINES))
def test_a_bad_line_is_refused_and_the_others_stored(bad):
    line, reason = BAD_LINES[bad]
    good = [orjson.dumps(e) for e in (scalar(iter=1), log(seq=1), system(), scalar(iter=2))]
    batch = parse(b"\n".join([*good[:2], line, *good[2:]]))
    assert batch.accepted == 4 and dict(batch.errors) == {reason: 1}
    assert [(e["index"], e["reason"]) for e in batch.examples] == [(2, reason)]


def test_a_line_is_counted_once_under_the_first_rule_it_breaks():
    batch = parse(lines(scalar(metric="", iter=1.5, value="x"), log(seq=-1, msg=None), system(metric="", device=None)))
    assert dict(batch.errors) == {"invalid_metric": 2, "invalid_seq": 1}
    assert [e["index"] for e in batch.examples] == [0, 1, 2]


def test_examples_name_the_first_bad_lines_in_order_and_the_value_refused():
    batch = parse(lines(*(scalar(job=f"-bad{i}") if i % 2 else scalar(iter=1.5) for i in range(30))))
    assert batch.rejected == 30 and len(batch.examples) == 10
    assert [e["index"] for e in batch.examples] == list(range(10))
    assert batch.examples[1]["detail"] == "'job' must be 1-128 letters, digits or '._:-', got '-bad1'"


def test_more_events_than_a_batch_holds_are_refused_whole():
    with pytest.raises(PayloadTooLarge, match="at most 10 events"):
        parse(lines(*(scalar(iter=i) for i in range(11))), max_events=10)


def test_a_body_of_blank_lines_holds_no_events():
    with pytest.raises(BadRequest, match="no events"):
        parse(b"\n \r\n\t")


def test_an_empty_project_in_the_query_is_refused_for_every_event_that_names_none():
    batch = parse(lines(scalar(iter=1), scalar(iter=2, project="p2")), {"project": "", "job": "j1"})
    assert batch.accepted == 1 and dict(batch.errors) == {"invalid_project": 1}


def test_a_job_given_by_no_event_and_no_query_is_refused():
    assert dict(parse(lines(scalar()), {"project": "proj"}).errors) == {"invalid_job": 1}


# -- bodies whose reading needs care ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        (
            b'{"kind":"scalar","metric":"m","iter":1,"value":1} {"kind":"scalar","metric":"m","iter":2,"value":2}',
            {"invalid_json": 1},
        ),
        (b'{"kind":"scalar","metric":"m","iter":1,\n"value":1}', {"invalid_json": 2}),
        # as many lines as objects, and still not one object a line
        (
            b'{"kind":"scalar","metric":"m","iter":1,"value":1} {"kind":"scalar","metric":"m","iter":2,"value":2}\n'
            b'{"kind":"scalar","metric":"m","iter":3,\n"value":3}',
            {"invalid_json": 3},
        ),
        (b'\xef\xbb\xbf{"kind":"scalar","metric":"m","iter":1,"value":1}', {"invalid_json": 1}),
        (b'{"kind":"scalar","metric":"m","iter":1,"value":1}}', {"invalid_json": 1}),
    ],
    ids=["two-on-a-line", "across-lines", "both-at-once", "byte-order-mark", "a-brace-too-many"],
)
def test_a_line_that_is_not_one_object_is_refused(body, errors):
    assert dict(parse(body).errors) == errors


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1e400"])
def test_numbers_json_has_no_literal_for_are_refused(literal):
    body = b'{"kind":"scalar","metric":"m","iter":1,"value":0.5}\n{"kind":"scalar","metric":"m","iter":2,"value":%s}'
    batch = parse(body % literal)
    assert batch.accepted == 1 and dict(batch.errors) == {"invalid_json": 1}


def test_an_integer_minus_zero_is_the_integer_zero():
    batch = parse(
        b'{"kind":"scalar","metric":"m","iter":1,"value":0.5}\n{"kind":"scalar","metric":"m","iter":2,"value":-0}'
    )
    assert not np.signbit(stored(batch, "scalars", "value")[1])


def test_text_that_looks_like_a_date_or_null_stays_text():
    batch = parse(lines(log(msg="2026-11-22"), log(seq=2, msg="null pointer"), log(seq=3, msg="null")))
    assert stored(batch, "logs", "msg") == ["2026-11-22", "null pointer", "null"]


@pytest.mark.parametrize(
    ("event", "outcome"),
    [
        (scalar(job=None), {"invalid_job": 1}),  # a null job is refused, the query's job stands for a missing one
        (scalar(kind=None), {"invalid_kind": 1}),
        (system(device=None), {"invalid_device": 1}),
        (scalar(variant=None), {}),
        (scalar(ts=None), {}),
        (log(level=None), {}),
    ],
    ids=["job", "kind", "device", "variant", "ts", "level"],
)
def test_a_json_null_means_what_the_field_says(event, outcome):
    assert dict(parse(lines(event)).errors) == outcome


def test_a_null_project_or_worker_names_none():
    defaults = {"project": "proj", "job": "j1", "worker": "w9"}
    assert parse(lines(scalar(project=None)), defaults).jobs == {"j1": None}  # not the query's project
    assert parse(lines(log(worker=None)), defaults).workers == {("j1", "worker-0")}  # not the query's worker


def test_a_line_longer_than_the_readers_block_is_stored():
    batch = parse(lines(log(seq=1, msg="x" * (1 << 20)), log(seq=2, msg="y" * 300_000 + "✓" * 300_000)))
    assert batch.accepted == 2


@pytest.mark.parametrize("body", [b"{}", b"{}\n{}", b'{"variant":"v"}\n{}'])
def test_lines_without_the_fields_of_an_event_are_refused(body):
    batch = parse(body)
    assert batch.accepted == 0 and dict(batch.errors) == {"invalid_kind": body.count(b"\n") + 1}


@pytest.mark.parametrize("text", [b"a\xed\xa0\x80b", b"a\xc0\xafb", b"\xf4\x90\x80\x80", b"\xff"],
                         ids=["surrogate", "overlong", "past-max", "not-a-start"])  # fmt: skip
def test_text_that_is_not_utf8_is_refused(text):
    assert dict(parse(b'{"kind":"log","seq":1,"msg":"%s"}' % text).errors) == {"invalid_json": 1}


@pytest.mark.parametrize(
    ("escaped", "msg"),
    [(b"\\ud83d\\ude00", "😀"), (b"\\u0000", "\x00"), (b"\\/", "/"), (b"\\u006b", "k"), (b"\\udc00", None)],
)
def test_escapes_are_read_as_json_reads_them(escaped, msg):
    batch = parse(b'{"kind":"log","seq":1,"msg":"%s"}' % escaped)
    assert (stored(batch, "logs", "msg") if batch.accepted else None) == ([msg] if msg else None)


# -- the two ways of reading ------------------------------------------------------------------------------------


def plain_event(rng: random.Random, kind: str, dirty: bool) -> dict[str, Any]:
    """An event of ``kind`` of values Arrow's reader types as the rules read them; ``dirty``: one breaks a rule."""
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
    if name in ("iter", "ts", "seq"):
        return type(value) is int and -(2**63) <= value < 2**63
    if name == "value":
        return type(value) in (int, float) and value != 0
    if name == "model_event":
        return type(value) is bool
    return type(value) is str


def test_random_bodies_read_whole_are_answered_as_read_line_by_line():
    rng = random.Random(20261122)
    whole_read = 0
    for _ in range(300):
        kinds = rng.choice([["scalar"], ["log"], ["system"], ["scalar", "log", "system"]])
        events = [plain_event(rng, rng.choice(kinds), dirty=rng.random() < 0.1) for _ in range(rng.randint(1, 12))]
        if rng.random() < 0.2:
            events.append(random_event(rng, dirty=rng.random() < 0.5))  # any value the rules take or refuse
        separator = rng.choice([b"\n", b"\r\n", b" \n "])
        body = separator.join(json.dumps(e, ensure_ascii=rng.random() < 0.5).encode() for e in events)
        defaults = rng.choice([DEFAULTS, {"project": None, "job": "j3", "worker": "w0"}, {"job": "j4"}])
        each, whole = readings(body, defaults)
        if whole is not None:
            whole_read += 1
            assert_same(whole, each)
    assert whole_read > 150  # the comparison covered Arrow's reading, not only the bodies it leaves


@pytest.mark.parametrize(
    "event",
    [
        scalar(variant=None),  # an explicit null
        scalar(iter=2.0),  # a whole float for iter
        scalar(ts=float(TS)),
        scalar(value="NaN"),
        scalar(value=-0.0),
        scalar(model_event=1),
        system(device=3),
        {"type": "scalar", "metric": "m", "iter": 1, "value": 1.0},
        scalar(extra=1),
        scalar(value=1, project=""),
        log(seq=2**64 - 1),
        log(msg="2026-11-22"),
    ],
    ids=lambda e: ",".join(f"{k}={v!r}" for k, v in e.items() if k not in ("kind", "metric", "ts"))[:40],
)
def test_a_value_the_reader_could_read_otherwise_is_read_as_json_reads_it(event, monkeypatch):
    body = lines(*([scalar(iter=i) for i in range(5)] + [event] if event.get("kind") == "scalar" else [event] * 3))
    monkeypatch.setattr(lines_module, "WHOLE_BODY_LINES", 1)
    tried_whole = parse(body)
    monkeypatch.setattr(lines_module, "WHOLE_BODY_LINES", 10**9)
    assert_same(tried_whole, parse(body))


def test_large_bodies_are_read_whole(monkeypatch):
    read: list[bool] = []
    whole = lines_module.read_whole

    def spy(*args: Any) -> Any:
        read.append(whole(*args) is not None)
        return whole(*args)

    monkeypatch.setattr(lines_module, "read_whole", spy)
    parse(lines(*(scalar(iter=i) for i in range(lines_module.WHOLE_BODY_LINES))))
    parse(lines(*(scalar(iter=i) for i in range(lines_module.WHOLE_BODY_LINES - 1))))
    assert read == [True]


def test_through_the_server_a_body_read_whole_stores_what_one_read_line_by_line_stores(client, store, monkeypatch):
    events = [
        *(scalar(metric=f"m{i % 4}", variant="v", iter=i // 4, value=i * 0.25, ts=TS + i) for i in range(40)),
        scalar(metric="m0", variant="v", iter=0, value=99.0),  # replaces the first point of m0
        scalar(metric="ünï", iter=1, value=2.5, model_event=True),
        *(log(worker="w1", seq=i, level="WARN" if i % 2 else "info", msg=f"line {i} ✓", ts=TS + i) for i in range(10)),
        *(system(worker="w2", device=str(i % 2), value=float(i), ts=TS + 1000 * i) for i in range(10)),
    ]
    monkeypatch.setattr(lines_module, "WHOLE_BODY_LINES", 1)
    whole = post_lines(client, *events, project="proj", job="whole")
    monkeypatch.setattr(lines_module, "WHOLE_BODY_LINES", 10**9)
    each = post_lines(client, *events, project="proj", job="each")
    assert whole.status_code == each.status_code == 200
    assert whole.json() == each.json() == {"accepted": len(events), "rejected": 0, "errors": {}, "examples": []}
    for table, columns in (
        ("scalars", "metric, variant, iter, ts, value, worker, model_event"),
        ("logs", "ts, worker, seq, level, msg"),
        ("system", "worker, metric, device, ts, value"),
    ):
        sql = f"SELECT {columns} FROM {store.database}.{table} FINAL WHERE job = '{{job}}' ORDER BY {columns}"
        rows = [store.engine.query(sql.format(job=job)).to_pylist() for job in ("whole", "each")]
        assert rows[0] == rows[1] and rows[0], table
    jobs = [client.get(f"/jp/v1/jobs/{job}").json() for job in ("whole", "each")]
    assert [w["worker"] for w in jobs[0]["workers"]] == [w["worker"] for w in jobs[1]["workers"]] == ["w1", "w2"]
    assert jobs[0]["job"]["started"] == jobs[1]["job"]["started"] == TS


def test_through_the_server_bad_lines_are_counted_and_named(client):
    events = [scalar(iter=1), scalar(value="high"), log(seq=-1), scalar(iter=2)]
    answer = post_lines(client, *events, project="proj", job="j1").json()
    assert answer["accepted"] == 2 and answer["errors"] == {"invalid_value": 1, "invalid_seq": 1}
    assert [e["index"] for e in answer["examples"]] == [1, 2]
