"""Property-based tests of the ClearML events parser: whatever a client sends, the answer is stored events or a
ClearML-shaped 4xx, never a failure of the server.

Events are written as JSON text, so that they can hold what Python's ``json.dumps`` would not write or what
orjson refuses: nesting a hundred thousand levels deep, ``NaN`` and ``Infinity``, integers beyond 64 bits,
iterations of 2^63, NUL and other control characters, lone surrogates, names of 10 kB and path traversal in
image keys and URLs. Examples come from a fixed seed (``derandomize``), so a run repeats exactly.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
import pytest
from clearml_support import NOW_MS, new_task
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobpulse.compat.clearml import jsontext
from jobpulse.compat.clearml.ingest import parse_lines

SETTINGS = settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TYPES = ["training_stats_scalar", "training_stats_vector", "plot", "training_debug_image", "log"]


def _text(value: Any) -> str:
    """JSON text of a plain value: Python's spelling, so NaN, infinities and big integers stay as they are."""
    return json.dumps(value, ensure_ascii=False)


def nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


numbers = st.one_of(
    st.integers(-(2**63), 2**64 - 1),
    st.sampled_from([2**63, 2**63 - 1, -(2**63), 2**64 - 1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 5e-324, -0.0]),
).map(_text)
names = st.one_of(
    st.text(min_size=1, max_size=40),
    st.text(alphabet=st.characters(codec="utf-8", max_codepoint=0x1F), min_size=1, max_size=20),  # NUL, controls
    st.builds(lambda c, n: c * n, st.sampled_from(["a", "é", "\x00", "/"]), st.integers(10_000, 10_050)),  # 10 kB
    st.sampled_from(["../../etc/passwd", "..\\..\\boot.ini", "/abs/path", "a/../../b", "%2e%2e%2f", "\u202e", "."]),
).map(_text)
steps = st.one_of(st.integers(-10, 10**6), st.sampled_from([2**31, 2**53, 2**63 - 1, 2**63, -(2**63)])).map(_text)
times = st.one_of(st.integers(NOW_MS - 10**9, NOW_MS), st.sampled_from([0, -1, 2**63, NOW_MS * 10])).map(_text)
deep = st.integers(1, 100_000).map(nested)
plots = st.one_of(
    st.builds(lambda n: {"data": [{"x": list(range(n)), "y": [0.5] * n}]}, st.integers(0, 5)).map(orjson.dumps),
    deep.map(str.encode),
    st.sampled_from([b"not json", b"[NaN]", b"{}", b""]),
).map(lambda plot: _text(plot.decode()))  # a plot is JSON text inside a string
FIELDS = {
    "metric": names,
    "variant": names,
    "iter": steps,
    "timestamp": times,
    "value": numbers,
    "values": st.lists(numbers, max_size=4).map(lambda items: "[" + ", ".join(items) + "]"),
    "plot_str": plots,
    "url": names,
    "key": names,
    "msg": names,
    "level": st.sampled_from(["debug", "INFO", "warn", "fatal", "bogus"]).map(_text),
    "worker": names,
}
# what no field should hold: integers beyond 64 bits, lone surrogates, nesting a hundred thousand levels deep
extreme = st.one_of(
    st.sampled_from([str(10**400), str(-(2**64) - 1), '"\\ud800"', '"a\\udfffb"', "NaN", "-Infinity", "null", "{}"]),
    deep,
    numbers,
    names,
)


@st.composite
def event_text(draw: st.DrawFn, task: str) -> str:
    """One event as JSON text: a known type and the task with some of the fields (values at the edges of what is
    valid), and now and then one field, the type or the task holding something extreme."""
    fields = {"type": _text(draw(st.sampled_from(TYPES))), "task": _text(task), "metric": draw(names)}
    for name in FIELDS:
        if draw(st.booleans()):
            fields[name] = draw(FIELDS[name])
    if draw(st.booleans()):
        fields[draw(st.sampled_from(sorted(fields)))] = draw(extreme)
    return "{" + ", ".join(f"{_text(name)}: {text}" for name, text in fields.items()) + "}"


