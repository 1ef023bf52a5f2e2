"""The scan of a JSON-lines body (docs/ingest.md, "Limits") against a plain reading of the same bytes, line by line:
the lines, their first and last bytes, and the refusals are the same, whichever bound the scan takes for nesting; no
parser is ever handed a line nested deeper than the limit; and a body read whole stores what it stores read line by
line where every event names the same kind, job, project or worker.
"""

from __future__ import annotations

import random

import orjson
import pyarrow.json as pa_json
import pytest

from helpers import NOW_MS, lines
from jobpulse.ingest import limits
from jobpulse.ingest import lines as lines_module
from jobpulse.ingest.batch import Batch
from jobpulse.ingest.limits import MAX_DEPTH, scan_lines
from jobpulse.ingest.parse import parse_body
from jobpulse.ingest.rules import check_events
from lines_cases import DEFAULTS, TS, assert_same, scalar, system

FLAT = b'{"kind":"scalar","metric":"m","iter":1,"value":1}'


def plain_depth(line: bytes) -> int:
    """How deep a line's arrays and objects nest, the brackets inside strings left out: one byte at a time."""
    deepest = level = 0
    in_string = escaped = False
    for byte in line:
        if in_string:
            if escaped:
                escaped = False
            elif byte == ord("\\"):
                escaped = True
            elif byte == ord('"'):
                in_string = False
        elif byte == ord('"'):
            in_string = True
        elif byte in b"[{":
            level += 1
            deepest = max(deepest, level)
        elif byte in b"]}":
            level -= 1
    return deepest


def plain_scan(body: bytes) -> tuple[list, list, list, list, tuple[bool, bool]]:
    """The lines of ``body`` (start, end), their first and last bytes, the refused ones, read line by line; and
    whether the body is ASCII and holds a backslash."""
    ranges, refused, at = [], [], 0
    for line in body.split(b"\n"):
        start, end = at + len(line) - len(line.lstrip(b" \t\r")), at + len(line.rstrip(b" \t\r"))
        if start < end:
            ranges.append((start, end))
        at += len(line) + 1
    for row, (start, end) in enumerate(ranges):
        if end - start > limits.MAX_LINE_BYTES:
            refused.append((row, "line_too_long"))
        elif plain_depth(body[start:end]) > MAX_DEPTH:
            refused.append((row, "too_deep"))
    facts = (body.isascii(), b"\\" in body)
    return ranges, [body[s] for s, _ in ranges], [body[e - 1] for _, e in ranges], sorted(refused), facts


def scanned(body: bytes) -> tuple[list, list, list, list, tuple[bool, bool]]:
    found = scan_lines(body, 100_000)
    refused = sorted((row, reason) for rows, reason, _ in found.refused for row in rows.tolist())
    ranges = list(zip(found.starts.tolist(), found.ends.tolist(), strict=True))
    return ranges, found.first.tolist(), found.last.tolist(), refused, (found.ascii, found.backslash)


def random_line(rng: random.Random) -> bytes:
    depth = rng.choice([0, 1, 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 200])
    blank = lambda: bytes(rng.choice(b" \t\r") for _ in range(rng.choice([0, 0, 1, 2, 7])))  # noqa: E731
    body = rng.choice([
        b'{"v":' + b"[" * depth + b"]" * depth + b"}",  # nested in arrays
        b'{"v":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}",  # nested in objects
        b'{"m":"' + b"[" * depth + b'"}',  # brackets in a string
        b'{"m":"\\"' + b"{" * depth + b'"}',  # after an escaped quote
        b"[" * depth,  # an opening alone, no object
        b"5",  # a line of no bracket at all
        b'"' + b"{" * depth,  # a string that never ends
        '{"m":"é 训练"}'.encode(),  # text that is not ASCII
        bytes(rng.choice(b'[]{}" \\ab\t') for _ in range(rng.randint(1, 120))),
    ])  # fmt: skip
    return blank() + body + blank()


@pytest.mark.parametrize("seed", range(4))
def test_the_scan_finds_what_a_plain_reading_line_by_line_finds(seed):
    rng = random.Random(seed)
    for _ in range(150):
        pieces = [random_line(rng) for _ in range(rng.randint(1, 12))]
        if rng.random() < 0.5:
            pieces += [FLAT] * rng.choice([1, 60, 300])  # flat lines: the body's count of brackets decides
            rng.shuffle(pieces)
        body = rng.choice([b"\n", b"\r\n", b"\n\n", b"\n \n"]).join(pieces)
        if not body.strip(b" \t\r\n"):
            continue
        assert scanned(body) == plain_scan(body), body[:300]


@pytest.mark.parametrize("size", [1, 5, 64])
def test_slices_smaller_than_a_line_change_nothing_the_scan_finds(monkeypatch, size):
    rng = random.Random(size)
    bodies = [b"\n".join(random_line(rng) for _ in range(rng.randint(1, 8))) for _ in range(60)]
    bodies = [body for body in bodies if body.strip(b" \t\r\n")]
    monkeypatch.setattr(limits, "_SLICE", size)
    for body in bodies:
        assert scanned(body) == plain_scan(body), (size, body[:300])


