"""The bounds of an ingest body (docs/ingest.md, "Limits"): a line too deep or too long is refused on its own, a body
of too many events or that inflates too far is refused whole, a corrupt encoding is a 400 naming it; and the exact
requests that once crashed or hung the server are answered by a real server process, which stays up.
"""

from __future__ import annotations

import gzip
import random
import time

import httpx
import orjson
import pytest
import zstandard

from helpers import NOW_MS, lines
from jobpulse.errors import BadRequest, PayloadTooLarge
from jobpulse.ingest import limits
from jobpulse.ingest.encoding import MAX_MEMBERS
from jobpulse.ingest.limits import MAX_DEPTH, MAX_LINE_BYTES
from jobpulse.ingest.parse import decode, parse_body

GOOD = b'{"kind":"scalar","metric":"m","iter":1,"value":1}'
GARBAGE_GZIP = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbagegarbage"


def deep_value(levels: int) -> bytes:
    return b'{"kind":"scalar","metric":"m","iter":2,"value":' + b"[" * levels + b"]" * levels + b"}"


def parse(body: bytes, max_events: int = 100):
    return parse_body(body, "application/x-ndjson", {"project": "p", "job": "j1"}, max_events=max_events, now_ms=NOW_MS)


# -- nesting ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [MAX_DEPTH, MAX_DEPTH + 1, 100_000])
def test_a_line_nested_deeper_than_the_limit_is_refused_and_the_others_stored(levels):
    batch = parse(GOOD + b"\n" + deep_value(levels - 1))  # the event's own object is one level
    refused = {"too_deep": 1} if levels > MAX_DEPTH else {"invalid_value": 1}
    assert batch.accepted == 1 and dict(batch.errors) == refused


@pytest.mark.parametrize(
    "value",
    [
        b'"' + b"[" * 5000 + b'"',  # brackets inside a string are text
        b'"\\"' + b"[" * 5000 + b'"',  # after an escaped quote, still inside the string
        b'"\\\\' + b"]" * 3 + b'", "extra": ' + b"[" * 10 + b"]" * 10,  # an escaped backslash ends before the quote
    ],
    ids=["in-a-string", "after-an-escaped-quote", "after-an-escaped-backslash"],
)
def test_brackets_inside_strings_do_not_count(value):
    batch = parse(b'{"kind":"log","seq":1,"msg":%s}' % value)
    assert batch.accepted == 1, batch.examples


@pytest.mark.parametrize("as_text", [False, True], ids=["object", "its-json-text"])
def test_a_plot_nested_deeper_than_the_limit_is_refused(as_text):
    plot = b'{"data":' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}"
    value = orjson.dumps(plot.decode()) if as_text else plot
    batch = parse(GOOD + b'\n{"kind":"plot","metric":"p","iter":1,"plot":%s}' % value)
    assert batch.accepted == 1 and dict(batch.errors) == {"too_deep": 1}


@pytest.mark.parametrize("levels", [1_025, 100_000])
def test_a_columnar_body_nested_past_the_parsers_bound_is_400(levels):
    body = b'{"series":[{"kind":"scalar","metric":"m","iter":[1],"value":[' + b"[" * levels + b"]" * levels + b"]}]}"
    with pytest.raises(BadRequest, match="not valid JSON") as refused:
        parse_body(body, "application/json", {"project": "p", "job": "j1"}, max_events=10, now_ms=NOW_MS)
    assert refused.value.status == 400 and refused.value.field == "body"


def test_the_slices_the_scan_reads_change_nothing_it_finds(monkeypatch):
    rng = random.Random(20261125)

    def found(body: bytes) -> tuple:
        lines = limits.scan_lines(body, 1000)
        refused = sorted((row, reason) for rows, reason, _ in lines.refused for row in rows.tolist())
        return lines.starts.tolist(), lines.ends.tolist(), refused

    for _ in range(300):
        pieces = []
        for _ in range(rng.randint(1, 6)):
            depth = rng.choice([1, 30, 63, 64, 65, 100])
            pieces.append(rng.choice([
                b'{"v":' + b"[" * depth + b"]" * depth + b"}",
                b'{"m":"' + b"[" * depth + b'"}',
                b" \t" + b"{" * depth,
                bytes(rng.choice(b'[]{}" \\ab') for _ in range(rng.randint(1, 150))),
            ]))  # fmt: skip
        body = rng.choice([b"\n", b"\r\n", b"\n\n"]).join(pieces)
        whole = found(body)
        for size in (1, 7, 64):
            monkeypatch.setattr(limits, "_SLICE", size)
            assert found(body) == whole, (size, body)
        monkeypatch.undo()


# -- sizes and counts --------------------------------------------------------------------------------------------


def test_a_line_longer_than_the_limit_is_refused_and_the_others_stored():
    long = b'{"kind":"log","seq":1,"msg":"' + b"x" * MAX_LINE_BYTES + b'"}'
    batch = parse(GOOD + b"\n" + long)
    assert batch.accepted == 1 and dict(batch.errors) == {"line_too_long": 1}
    assert batch.examples[0]["index"] == 1


def test_a_body_of_more_events_than_a_batch_holds_is_413_before_any_line_is_read():
    with pytest.raises(PayloadTooLarge, match="at most 3 events"):
        parse(b"\n".join([b"{not json"] * 4), max_events=3)


