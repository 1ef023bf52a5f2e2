"""POST /jp/v1/ingest with an Arrow IPC stream body: one row per event, typed columns."""

from __future__ import annotations

import math
import pickle
import struct
import subprocess
import sys
from typing import Any

import pyarrow as pa
import pytest
import zstandard

from helpers import NOW_MS

ARROW = "application/vnd.apache.arrow.stream"


def stream(columns: dict[str, Any] | pa.Table) -> bytes:
    table = columns if isinstance(columns, pa.Table) else pa.table(columns)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def post_arrow(client: Any, body: bytes, encoding: str | None = None, **params: str) -> Any:
    headers = {"Content-Type": ARROW, **({"Content-Encoding": encoding} if encoding else {})}
    return client.post("/jp/v1/ingest", params={"project": "proj", "job": "j1", **params}, content=body,
                       headers=headers)  # fmt: skip


def points(client: Any, metric: str, job: str = "j1") -> dict[str, Any]:
    return client.get(f"/jp/v1/jobs/{job}/scalars/points", params={"metric": metric}).json()


def test_scalar_rows_are_stored_with_their_types(client):
    body = stream(
        {
            "kind": ["scalar"] * 4,
            "metric": ["loss"] * 4,
            "iter": pa.array([0, 1, 2, 3], pa.int32()),
            "ts": pa.array([NOW_MS - 4, NOW_MS - 3, NOW_MS - 2, NOW_MS - 1], pa.int64()),
            "value": [0.5, float("nan"), float("inf"), -2.0],
        }
    )
    answer = post_arrow(client, body)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"accepted": 4, "rejected": 0, "errors": {}, "examples": []}
    got = points(client, "loss")
    assert got["iter"] == [0, 1, 2, 3] and got["ts"] == [NOW_MS - 4, NOW_MS - 3, NOW_MS - 2, NOW_MS - 1]
    assert got["value"][0] == 0.5 and got["value"][1] == "NaN" and got["value"][2] == "Infinity"
    assert got["value"][3] == -2.0


def test_timestamp_columns_of_any_unit_are_read_as_milliseconds(client):
    at = pa.array([(NOW_MS - 1000) * 1000 + 999], pa.timestamp("us", tz="UTC"))
    post_arrow(client, stream({"metric": ["loss"], "iter": [7], "ts": at, "value": [1.0]}), kind="scalar")
    assert points(client, "loss")["ts"] == [NOW_MS - 1000]


