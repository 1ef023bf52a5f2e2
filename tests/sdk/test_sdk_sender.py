"""The sender's batching and pipelining, against a fake transport (no server, no thread)."""

from __future__ import annotations

import threading
from collections import deque

import orjson
import zstandard

from jobpulse.sdk import spool as sp
from jobpulse.sdk.sender import Sender, SenderConfig
from jobpulse.sdk.transport import DROP, OK, RETRY, Answer, Pending
from jobpulse.sdk.wire import LOG_DICT, MARK, REQUEST, Request

TS = 1_700_000_000_000_000_000
KEYS = [f"m{i}" for i in range(10)]


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, kind, message):
        self.calls.append((kind, message))


class FakeTransport:
    """Answers requests with ``answer(request)``; logs what happens, in order."""

    def __init__(self, log: list, answer=None):
        self.log = log
        self.answer = answer or (lambda request: Answer(OK, 200, b'{"accepted": 1}'))
        self.open: Pending | None = None

    def begin(self, request, timeout=None):
        assert self.open is None, "a request was begun before the answer to the one before it was read"
        self.log.append(("begin", request.events) if request.kind == "ingest" else (request.method, request.path))
        self.open = Pending(request, {}, 1.0)
        return self.open

    def complete(self, pending):
        assert pending is self.open
        self.open = None
        if pending.request.kind == "ingest":
            self.log.append(("complete", pending.request.events))
        return self.answer(pending.request)

    def send(self, request, timeout=None):
        return self.complete(self.begin(request, timeout))

    def close(self):
        pass


def make_sender(tmp_path, log, answer=None, known=True, **cfg):
    config = SenderConfig(
        url="http://jobpulse.invalid:1",
        api_key=None,
        project="p",
        job="j",
        worker="w",
        spool_root=tmp_path / "spool",
        **cfg,
    )
    sender = Sender(config, deque(), Recorder())
    sender.transport = FakeTransport(log, answer)
    sender._stored_known = known  # as if the job registration said this run created the job
    return sender


def log_records(q, steps, first=0, value=0.0):
    for step in range(first, first + steps):
        q.append((LOG_DICT, TS + step * 1_000_000, step, {k: value + step for k in KEYS}))


def spy_compress(log):
    compress = zstandard.ZstdCompressor(level=1).compress

    def encode(data: bytes) -> bytes:
        log.append(("encode", 0))
        return compress(data)

    return encode


def points(request) -> list[tuple[str, int, float]]:
    body = request.body
    if request.encoding == "zstd":
        body = zstandard.ZstdDecompressor().decompressobj().decompress(body)
    doc = orjson.loads(body)
    return [(s["metric"], i, v) for s in doc["series"] for i, v in zip(s["iter"], s["value"], strict=True)]


def test_the_next_batch_is_encoded_while_the_one_before_is_on_the_wire(tmp_path):
    log = []
    sender = make_sender(tmp_path, log, batch_points=100, max_batch_points=100)
    log_records(sender.q, 30)  # three batches of 10 steps x 10 metrics
    sender._drain(len(sender.q), spy_compress(log))
    sender._settle()
    assert log == [
        ("encode", 0),
        ("begin", 100),
        ("encode", 0),  # the second batch, while the first is on the wire
        ("complete", 100),
        ("begin", 100),
        ("encode", 0),
        ("complete", 100),
        ("begin", 100),
        ("complete", 100),
    ]
    assert sender.sent_events == 300 and not sender.backlog


def test_batches_grow_while_records_wait_and_stay_small_otherwise(tmp_path):
    log = []
    sender = make_sender(tmp_path, log, batch_points=100, max_batch_points=1000)
    log_records(sender.q, 250)  # 2,500 points waiting
    sender._drain(len(sender.q), None)
    sender._settle()
    assert [n for what, n in log if what == "begin"] == [1000, 1000, 500]
    log.clear()
    log_records(sender.q, 15, first=250)
    sender._drain(12, None)  # what was there when the drain began; 3 records came later
    sender._settle()
    assert [n for what, n in log if what == "begin"] == [120]