# -- encodings --------------------------------------------------------------------------------------------------

ZSTD = zstandard.ZstdCompressor().compress(GOOD)
CORRUPT = {
    "gzip of garbage": (GARBAGE_GZIP, "gzip"),
    "gzip cut short": (gzip.compress(GOOD)[:-6], "gzip"),
    "gzip then junk": (gzip.compress(GOOD) + b"junk", "gzip"),
    "empty gzip": (b"", "gzip"),
    "zstd cut short": (ZSTD[:-3], "zstd"),
    "zstd then junk": (ZSTD + b"junk", "zstd"),
    "zstd of garbage": (b"garbage", "zstd"),
    "too many gzip members": (gzip.compress(b"") * (MAX_MEMBERS + 1), "gzip"),
}


@pytest.mark.parametrize("case", list(CORRUPT), ids=list(CORRUPT))
def test_a_corrupt_or_truncated_encoding_is_400_naming_it(case):
    body, encoding = CORRUPT[case]
    with pytest.raises(BadRequest) as refused:
        decode(body, encoding, 1 << 20)
    assert refused.value.status == 400 and refused.value.field == "Content-Encoding"
    assert encoding in refused.value.message


@pytest.mark.parametrize(
    "body",
    [gzip.compress(GOOD) + gzip.compress(b"\n" + GOOD), gzip.compress(GOOD) + b"\0" * 8, ZSTD + ZSTD],
    ids=["two-gzip-members", "gzip-padded-with-zeros", "two-zstd-frames"],
)
def test_bodies_of_several_members_are_decoded_whole(body):
    encoding = "zstd" if body.startswith(ZSTD[:4]) else "gzip"
    assert decode(body, encoding, 1 << 20).replace(b"\n", b"") in (GOOD, GOOD * 2)


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
def test_a_body_that_inflates_past_the_limit_is_413(encoding):
    plain = b" " * (4 << 20)
    body = gzip.compress(plain) if encoding == "gzip" else zstandard.ZstdCompressor().compress(plain)
    with pytest.raises(PayloadTooLarge):
        decode(body, encoding, 1 << 20)


def test_through_the_app_a_corrupt_gzip_body_is_400(client):
    answer = client.post(
        "/jp/v1/ingest",
        params={"project": "p", "job": "j1"},
        content=GARBAGE_GZIP,
        headers={"Content-Type": "application/x-ndjson", "Content-Encoding": "gzip"},
    )
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "Content-Encoding"


# -- the exact requests, against a real server process -----------------------------------------------------------


def post(server, body: bytes, encoding: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {server.api_key}", "Content-Type": "application/x-ndjson"}
    if encoding:
        headers["Content-Encoding"] = encoding
    return httpx.post(server.url + "/jp/v1/ingest", params={"project": "P", "job": "c"}, content=body,
                      headers=headers, timeout=30)  # fmt: skip


def assert_alive(server) -> None:
    assert server.process.poll() is None, server.output()[-2000:]
    assert httpx.get(server.url + "/healthz", timeout=10).status_code == 200


@pytest.mark.e2e
@pytest.mark.parametrize("levels", [100_000, 10_000])
def test_a_line_nested_a_hundred_thousand_levels_is_a_quick_4xx_and_the_server_stays_up(server, levels):
    line = b'{"kind":"scalar","metric":"m","iter":1,"value":' + b"[" * levels + b"]" * levels + b"}"
    started = time.monotonic()
    answer = post(server, line)
    assert time.monotonic() - started < 10
    assert answer.status_code == 400 and answer.json()["errors"] == {"too_deep": 1}
    assert_alive(server)


@pytest.mark.e2e
def test_after_a_valid_line_the_deep_one_is_refused_and_the_valid_one_stored(server):
    line = b'{"kind":"scalar","metric":"m","iter":1,"value":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    valid = orjson.dumps({"kind": "scalar", "metric": "kept", "iter": 7, "value": 4.5})
    answer = post(server, valid + b"\n" + line)
    assert answer.status_code == 200
    assert answer.json()["accepted"] == 1 and answer.json()["errors"] == {"too_deep": 1}
    assert_alive(server)
    points = httpx.get(server.url + "/jp/v1/jobs/c/scalars/points", params={"metric": "kept"},
                       headers={"Authorization": f"Bearer {server.api_key}"}, timeout=30).json()  # fmt: skip
    assert points["iter"] == [7] and points["value"] == [4.5]


@pytest.mark.e2e
def test_a_gzip_body_of_garbage_is_400_and_the_server_stays_up(server):
    answer = post(server, GARBAGE_GZIP, encoding="gzip")
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "Content-Encoding"
    assert_alive(server)


@pytest.mark.e2e
def test_a_body_of_many_lines_past_the_limits_is_answered_in_time(server):
    deep = b'{"kind":"scalar","metric":"m","iter":1,"value":' + b"[" * 2_000 + b"]" * 2_000 + b"}"
    started = time.monotonic()
    answer = post(
        server, b"\n".join([deep] * 2_000 + [lines({"kind": "scalar", "metric": "m", "iter": 1, "value": 1})])
    )
    assert time.monotonic() - started < 30
    assert answer.status_code == 200 and answer.json()["errors"] == {"too_deep": 2_000}
    assert_alive(server)