def test_a_missing_time_of_any_width_is_the_time_of_arrival(client):
    body = stream({"metric": ["loss"] * 3, "iter": [1, 2, 3], "value": [1.0, 2.0, 3.0],
                   "ts": pa.array([None, NOW_MS // 1000, 2**63 + 1], pa.uint64())})  # fmt: skip
    answer = post_arrow(client, body, kind="scalar").json()
    assert answer["accepted"] == 1 and answer["errors"] == {"ts_out_of_range": 2}
    assert points(client, "loss")["ts"][0] >= NOW_MS
    small = stream({"metric": ["acc"], "iter": [1], "value": [1.0], "ts": pa.array([None], pa.int32())})
    assert post_arrow(client, small, kind="scalar").json()["accepted"] == 1


def test_the_kind_may_come_from_the_query_and_the_job_from_a_column(client):
    body = stream({"job": ["j1", "j2"], "metric": ["acc", "acc"], "iter": [1, 1], "value": [0.1, 0.2]})
    assert post_arrow(client, body, kind="scalar").json()["accepted"] == 2
    assert points(client, "acc", "j1")["value"] == [0.1] and points(client, "acc", "j2")["value"] == [0.2]


def test_system_and_log_rows_travel_in_one_body(client):
    body = stream(
        {
            "kind": ["system", "system", "log", "log"],
            "worker": ["worker-1", "worker-1", "worker-1", None],
            "metric": ["gpu_util", "gpu_util", None, None],
            "device": ["0", "1", None, None],
            "ts": [NOW_MS - 60_000] * 4,
            "value": [97.0, 12.0, None, None],
            "seq": pa.array([None, None, 1, 1], pa.uint64()),
            "level": [None, None, "WARN", None],
            "msg": [None, None, "from worker-1", "from worker-0"],
        }
    )
    answer = post_arrow(client, body)
    assert answer.json()["accepted"] == 4, answer.text
    series = client.get("/jp/v1/jobs/j1/system/series", params={"metric": "gpu_util"}).json()["series"]
    assert sorted((s["worker"], s["device"], s["avg"][0]) for s in series) == [
        ("worker-1", "0", 97.0),
        ("worker-1", "1", 12.0),
    ]
    logged = client.get("/jp/v1/jobs/j1/logs").json()["lines"]
    assert sorted((line["worker"], line["level"], line["msg"]) for line in logged) == [
        ("worker-0", "info", "from worker-0"),
        ("worker-1", "warning", "from worker-1"),
    ]
    workers = client.get("/jp/v1/jobs/j1").json()["workers"]
    assert {w["worker"] for w in workers} == {"worker-0", "worker-1"}


def test_dictionary_encoded_text_and_zstd_bodies_are_read(client):
    table = pa.table(
        {
            "kind": pa.array(["scalar"] * 3).dictionary_encode(),
            "metric": pa.array(["loss"] * 3).dictionary_encode(),
            "variant": pa.array(["train", "train", "eval"], pa.large_string()),
            "iter": [1, 2, 1],
            "value": pa.array([1, 2, 3], pa.int16()),
        }
    )
    body = zstandard.ZstdCompressor().compress(stream(table))
    assert post_arrow(client, body, encoding="zstd").json()["accepted"] == 3
    chart = client.get("/jp/v1/jobs/j1/scalars/chart", params={"metric": "loss"}).json()
    assert sorted((s["variant"], s["count"]) for s in chart["series"]) == [("eval", [1]), ("train", [1, 1])]


def test_rows_breaking_a_rule_are_counted_and_the_rest_stored(client):
    body = stream(
        {
            "kind": ["scalar", "scalar", "scalar", "vector", "scalar", "scalar"],
            "job": ["j1", "j1", "bad job", "j1", "j1", "j1"],
            "metric": ["loss", "", "loss", "loss", "loss", "loss"],
            "iter": pa.array([1, 2, 3, 4, 2**60, None], pa.int64()),
            "value": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        }
    )
    answer = post_arrow(client, body)
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["accepted"] == 1 and result["rejected"] == 5
    assert result["errors"] == {
        "invalid_kind": 1,
        "invalid_job": 1,
        "invalid_metric": 1,
        "iter_out_of_range": 1,
        "invalid_iter": 1,
    }
    assert sorted(e["index"] for e in result["examples"]) == [1, 2, 3, 4, 5]
    assert points(client, "loss")["iter"] == [1]


def test_a_row_without_a_kind_is_counted_and_the_others_stored(client):
    body = stream({"kind": ["scalar", None], "metric": ["loss", "loss"], "iter": [1, 2], "value": [1.0, 2.0]})
    assert post_arrow(client, body).json()["errors"] == {"invalid_kind": 1}
    assert points(client, "loss")["iter"] == [1]


def test_a_body_of_bad_rows_alone_is_refused(client):
    answer = post_arrow(client, stream({"metric": ["loss"], "iter": [1], "value": [1.0]}))
    assert answer.status_code == 400
    assert answer.json()["errors"] == {"invalid_kind": 1}
    assert answer.json()["error"]["code"] == "no_valid_events"


@pytest.mark.parametrize(
    ("columns", "field"),
    [
        ({"kind": ["scalar"], "metric": ["loss"], "iter": [1.5], "value": [1.0]}, "iter"),
        ({"kind": ["scalar"], "metric": ["loss"], "iter": [1], "value": ["1.0"]}, "value"),
        ({"kind": ["scalar"], "metric": [3], "iter": [1], "value": [1.0]}, "metric"),
        ({"kind": ["scalar"], "metric": ["loss"], "iter": [1], "value": [1.0], "valeu": [2.0]}, "valeu"),
        ({"kind": ["scalar"], "metric": ["loss"], "iter": [1], "value": [1.0], "ts": ["yesterday"]}, "ts"),
    ],
)
def test_a_column_of_the_wrong_type_or_name_refuses_the_body_and_names_it(client, columns, field):
    answer = post_arrow(client, stream(columns))
    assert answer.status_code == 400
    assert answer.json()["error"]["field"] == field and repr(field) in answer.json()["error"]["message"]
    assert points(client, "loss").get("iter", []) == []


def test_a_body_that_is_no_arrow_stream_is_refused(client):
    answer = post_arrow(client, b'{"kind": "scalar"}')
    assert answer.status_code == 400
    assert "Arrow IPC stream" in answer.json()["error"]["message"]


def _with_int32s_replaced(body: bytes, found: tuple[int, ...], put: tuple[int, ...]) -> bytes:
    """``body`` with the one run of little-endian int32 ``found`` in it overwritten by ``put``."""
    old, new = struct.pack(f"<{len(found)}i", *found), struct.pack(f"<{len(put)}i", *put)
    assert body.count(old) == 1
    return body.replace(old, new)


def crafted_streams() -> dict[str, bytes]:
    """Streams whose structure is sound but whose values point outside their buffers."""
    base = {"kind": ["scalar"] * 4, "iter": pa.array(range(4), pa.int64()), "value": [1.0] * 4}
    offsets = stream({**base, "metric": ["m"] * 4})  # the metric's offsets are 0, 1, 2, 3, 4
    dictionary = stream({**base, "metric": pa.DictionaryArray.from_arrays(pa.array([4, 3, 2, 1], pa.int32()),
                                                                          ["a", "b", "c", "d", "e"])})  # fmt: skip
    assert offsets.count(b"metric") == 1
    return {
        "offset": _with_int32s_replaced(offsets, (0, 1, 2, 3, 4), (0, 1 << 30, 2, 3, 4)),
        "dictionary-index": _with_int32s_replaced(dictionary, (4, 3, 2, 1), (1 << 20, 3, 2, 1)),
        "name": offsets.replace(b"metric", b"metr\xceX"),  # a column name that is not UTF-8
    }


def test_a_stream_whose_values_point_outside_its_buffers_or_whose_names_are_not_text_is_refused():
    # in a process of its own: read unchecked, such a stream crashes the process that reads it
    script = (
        "import sys, pickle\n"
        "from jobpulse.errors import BadRequest\n"
        "from jobpulse.ingest.parse import parse_body\n"
        "for name, body in pickle.loads(sys.stdin.buffer.read()).items():\n"
        "    try:\n"
        "        parse_body(body, 'application/vnd.apache.arrow.stream', {'project': 'p', 'job': 'j'}, max_events=9)\n"
        "        print(name, 'taken')\n"
        "    except BadRequest as exc:\n"
        "        print(name, exc.field, exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], input=pickle.dumps(crafted_streams()), capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()
    answers = done.stdout.decode().splitlines()
    assert [line.split()[:2] for line in answers] == [[name, "body"] for name in ("offset", "dictionary-index", "name")]
    assert ["not a valid Arrow IPC stream" in line for line in answers] == [True, True, False]
    assert "column name of the Arrow body is not UTF-8" in answers[2]


def test_a_crafted_stream_is_answered_400_and_the_points_before_it_stay(client):
    assert post_arrow(client, stream({"kind": ["scalar"], "metric": ["m"], "iter": [0], "value": [1.0]})).is_success
    for body in crafted_streams().values():
        answer = post_arrow(client, body)
        assert answer.status_code == 400
        assert answer.json()["error"]["field"] == "body"
    assert points(client, "m")["value"] == [1.0]


def test_a_resent_body_stores_nothing_twice(client):
    body = stream({"kind": ["scalar"] * 3, "metric": ["loss"] * 3, "iter": [1, 2, 3], "value": [1.0, 2.0, 3.0]})
    for _ in range(2):
        assert post_arrow(client, body).json()["accepted"] == 3
    chart = client.get("/jp/v1/jobs/j1/scalars/chart", params={"metric": "loss", "buckets": 1}).json()
    assert chart["series"][0]["count"] == [3]
    assert math.isclose(chart["series"][0]["mean"][0], 2.0)


def test_integers_of_any_width_and_sign_are_range_checked(client):
    scalars = stream({"kind": ["scalar"] * 2, "metric": ["loss"] * 2, "iter": pa.array([1, 2**63 + 5], pa.uint64()),
                      "value": [1.0, 2.0]})  # fmt: skip
    assert post_arrow(client, scalars).json()["errors"] == {"iter_out_of_range": 1}
    lines = stream({"kind": ["log"] * 2, "seq": pa.array([-1, 2], pa.int8()), "msg": ["a", "b"]})
    assert post_arrow(client, lines).json()["errors"] == {"invalid_seq": 1}
    assert points(client, "loss")["iter"] == [1]
    assert [line["msg"] for line in client.get("/jp/v1/jobs/j1/logs").json()["lines"]] == ["b"]


def test_a_null_takes_the_querys_default_for_its_column(client):
    body = stream({"kind": ["scalar", None], "job": [None, "j2"], "metric": ["loss", "loss"], "iter": [1, 2],
                   "value": [1.0, 2.0]})  # fmt: skip
    assert post_arrow(client, body, kind="scalar").json()["accepted"] == 2
    assert points(client, "loss", "j1")["iter"] == [1] and points(client, "loss", "j2")["iter"] == [2]
    nulls = stream({"metric": ["acc"], "variant": pa.nulls(1), "iter": [1], "value": [0.5]})  # Arrow's null type
    assert post_arrow(client, nulls, kind="scalar").json()["accepted"] == 1
    assert points(client, "acc")["variant"] == [""]


def test_a_stream_of_several_record_batches_is_read_whole(client):
    first = pa.table({"metric": ["loss"] * 2, "iter": [1, 2], "value": [1.0, 2.0]})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, first.schema) as writer:
        writer.write_table(first)
        writer.write_table(pa.table({"metric": ["loss"], "iter": [3], "value": [3.0]}))
    assert post_arrow(client, sink.getvalue().to_pybytes(), kind="scalar").json()["accepted"] == 3
    assert points(client, "loss")["iter"] == [1, 2, 3]


def test_a_job_takes_the_project_a_later_row_names_when_the_first_names_none(client):
    body = stream({"kind": ["scalar"] * 2, "job": ["fresh"] * 2, "project": [None, "other"], "metric": ["m", "m"],
                   "iter": [1, 2], "value": [1.0, 2.0]})  # fmt: skip
    answer = client.post("/jp/v1/ingest", params={"job": "fresh"}, content=body, headers={"Content-Type": ARROW})
    assert answer.json()["accepted"] == 2
    assert client.get("/jp/v1/jobs/fresh").json()["job"]["project"] == "other"


def test_integer_values_past_float_precision_are_stored_as_the_nearest_float(client):
    body = stream({"kind": ["scalar"] * 3, "metric": ["big"] * 3, "iter": [1, 2, 3],
                   "value": pa.array([2**53 + 1, 2**63 - 1, -(2**63)], pa.int64())})  # fmt: skip
    assert post_arrow(client, body).json()["accepted"] == 3
    assert points(client, "big")["value"] == [float(2**53 + 1), float(2**63 - 1), float(-(2**63))]
    unsigned = stream({"kind": ["scalar"], "metric": ["ubig"], "iter": [1],
                       "value": pa.array([2**64 - 1], pa.uint64())})  # fmt: skip
    assert post_arrow(client, unsigned).json()["accepted"] == 1
    assert points(client, "ubig")["value"] == [float(2**64 - 1)]