def _check_answer(answer: Any, sent: int) -> None:
    """Stored (200, every event counted as added or refused) or refused (400, ClearML's shape): nothing else."""
    doc = answer.json()
    assert set(doc) == {"meta", "data"}, doc
    meta = doc["meta"]
    assert meta["result_code"] == answer.status_code, meta
    if answer.status_code == 200:
        assert doc["data"]["added"] >= 1
        assert doc["data"]["added"] + doc["data"]["errors"] == sent, doc["data"]
        assert sum(doc["data"]["errors_info"].values()) == doc["data"]["errors"]
    else:
        assert answer.status_code == 400 and meta["result_subcode"] in (12, 131), meta
        assert meta["result_msg"] and doc["data"] == {}


@pytest.fixture(scope="module")
def admin(app, store):  # noqa: ANN001, ANN201 - one admin TestClient for all the examples of the module
    from starlette.testclient import TestClient

    token = store.keys.create("fuzz admin", ["*"], "admin")[1]
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def fuzz_task(admin) -> str:  # noqa: ANN001
    return new_task(admin, "fuzzed task")


@SETTINGS
@given(data=st.data())
def test_one_hostile_event_is_stored_or_refused_in_clearml_shape(admin, fuzz_task, data):
    text = data.draw(event_text(fuzz_task))
    answer = admin.post("/v2.23/events.add", content=text.encode("utf-8", "surrogatepass"))
    _check_answer(answer, 1)


@SETTINGS
@given(data=st.data())
def test_a_batch_of_hostile_events_stores_the_good_and_counts_the_bad(admin, fuzz_task, data):
    good = orjson.dumps({"type": "log", "task": fuzz_task, "msg": "good", "timestamp": NOW_MS}).decode()
    lines = data.draw(st.lists(event_text(fuzz_task), min_size=1, max_size=4)) + [good]
    order = data.draw(st.permutations(lines))
    answer = admin.post("/v2.23/events.add_batch", content="\n".join(order).encode("utf-8", "surrogatepass"))
    assert answer.status_code == 200, answer.text
    _check_answer(answer, len(lines))


@settings(max_examples=300, derandomize=True, deadline=None, database=None)
@given(
    st.binary(max_size=300)
    | st.lists(st.sampled_from([b"[", b"]", b"{", b"}", b'"', b"\\", b"NaN", b","])).map(b"".join)
)
def test_reading_batch_lines_never_fails_whatever_the_bytes(raw):
    for event in parse_lines(raw):
        assert isinstance(event, (dict, list, str, int, float, bool, jsontext.Refused)) or event is None


@settings(max_examples=300, derandomize=True, deadline=None, database=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.floats() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
        max_leaves=30,
    )
)
def test_depth_is_the_nesting_of_arrays_and_objects_and_ignores_brackets_in_strings(value):
    def levels(item: Any) -> int:
        if isinstance(item, list):
            return 1 + max(map(levels, item), default=0)
        if isinstance(item, dict):
            return 1 + max(map(levels, item.values()), default=0)
        return 0

    assert jsontext.depth(json.dumps(value)) == levels(value)


@pytest.mark.parametrize("levels", [65, 1_000, 100_000])
def test_text_nested_deeper_than_the_limit_is_refused_before_any_parser_reads_it(levels):
    with pytest.raises(jsontext.TooDeep):
        jsontext.loads(nested(levels, "NaN"))  # NaN: only Python's parser, which recurses, reads it


def test_text_nested_as_deep_as_the_limit_is_read():
    value = jsontext.loads(nested(jsontext.MAX_DEPTH, "NaN"))
    for _ in range(jsontext.MAX_DEPTH):
        (value,) = value
    assert math.isnan(value)
