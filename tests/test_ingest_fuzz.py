"""Property-based tests of the ingest parsers: whatever a body holds, the answer is a batch or one of the project's
4xx errors, never anything else, and every event of a batch is either stored or counted as refused.

Bodies are written as bytes, so that they can hold what a JSON encoder would not write: nesting up to a hundred
thousand levels deep (in values, nested objects and plots), NaN and Infinity literals, integers beyond 64 bits,
steps of 2^63 and -2^63-1, NUL and other control characters, 10 kB names, path traversal in names and URLs, random
bytes and truncated bodies. Examples come from a fixed seed (``derandomize``), so a run repeats exactly.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import NOW_MS
from jobpulse.errors import BadRequest
from jobpulse.ingest import lines as lines_module
from jobpulse.ingest.batch import Batch
from jobpulse.ingest.limits import scan_lines
from jobpulse.ingest.parse import decode, parse_body
from jobpulse.ingest.rules import check_events
from lines_cases import assert_same

SETTINGS = settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
DEFAULTS = {"project": "proj", "job": "j1", "worker": None, "kind": None}
LIMIT = 1 << 20


def text(value: Any) -> bytes:
    """JSON text of a plain value as Python writes it: NaN, infinities and big integers stay as they are."""
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def nested(depth: int, inner: bytes = b"1", opening: bytes = b"[") -> bytes:
    closing = b"]" if opening == b"[" else b"}"
    if opening == b"{":
        return b'{"a":' * depth + inner + closing * depth
    return opening * depth + inner + closing * depth


numbers = st.one_of(
    st.integers(-(2**63) - 1, 2**64),
    st.sampled_from([2**63, 2**63 - 1, -(2**63), -(2**63) - 1, 2**64 - 1, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 5e-324, -0.0]),
).map(text)
strings = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=st.characters(codec="utf-8", max_codepoint=0x1F), min_size=1, max_size=10),  # NUL, controls
    st.builds(lambda c, n: c * n, st.sampled_from(["a", "é", "\x00", "/", "["]), st.integers(10_000, 10_050)),
    st.sampled_from(["../../etc/passwd", "..\\..\\boot.ini", "/abs", "a/../../b", "%2e%2e%2f", "\u202e", "NaN"]),
    st.sampled_from(["scalar", "vector", "plot", "image", "log", "system", "warn", "worker-0", "j1", "proj"]),
).map(text)
deep = st.builds(nested, st.integers(1, 100_000), st.just(b"1"), st.sampled_from([b"[", b"{"]))
literals = st.sampled_from([b"null", b"true", b"false", b"NaN", b"Infinity", b"-Infinity", b"[]", b"{}", b'"\\ud800"'])
values = st.one_of(
    numbers, strings, literals, deep, st.lists(numbers, max_size=5).map(lambda v: b"[" + b",".join(v) + b"]")
)
FIELDS = ["kind", "type", "project", "job", "worker", "metric", "variant", "iter", "ts", "value", "values", "plot",
          "url", "key", "meta", "seq", "level", "msg", "device", "model_event", "extra"]  # fmt: skip
KINDS = st.sampled_from([b'"scalar"', b'"vector"', b'"plot"', b'"image"', b'"log"', b'"system"'])


GOOD = {
    "metric": st.sampled_from(["loss", "gpu_util", "ünï", "m" * 255]).map(text),
    "variant": st.sampled_from(["", "train", "val/top-1"]).map(text),
    "iter": st.integers(-(2**31), 2**53).map(text),
    "ts": st.integers(NOW_MS - 10**10, NOW_MS).map(text),
    "value": st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-(2**63), 2**64 - 1)).map(text),
    "seq": st.integers(0, 2**64 - 1).map(text),
    "msg": st.text(max_size=20).map(text),
    "level": st.sampled_from(["info", "WARN", "error"]).map(text),
    "device": st.sampled_from(["0", "7", ""]).map(text),
    "worker": st.sampled_from(["worker-0", "host:1/rank@2"]).map(text),
    "model_event": st.booleans().map(text),
    "values": st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=4).map(text),
    "plot": st.builds(lambda n: {"data": [{"x": list(range(n))}]}, st.integers(0, 3)).map(text),
    "url": st.sampled_from(["/jp/v1/jobs/j1/files/a.png", "s3://bucket/a.png"]).map(text),
}
KIND_FIELDS = {
    b'"scalar"': ["metric", "variant", "iter", "value", "ts", "model_event"],
    b'"system"': ["metric", "device", "value", "worker", "ts"],
    b'"log"': ["seq", "msg", "level", "worker", "ts"],
    b'"vector"': ["metric", "iter", "values"],
    b'"plot"': ["metric", "iter", "plot"],
    b'"image"': ["metric", "iter", "url"],
}


@st.composite
def event_lines(draw: st.DrawFn, kinds: tuple[bytes, ...] = tuple(KIND_FIELDS), hostile: int = 10) -> bytes:
    """One line: mostly an event, each field good, hostile one time in ``hostile`` or left out; sometimes
    anything at all."""
    shape = draw(st.integers(0, 19))
    if shape == 0:
        return draw(st.binary(max_size=60))
    if shape == 1:
        return draw(values)
    kind = draw(st.sampled_from(kinds))
    fields = [(b'"kind"', kind)]
    for name in KIND_FIELDS[kind]:
        roll = draw(st.integers(0, hostile))
        if roll:
            fields.append((text(name), draw(values) if roll == 1 else draw(GOOD[name])))
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=2)) if shape == 2 else ():
        fields.append((text(name), draw(values)))
    line = b"{" + b",".join(k + b":" + v for k, v in fields) + b"}"
    if shape == 3:
        line = line[: draw(st.integers(0, len(line)))]  # cut short
    return line


bodies = st.lists(event_lines(), min_size=1, max_size=8).map(b"\n".join)
# bodies Arrow's reader reads, most of them: plain scalar, system and log events, a value now and then of any kind
plain_bodies = st.lists(event_lines((b'"scalar"', b'"system"', b'"log"'), hostile=30), min_size=1, max_size=8).map(
    b"\n".join
)


def events_in(body: bytes) -> int:
    return sum(1 for line in body.split(b"\n") if line.strip(b" \t\r"))


def assert_counted(batch: Batch, events: int) -> None:
    """Every event is stored or refused, once; the tables hold the stored ones."""
    assert batch.accepted + batch.rejected == events
    assert sum(table.num_rows for table in batch.tables().values()) == batch.accepted
    assert all(0 <= e["index"] < events for e in batch.examples)


def parsed(body: bytes, content_type: str, max_events: int = 1000) -> Batch | None:
    """The batch of ``body``, or None where it is refused whole with a 4xx."""
    try:
        return parse_body(body, content_type, DEFAULTS, max_events=max_events, now_ms=NOW_MS)
    except BadRequest as exc:  # PayloadTooLarge is one
        assert 400 <= exc.status < 500
        return None


# -- JSON lines -----------------------------------------------------------------------------------------------


@SETTINGS
@given(bodies)
def test_json_lines_are_stored_or_refused_line_by_line(body):
    batch = parsed(body, "application/x-ndjson")
    if batch is not None:
        assert_counted(batch, events_in(body))


@SETTINGS
@given(plain_bodies)
def test_json_lines_read_whole_are_answered_as_read_line_by_line(body):
    try:
        found = scan_lines(body, 1000)
    except BadRequest:
        return
    each = Batch()
    check_events(lines_module.read_each(body, found, DEFAULTS), each, NOW_MS)
    events = lines_module.read_whole(body, found, DEFAULTS) if found.objects(body) else None
    if events is not None:
        whole = Batch()
        check_events(events, whole, NOW_MS)
        assert_same(whole, each)


@SETTINGS
@given(st.integers(1, 100_000), st.sampled_from(["value", "extra", "plot", "values", "meta"]), st.booleans())
def test_deep_nesting_is_refused_before_any_parser_reads_it(depth, field, as_text):
    inner = nested(depth, opening=b"[" if depth % 2 else b"{")
    value = text(inner.decode()) if as_text else inner  # a plot may come as its JSON text
    line = b'{"kind":"%s","metric":"m","iter":1,"%s":%s}' % (
        b"plot" if field == "plot" else b"scalar",
        field.encode(),
        value,
    )
    good = b'{"kind":"scalar","metric":"m","iter":2,"value":1}'
    batch = parsed(good + b"\n" + line, "application/x-ndjson")
    assert batch is not None and batch.accepted >= 1  # the good line is stored whatever the other holds
    assert_counted(batch, 2)
    if depth > 64 and (not as_text or field == "plot"):
        assert dict(batch.errors) == {"too_deep": 1}


# -- the columnar form -------------------------------------------------------------------------------------


@st.composite
def columnar_bodies(draw: st.DrawFn) -> bytes:
    series = []
    for _ in range(draw(st.integers(0, 4))):
        n = draw(st.integers(0, 4))
        fields = [(b'"kind"', draw(st.one_of(KINDS, values)))]
        for name in draw(st.lists(st.sampled_from(FIELDS), max_size=6)):
            if draw(st.booleans()):
                fields.append((text(name), b"[" + b",".join(draw(st.lists(values, min_size=n, max_size=n))) + b"]"))
            else:
                fields.append((text(name), draw(values)))
        series.append(
            b"{" + b",".join(k + b":" + v for k, v in fields) + b"}" if draw(st.integers(0, 9)) else draw(values)
        )
    body = b'{"project":"proj","job":"j1","series":[' + b",".join(series) + b"]}"
    return body[: draw(st.integers(0, len(body)))] if draw(st.integers(0, 9)) == 0 else body


def points_in(body: bytes) -> int:
    """The events of a columnar body, counted as the form counts them: a series of no point, or no object, is one."""
    total = 0
    for series in orjson.loads(body)["series"]:
        lists = [series.get(n) for n in ("value", "iter", "ts", "seq", "msg")] if isinstance(series, dict) else []
        total += max(1, next((len(v) for v in lists if isinstance(v, list)), 0))
    return total


@SETTINGS
@given(columnar_bodies())
def test_columnar_bodies_are_stored_or_refused_point_by_point(body):
    batch = parsed(body, "application/json")
    if batch is not None:
        assert_counted(batch, points_in(body))


# -- the Arrow form --------------------------------------------------------------------------------------------

ARROW_COLUMNS = {
    "kind": st.sampled_from(["scalar", "log", "system", "plot", "", None]),
    "metric": st.one_of(st.none(), st.text(max_size=5), st.just("m" * 300)),
    "job": st.sampled_from(["j1", "-x", "", None, "a/../b"]),
    "iter": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
    "ts": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.just(NOW_MS)),
    "value": st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
    "seq": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
    "msg": st.one_of(st.none(), st.text(max_size=5)),
    "level": st.sampled_from(["info", "WARN", "loud", None]),
    "device": st.one_of(st.none(), st.text(max_size=3), st.just("d" * 70)),
}
ARROW_TYPES = {
    "iter": [pa.int64(), pa.uint64(), pa.int8()],
    "ts": [pa.int64(), pa.float64(), pa.timestamp("s")],
    "seq": [pa.int64(), pa.uint64(), pa.int16()],
    "value": [pa.float64(), pa.float32(), pa.int32()],
}


@st.composite
def arrow_bodies(draw: st.DrawFn) -> bytes:
    n = draw(st.integers(0, 6))
    columns = {}
    for name in draw(st.lists(st.sampled_from(list(ARROW_COLUMNS)), unique=True, max_size=7)):
        data = draw(st.lists(ARROW_COLUMNS[name], min_size=n, max_size=n))
        kind = draw(st.sampled_from(ARROW_TYPES.get(name, [pa.string()])))
        try:
            columns[name] = (
                pa.array(data, kind, safe=False)
                if kind != pa.float64() or name != "ts"
                else pa.array([None if v is None else float(v) for v in data], kind)
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            columns[name] = pa.array(data)  # of the type Arrow makes of the values
    table = pa.table(columns) if columns else pa.table({"value": pa.array([], pa.float64())})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    body = sink.getvalue().to_pybytes()
    cut = draw(st.integers(0, 6))
    if cut == 0:
        body = body[: draw(st.integers(0, len(body)))]
    elif cut == 1:
        at = draw(st.integers(0, max(0, len(body) - 1)))
        body = body[:at] + bytes([draw(st.integers(0, 255))]) + body[at + 1 :]  # one byte changed
    return body


@SETTINGS
@given(st.one_of(arrow_bodies(), st.binary(max_size=200)))
def test_arrow_bodies_are_stored_or_refused_row_by_row(body):
    batch = parsed(body, "application/vnd.apache.arrow.stream")
    if batch is not None:
        rows = pa.ipc.open_stream(body).read_all().num_rows
        assert_counted(batch, rows)


# -- Content-Encoding ------------------------------------------------------------------------------------------


@st.composite
def encoded_bodies(draw: st.DrawFn) -> tuple[bytes, str]:
    encoding = draw(st.sampled_from(["gzip", "zstd"]))
    plain = draw(st.one_of(st.binary(max_size=300), st.builds(lambda n: b" " * n, st.integers(0, 3 * LIMIT))))
    body = gzip.compress(plain) if encoding == "gzip" else zstandard.ZstdCompressor().compress(plain)
    change = draw(st.integers(0, 4))
    if change == 0:
        body = body[: draw(st.integers(0, len(body)))]  # truncated
    elif change == 1:
        body += draw(st.binary(min_size=1, max_size=20))  # something after the end
    elif change == 2:
        body = draw(st.binary(max_size=100))  # anything at all
    elif change == 3:
        body = (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" if encoding == "gzip" else body[:4]) + draw(st.binary())
    return body, encoding


@SETTINGS
@given(encoded_bodies())
def test_encoded_bodies_are_decoded_or_refused(case):
    body, encoding = case
    try:
        data = decode(body, encoding, LIMIT)
    except BadRequest as exc:
        assert exc.status == 413 or exc.field == "Content-Encoding"
        return
    assert len(data) <= LIMIT


@SETTINGS
@given(st.binary(max_size=300), st.sampled_from(["gzip", "zstd"]))
def test_a_prefix_of_an_encoded_body_is_the_body_or_refused(plain, encoding):
    body = gzip.compress(plain) if encoding == "gzip" else zstandard.ZstdCompressor().compress(plain)
    for cut in np.linspace(0, len(body), 6).astype(int).tolist():
        try:
            assert decode(body[:cut], encoding, LIMIT) == plain  # only the whole body decodes, to itself
        except BadRequest as exc:
            assert exc.field == "Content-Encoding" and cut < len(body)