@pytest.mark.parametrize(
    ("flat", "levels"),
    [(2_000, MAX_DEPTH), (2_000, MAX_DEPTH + 1), (MAX_DEPTH - 2, MAX_DEPTH + 1), (0, MAX_DEPTH + 1)],
    ids=["at-the-limit", "one-past", "past-among-few", "past-alone"],
)
def test_a_line_nested_one_level_past_the_limit_is_refused_among_flat_lines(flat, levels):
    deep = b'{"kind":"scalar","metric":"m","iter":2,"value":' + b"[" * (levels - 1) + b"]" * (levels - 1) + b"}"
    body = b"\n".join([FLAT] * (flat // 2) + [deep] + [FLAT] * (flat - flat // 2))
    batch = parse_body(body, "application/x-ndjson", DEFAULTS, max_events=10_000, now_ms=NOW_MS)
    refused = {"too_deep": 1} if levels > MAX_DEPTH else {"invalid_value": 1}
    assert batch.accepted == flat and dict(batch.errors) == refused
    assert batch.examples[0]["index"] == flat // 2


def test_no_parser_is_handed_a_line_nested_deeper_than_the_limit(monkeypatch):
    handed: list[bytes] = []
    loads, read_json = orjson.loads, pa_json.read_json

    def spy_loads(text):
        handed.append(bytes(text))
        return loads(text)

    def spy_read_json(source, **options):
        handed.extend(bytes(source).split(b"\n"))
        return read_json(source, **options)

    monkeypatch.setattr(orjson, "loads", spy_loads)
    monkeypatch.setattr(pa_json, "read_json", spy_read_json)
    rng = random.Random(7)
    deep = b'{"kind":"scalar","metric":"m","iter":1,"value":' + b"[" * 100 + b"]" * 100 + b"}"
    for _ in range(20):
        events = [scalar(iter=i, value=i / 3) for i in range(rng.choice([5, 1_200]))]
        body = lines(*events).split(b"\n")
        for _ in range(rng.randint(0, 3)):
            body.insert(rng.randrange(len(body) + 1), rng.choice([deep, b"[" * 5000, b'{"plot":' + b"{" * 70]))
        parse_body(b"\n".join(body), "application/x-ndjson", DEFAULTS, max_events=10_000, now_ms=NOW_MS)
    assert len(handed) > 1_000
    assert max(plain_depth(text) for text in handed) <= MAX_DEPTH


def read_both_ways(body: bytes, defaults: dict) -> tuple[Batch, Batch]:
    found = scan_lines(body, 10_000)
    assert found.objects(body)
    each, whole = Batch(), Batch()
    check_events(lines_module.read_each(body, found, defaults), each, NOW_MS)
    events = lines_module.read_whole(body, found, defaults)
    assert events is not None
    check_events(events, whole, NOW_MS)
    return each, whole


@pytest.mark.parametrize(
    "named",
    [
        {"job": "j9", "project": "p9", "worker": "w-1"},
        {"kind": "system", "job": "j9"},
        {"job": "bad job"},
        {"project": ""},
        {"kind": "bogus"},
        {"worker": ""},
    ],
    ids=["good-names", "one-kind", "a-bad-job", "an-empty-project", "an-unknown-kind", "an-empty-worker"],
)
def test_one_name_on_every_line_is_stored_alike_read_whole_and_line_by_line(named):
    events = [system(value=float(i), ts=TS + i, **named) for i in range(1_100)]
    each, whole = read_both_ways(lines(*events), {**DEFAULTS, "kind": "scalar"})
    assert_same(whole, each)
    assert whole.accepted in (0, 1_100)


@pytest.mark.parametrize("last", ["j2", "J1", "j1"], ids=["the-last-differs", "by-case", "none-differs"])
def test_names_of_one_length_are_one_name_only_where_every_byte_is_the_same(last):
    events = [scalar(job="j1", iter=i, ts=TS + i) for i in range(1_099)] + [scalar(job=last, iter=0, ts=TS)]
    each, whole = read_both_ways(lines(*events), DEFAULTS)
    assert_same(whole, each)
    assert list(whole.jobs) == list(dict.fromkeys(["j1", last]))


@pytest.mark.parametrize(
    ("text", "refused"),
    [(b"\xed\xa0\x80", "invalid_json"), (b"\\ud800", "invalid_json"), (b"\\u0041", None), (b"caf\xc3\xa9", None)],
    ids=["an-encoded-surrogate", "an-escaped-surrogate", "an-escaped-letter", "utf8"],
)
def test_a_body_read_whole_answers_as_line_by_line_whatever_bytes_one_line_holds(text, refused):
    events = [lines(scalar(iter=i, ts=TS + i)) for i in range(1_100)]
    events[600] = b'{"kind":"log","seq":1,"msg":"%s","ts":%d}' % (text, TS)
    batch = parse_body(b"\n".join(events), "application/x-ndjson", DEFAULTS, max_events=10_000, now_ms=NOW_MS)
    assert dict(batch.errors) == ({refused: 1} if refused else {})
    assert batch.accepted == 1_100 - (1 if refused else 0)