def test_a_request_that_fails_on_the_wire_is_spooled_before_the_next_one(tmp_path):
    log = []
    answers = iter([Answer(RETRY, 0, b"", "ConnectionRefusedError")])
    sender = make_sender(
        tmp_path, log, lambda request: next(answers, Answer(OK, 200, b"{}")), batch_points=100, max_batch_points=100
    )
    log_records(sender.q, 30)
    sender._drain(len(sender.q), None)
    sender._settle()
    # the first failed after the second was encoded: the second goes to the spool behind it, unsent
    assert log == [("begin", 100), ("complete", 100)]
    assert sender.sent_events == 0 and len(sender.backlog) == 3
    firsts, spooled = [], []
    for path in sp.spool_files(sender.spool.dir):
        entry = sp.take(path)
        got = points(entry.request)
        firsts.append(min(i for _, i, _ in got))
        spooled.extend(got)
        sp.put_back(entry)
    assert firsts == [0, 10, 20]  # in the order they were made
    assert sorted(spooled) == sorted((k, step, float(step)) for step in range(30) for k in KEYS)


def test_a_mark_is_set_only_once_the_last_request_is_answered(tmp_path):
    log = []
    mark = threading.Event()

    def answer(request):
        assert not mark.is_set()
        return Answer(OK, 200, b"{}")

    sender = make_sender(tmp_path, log, answer, batch_points=100)
    log_records(sender.q, 5)
    sender.q.append((MARK, mark))
    sender._drain(len(sender.q), None)
    assert mark.is_set() and log == [("begin", 50), ("complete", 50)] and sender._pending is None


def test_a_prepared_request_waits_for_the_batch_before_it(tmp_path):
    log = []
    sender = make_sender(tmp_path, log, batch_points=100)
    log_records(sender.q, 5)
    sender.q.append((REQUEST, Request("PUT", "/jp/v1/jobs/j/workers/w", b"{}", kind="worker")))
    sender._drain(len(sender.q), None)
    assert log == [("begin", 50), ("complete", 50), ("PUT", "/jp/v1/jobs/j/workers/w")]


def test_a_request_too_large_for_the_server_is_sent_in_parts(tmp_path):
    log = []
    delivered = []

    def answer(request):
        if request.events > 300:
            return Answer(DROP, 413, b'{"error": {"code": "payload_too_large"}}', "HTTP 413")
        delivered.extend(points(request))
        return Answer(OK, 200, b"{}")

    sender = make_sender(tmp_path, log, answer, batch_points=100, max_batch_points=1000)
    log_records(sender.q, 200)
    sender._drain(len(sender.q), spy_compress([]))
    sender._settle()
    # every point exactly once
    assert sorted(delivered) == sorted((k, step, float(step)) for step in range(200) for k in KEYS)
    assert sender.sent_events == 2000 and sender.dropped_events == 0 and not sender.backlog
    assert sender._max_points == 250  # later batches stay below what the server refused
    assert {kind for kind, _ in sender.problems.calls} == {"split"}
    log.clear()
    log_records(sender.q, 60, first=200)
    sender._drain(len(sender.q), None)
    sender._settle()
    assert [n for what, n in log if what == "begin"] == [250, 250, 100]


def test_a_part_that_cannot_be_sent_keeps_the_whole_request(tmp_path):
    log = []
    calls = []

    def answer(request):
        calls.append(request.events)
        if request.events > 300:
            return Answer(DROP, 413, b"", "HTTP 413")
        if len(calls) == 3:  # the second half
            return Answer(RETRY, 0, b"", "timed out")
        return Answer(OK, 200, b"{}")

    sender = make_sender(tmp_path, log, answer, batch_points=100, max_batch_points=1000)
    log_records(sender.q, 50)
    sender._drain(len(sender.q), None)
    sender._settle()
    assert calls == [500, 250, 250]
    assert sender.sent_events == 0 and len(sender.backlog) == 1
    (path,) = sp.spool_files(sender.spool.dir)
    entry = sp.take(path)
    assert entry.request.events == 500
    sp.put_back(entry)


