"""``jobpulse logs`` against a real server: tail, filters, paging, JSON lines and live follow."""

from __future__ import annotations

import time

import orjson
import pytest

from jobpulse.cli import logs as logs_module
from jobpulse.client import Client
from jobpulse.credentials import Credentials

pytestmark = pytest.mark.e2e


def _api(server) -> Client:  # noqa: ANN001
    return Client(Credentials(server.url, server.api_key))


def _send_lines(server, job: str, worker: str, lines: list[tuple[int, str, str]], first_seq: int = 1) -> None:  # noqa: ANN001
    """Send (ts, level, msg) lines of ``worker`` to ``job`` of project 'cli-logs'."""
    body = {
        "project": "cli-logs",
        "job": job,
        "series": [
            {
                "kind": "log",
                "worker": worker,
                "seq": list(range(first_seq, first_seq + len(lines))),
                "ts": [t for t, _, _ in lines],
                "level": [lvl for _, lvl, _ in lines],
                "msg": [m for _, _, m in lines],
            }
        ],
    }
    assert _api(server).ingest(body)["accepted"] == len(lines)


def _messages(out: str) -> list[str]:
    # a line reads: date time worker LEVEL message
    return [line.split(None, 4)[4] for line in out.splitlines()]


def test_tail_prints_the_last_lines_in_order_with_time_worker_and_level(jobpulse, demo):
    result = jobpulse("logs", demo, "--tail", "3", "--worker", "worker-2")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert len(lines) == 3
    day, clock, worker, level, msg = lines[-1].split(None, 4)
    assert (worker, level) == ("worker-2", "ERROR") and msg.startswith("RuntimeError: DataLoader worker")
    assert len(day) == 10 and len(clock) == 12  # 2024-05-01 08:55:03.123


def test_level_and_worker_filters_give_the_failing_workers_traceback(jobpulse, demo):
    result = jobpulse("logs", demo, "--level", "error", "--worker", "worker-2")
    messages = _messages(result.out)
    assert messages[0] == "Traceback (most recent call last):"
    assert messages[-1].startswith("RuntimeError:") and len(messages) == 8


def test_grep_finds_text_without_regard_to_case(jobpulse, demo):
    messages = _messages(jobpulse("logs", demo, "--grep", "nccl_ib_timeout").out)
    assert len(messages) == 4 and all("NCCL_IB_TIMEOUT" in m for m in messages)


def test_since_leaves_out_older_lines(jobpulse, server):
    now = int(time.time() * 1000)
    _send_lines(server, "cli-since", "w0", [(now - 3_600_000, "info", "an hour ago"), (now - 60_000, "info", "recent")])
    assert _messages(jobpulse("logs", "cli-since", "--since", "10m").out) == ["recent"]
    assert _messages(jobpulse("logs", "cli-since", "--since", str(now - 7_200_000)).out) == ["an hour ago", "recent"]


def test_the_whole_log_is_read_page_by_page(jobpulse, server, monkeypatch):
    now = int(time.time() * 1000)
    _send_lines(server, "cli-pages", "w0", [(now + i, "info", f"line {i}") for i in range(25)])
    monkeypatch.setattr(logs_module, "PAGE", 10)
    assert _messages(jobpulse("logs", "cli-pages").out) == [f"line {i}" for i in range(25)]


def test_json_prints_one_object_per_line(jobpulse, demo):
    lines = [orjson.loads(line) for line in jobpulse("logs", demo, "--tail", "2", "--json").out.splitlines()]
    assert len(lines) == 2 and set(lines[0]) == {"ts", "worker", "seq", "level", "msg"}


def test_a_bad_since_is_refused_naming_the_option(jobpulse, demo):
    result = jobpulse("logs", demo, "--since", "yesterday")
    assert result.code == 2 and "--since must be a duration" in result.err


def test_follow_prints_new_lines_and_ends_with_the_job(server, jobpulse_process):
    now = int(time.time() * 1000)
    api = _api(server)
    api.request("POST", "/jp/v1/jobs", json={"project": "cli-logs", "job": "cli-follow"})
    api.request("PUT", "/jp/v1/jobs/cli-follow/workers/w0", json={"status": "running"})
    _send_lines(server, "cli-follow", "w0", [(now, "info", "before")])
    proc = jobpulse_process("logs", "cli-follow", "--follow")
    assert proc.stdout.readline().rstrip().endswith("INFO     before")
    _send_lines(server, "cli-follow", "w0", [(now + 1, "warning", "while following")], first_seq=2)
    assert proc.stdout.readline().rstrip().endswith("WARNING  while following")
    api.request("PUT", "/jp/v1/jobs/cli-follow/workers/w0", json={"status": "completed"})
    _send_lines(server, "cli-follow", "w0", [(now + 2, "info", "last words")], first_seq=3)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.rstrip().endswith("INFO     last words")


def test_follow_of_a_job_without_lines_yet_prints_the_first_ones(server, jobpulse_process):
    api = _api(server)
    api.request("POST", "/jp/v1/jobs", json={"project": "cli-logs", "job": "cli-follow-empty"})
    api.request("PUT", "/jp/v1/jobs/cli-follow-empty/workers/w0", json={"status": "running"})
    proc = jobpulse_process("logs", "cli-follow-empty", "-f", "--json")
    now = int(time.time() * 1000)
    _send_lines(server, "cli-follow-empty", "w0", [(now, "info", "first"), (now + 1, "error", "second")])
    assert [orjson.loads(proc.stdout.readline())["msg"] for _ in range(2)] == ["first", "second"]
    api.request("PUT", "/jp/v1/jobs/cli-follow-empty/workers/w0", json={"status": "failed"})
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out) == (0, ""), err
