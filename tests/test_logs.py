"""Logs: head, tail, paging without skips or repeats, filters, search, download, follow."""

from __future__ import annotations

import orjson

from helpers import NOW_MS, post_columns


def ingest_log(
    client,
    worker: str,
    msgs: list[str],
    ts: list[int] | None = None,
    level: str = "info",
    start_seq: int = 0,
    job: str = "j1",
) -> None:
    n = len(msgs)
    body = {
        "project": "proj",
        "job": job,
        "series": [
            {
                "kind": "log",
                "worker": worker,
                "seq": list(range(start_seq, start_seq + n)),
                "ts": ts or [NOW_MS + i for i in range(n)],
                "level": level,
                "msg": msgs,
            }
        ],
    }
    assert post_columns(client, body).json()["accepted"] == n


def msgs(page: dict) -> list[str]:
    return [line["msg"] for line in page["lines"]]


def test_head_and_tail(client):
    ingest_log(client, "w0", [f"line {i}" for i in range(10)])
    assert msgs(client.get("/jp/v1/jobs/j1/logs", params={"start": "head", "limit": 3}).json()) == [
        "line 0",
        "line 1",
        "line 2",
    ]
    assert msgs(client.get("/jp/v1/jobs/j1/logs", params={"limit": 3}).json()) == [
        "line 7",
        "line 8",
        "line 9",
    ]


def test_paging_across_lines_sharing_one_timestamp_never_skips_or_repeats(client):
    same = [NOW_MS] * 50
    ingest_log(client, "w0", [f"a{i}" for i in range(50)], ts=same)
    ingest_log(client, "w1", [f"b{i}" for i in range(50)], ts=same)
    ingest_log(client, "w0", ["after"], ts=[NOW_MS + 1], start_seq=50)
    seen: list[str] = []
    page = client.get("/jp/v1/jobs/j1/logs", params={"start": "head", "limit": 7}).json()
    while page["lines"]:
        seen += msgs(page)
        page = client.get("/jp/v1/jobs/j1/logs", params={"after": page["last_cursor"], "limit": 7}).json()
    assert len(seen) == 101 and len(set(seen)) == 101 and seen[-1] == "after"
    back: list[str] = []
    page = client.get("/jp/v1/jobs/j1/logs", params={"limit": 9}).json()
    while page["lines"]:
        back = msgs(page) + back
        page = client.get("/jp/v1/jobs/j1/logs", params={"before": page["first_cursor"], "limit": 9}).json()
    assert back == seen


def test_filters_by_worker_and_level(client):
    ingest_log(client, "w0", ["w0 info"])
    ingest_log(client, "w1", ["w1 info"], start_seq=0)
    ingest_log(client, "w1", ["w1 error"], level="error", start_seq=1)
    assert msgs(client.get("/jp/v1/jobs/j1/logs", params={"worker": "w1"}).json()) == ["w1 info", "w1 error"]
    assert msgs(client.get("/jp/v1/jobs/j1/logs", params={"level": "error"}).json()) == ["w1 error"]
    assert msgs(client.get("/jp/v1/jobs/j1/logs", params={"worker": "w0,w1", "level": "info"}).json()) == [
        "w0 info",
        "w1 info",
    ]
    bad = client.get("/jp/v1/jobs/j1/logs", params={"level": "loud"})
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "level"


def test_search_across_workers_is_case_insensitive_and_literal(client):
    ingest_log(client, "w0", ["CUDA out of memory", "all good", "50% done"])
    ingest_log(client, "w1", ["cuda error: device-side assert", "100_000 steps"])
    assert msgs(client.get("/jp/v1/jobs/j1/logs", params={"q": "cuda"}).json()) == [
        "CUDA out of memory",
        "cuda error: device-side assert",
    ]
    assert msgs(client.get("/jp/v1/jobs/j1/logs", params={"q": "50%"}).json()) == ["50% done"]
    assert msgs(client.get("/jp/v1/jobs/j1/logs", params={"q": "0_0"}).json()) == ["100_000 steps"]
    assert client.get("/jp/v1/jobs/j1/logs/count", params={"q": "cuda"}).json()["lines"] == 2


def test_since_and_until_select_a_time_window(client):
    ingest_log(client, "w0", ["early", "middle", "late"], ts=[NOW_MS, NOW_MS + 1000, NOW_MS + 2000])
    page = client.get("/jp/v1/jobs/j1/logs", params={"since": NOW_MS + 500, "until": NOW_MS + 1500}).json()
    assert msgs(page) == ["middle"]
    bad = client.get("/jp/v1/jobs/j1/logs", params={"since": "yesterday"})
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "since"


def test_download_streams_text_and_json_lines(client):
    ingest_log(client, "w0", ["one", "two"])
    text = client.get("/jp/v1/jobs/j1/logs/download").text.splitlines()
    assert len(text) == 2 and text[0].endswith(" w0 INFO one")
    rows = [
        orjson.loads(line)
        for line in client.get("/jp/v1/jobs/j1/logs/download", params={"format": "jsonl"}).content.splitlines()
    ]
    assert [r["msg"] for r in rows] == ["one", "two"] and rows[0]["worker"] == "w0"
    assert client.get("/jp/v1/jobs/j1/logs/download", params={"format": "xml"}).status_code == 400


def test_worker_sizes_count_bytes_of_lines(client):
    ingest_log(client, "w0", ["héllo", "ab"])
    assert client.get("/jp/v1/jobs/j1/logs/workers").json()["workers"] == [
        {"worker": "w0", "lines": 2, "bytes": 6 + 1 + 2 + 1}
    ]


def test_tail_bytes_cuts_at_a_line_boundary(store, client):
    ingest_log(client, "w0", ["aaaa", "bbbb", "cccc"])
    assert store.logs.tail_bytes("j1", "w0", 9) == ("bbbb\ncccc", 15)
    assert store.logs.tail_bytes("j1", "w0", 8) == ("cccc", 15)
    assert store.logs.tail_bytes("j1", "w0", 100) == ("aaaa\nbbbb\ncccc", 15)


def test_a_cursor_of_another_kind_is_refused(client):
    ingest_log(client, "w0", ["x"])
    jobs_cursor = client.app.state.ctx.signer.sign("jobs", {"c": 1, "j": "x"})
    answer = client.get("/jp/v1/jobs/j1/logs", params={"after": jobs_cursor})
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "after"