def test_a_batch_that_may_replace_stored_points_keeps_its_normal_size(tmp_path):
    log = []
    sender = make_sender(tmp_path, log, batch_points=100, max_batch_points=1000)
    log_records(sender.q, 250)
    log_records(sender.q, 250, value=0.5)  # the same steps again: replaces what the first round sent
    log_records(sender.q, 100, first=250)  # above everything sent: fresh again
    sender._drain(len(sender.q), None)
    sender._settle()
    # a batch is sent at its normal size once it holds a point that may replace a stored one
    assert [n for what, n in log if what == "begin"] == [1000, 1000, 510] + [100] * 25 + [990]


def test_what_is_stored_is_learned_from_the_job_registration_or_asked_for(tmp_path):
    created = b'{"job": {"job": "j"}, "created": true}'
    log = []

    def answer(request):
        if request.method == "GET":
            rows = [{"metric": k, "variant": k, "iter": 99, "value": 1.0} for k in KEYS]
            return Answer(OK, 200, orjson.dumps({"jobs": {"j": rows}}))
        return Answer(OK, 201, created) if request.kind == "job" else Answer(OK, 200, b"{}")

    # this run created the job: nothing was stored before it, no question asked
    sender = make_sender(tmp_path / "a", log, answer, known=False, batch_points=100, max_batch_points=1000)
    sender.q.append((REQUEST, Request("POST", "/jp/v1/jobs", b"{}", kind="job")))
    log_records(sender.q, 250)
    sender._drain(len(sender.q), None)
    sender._settle()
    assert log == [("POST", "/jp/v1/jobs")] + [("begin", 1000), ("complete", 1000)] * 2 + [
        ("begin", 500),
        ("complete", 500),
    ]
    # the job was there: what it holds is asked for once records wait, and batches above it grow
    log.clear()
    created = b'{"job": {"job": "j"}, "created": false}'
    sender = make_sender(tmp_path / "b", log, answer, known=False, batch_points=100, max_batch_points=1000)
    sender.q.append((REQUEST, Request("POST", "/jp/v1/jobs", b"{}", kind="job")))
    log_records(sender.q, 250)
    sender._drain(len(sender.q), None)
    sender._settle()
    begins = [n for what, n in log if what == "begin"]
    assert ("GET", "/jp/v1/scalars/latest?jobs=j") in log and log.count(("GET", "/jp/v1/scalars/latest?jobs=j")) == 1
    assert begins == [100] * 10 + [1000, 500]  # steps 0-99 replace stored points; 100-249 are fresh
    assert sender._iters[("m0", "m0")] == 249


def test_a_key_that_may_not_read_keeps_batches_at_their_normal_size(tmp_path):
    log = []

    def answer(request):
        if request.method == "GET":
            return Answer("keep", 403, b"{}", "HTTP 403")
        return Answer(OK, 200, b"{}")

    sender = make_sender(tmp_path, log, answer, known=False, batch_points=100, max_batch_points=1000)
    log_records(sender.q, 250)
    sender._drain(len(sender.q), None)
    sender._settle()
    assert [n for what, n in log if what == "begin"] == [100] * 25
    assert log.count(("GET", "/jp/v1/scalars/latest?jobs=j")) == 1


def test_begin_and_complete_reconnect_once_when_the_server_closed_the_kept_alive_connection():
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from jobpulse.sdk.transport import Transport

    seen = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            seen.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")
            self.close_connection = True  # without saying so: the client finds out on its next request

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        transport = Transport(f"http://127.0.0.1:{server.server_address[1]}", "key", timeout=5)
        for body in (b"one", b"two", b"three"):
            pending = transport.begin(Request("POST", "/jp/v1/ingest", body, events=1))
            answer = transport.complete(pending)
            assert (answer.outcome, answer.status) == (OK, 200)
        assert seen == [b"one", b"two", b"three"]
        transport.close()
    finally:
        server.shutdown()
        server.server_close()
