"""The background thread that delivers what the caller queued.

Every ``flush_interval`` seconds, or sooner when the queue holds ``batch_records``
records or a flush is asked for, the thread drains the queue into batches (bounded in
points and bytes), encodes them (columnar JSON, zstd) and sends them. Prepared requests
(job and worker registration and status) are sent in queue order between batches.

Delivery: one attempt per request. When it fails (no connection, timeout, 408/429/5xx)
the request is written to the spool and the server is taken as down for a backoff
(exponential, ``backoff_base`` doubling up to ``backoff_cap``, with jitter: a random
50-100 % of it). While the server is down or the spool still holds requests of this
worker, new requests go to the spool too, so the order is kept; after the backoff the
spool is replayed oldest first. 401/403/404 keep the data in the spool too (a key or
scope problem); other 4xx answers drop the request, reported once.

A request's body is encoded once: a replay sends the same bytes, so every event keeps
its ``ts`` and ``seq`` and the server's idempotent keys make a resend harmless.

After the caller's own backlog, spool directories that dead processes left behind
(any job, same server URL) are replayed, each under its owner lock.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import orjson
import zstandard

from jobpulse.sdk import spool as sp
from jobpulse.sdk.media import encode_image, file_name
from jobpulse.sdk.problems import Problems
from jobpulse.sdk.replay import replay_backlog, replay_orphans
from jobpulse.sdk.transport import DROP, KEEP, OK, Transport, quote
from jobpulse.sdk.wire import (
    IMAGE,
    LINE,
    LOG_DICT,
    MARK,
    PLOT,
    REQUEST,
    SCALAR,
    VECTOR,
    Batch,
    Request,
    check_iter,
)

_MIME = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
}


@dataclass
class SenderConfig:
    url: str
    api_key: str | None
    project: str
    job: str
    worker: str
    spool_root: Path
    spool_max_bytes: int = 1 << 30
    flush_interval: float = 1.0
    batch_records: int = 5_000
    batch_points: int = 20_000
    batch_bytes: int = 2_000_000
    request_timeout: float = 10.0
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    replay_orphans: bool = True


@dataclass
class Delivery:
    """What became of the run's data when the sender stopped."""

    sent_events: int
    spooled_requests: int
    spooled_events: int
    dropped_events: int
    spool_dir: Path
    last_error: str


class Sender:
    def __init__(self, cfg: SenderConfig, queue: deque, problems: Problems) -> None:
        self.cfg = cfg
        self.q = queue
        self.problems = problems
        self.url = cfg.url.rstrip("/")
        self.transport = Transport(self.url, cfg.api_key, cfg.request_timeout)
        self.spool = sp.Spool(cfg.spool_root, cfg.job, cfg.worker, cfg.spool_max_bytes, problems)
        self.sent_events = 0
        self.dropped_events = 0
        self.last_error = ""
        self._wake = threading.Event()
        self._flush_now = False
        self._stop = False
        self.spool_only = False
        self._deadline: float | None = None
        self._failures = 0
        self._down_until = 0.0
        self._next_flush = 0.0
        self.backlog: deque[Path] = deque()
        self._inflight: Request | None = None
        self.orphans: list[Path] = []
        self._compress = zstandard.ZstdCompressor(level=3).compress
        self._thread = threading.Thread(target=self._run, name="jobpulse-sender", daemon=True)

    # -- caller side ----------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def flush(self) -> None:
        self._flush_now = True
        self._wake.set()

    def alive(self) -> bool:
        return self._thread.is_alive()

    def busy(self) -> bool:
        """Whether anything of this run, or a replayable left-over, still waits."""
        return bool(self.q or self.backlog or self.orphans)

    def close(self, timeout: float) -> Delivery:
        """Send what is queued, waiting at most ``timeout`` s; spool whatever is left."""
        deadline = time.monotonic() + max(0.0, timeout)
        self._deadline = deadline
        mark = threading.Event()
        self.q.append((MARK, mark))
        self.flush()
        marked = self.alive() and mark.wait(max(0.0, deadline - time.monotonic()))
        while marked and self.alive() and (self.backlog or self.orphans):
            if time.monotonic() >= deadline:
                break
            self._wake.set()
            time.sleep(0.01)
        self.spool_only = True
        self._stop = True
        self._wake.set()
        if not marked:
            # the thread is stuck (a slow request) or gone: spool what it has not taken
            self._drain(len(self.q), zstandard.ZstdCompressor(level=3).compress)
            inflight = self._inflight
            if inflight is not None:
                self._put(inflight)  # a copy; resending it is harmless
        self._thread.join(max(0.05, min(1.0, deadline - time.monotonic())))
        count = events = 0
        for path in list(self.backlog):
            header = sp.read_header(path)
            if header is not None:
                count += 1
                events += int(header.get("events", 0))
        if not self._thread.is_alive():
            self.transport.close()
            self.spool.release()
        return Delivery(self.sent_events, count, events, self.dropped_events, self.spool.dir, self.last_error)

    # -- the thread -----------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._startup()
        except Exception as exc:  # never die
            self.problems("sender-error", f"could not open the spool: {exc!r}")
        while True:
            self._wake.wait(self._sleep_time())
            self._wake.clear()
            try:
                self._cycle()
            except Exception as exc:
                self.problems("sender-error", f"internal error in the sender thread: {exc!r}")
            if self._stop:
                break

    def _startup(self) -> None:
        self.spool.claim()
        for path in self.spool.files():
            header = sp.read_header(path)
            if header is not None and header.get("url") == self.url:
                self.backlog.append(path)
        if self.cfg.replay_orphans:
            self.orphans = list(sp.orphan_dirs(self.spool.root, skip=self.spool.dir))

    def _sleep_time(self) -> float:
        now = time.monotonic()
        wait = min(0.25, max(0.0, self._next_flush - now))
        if (self.backlog or self.orphans) and self._down_until > now:
            wait = min(wait, self._down_until - now)
        elif self.backlog or self.orphans:
            wait = 0.0
        return max(0.005, wait)

    def _cycle(self) -> None:
        now = time.monotonic()
        if self._flush_now or now >= self._next_flush or len(self.q) >= self.cfg.batch_records:
            self._flush_now = False
            self._drain(len(self.q), self._compress)
            self._next_flush = time.monotonic() + self.cfg.flush_interval
        if time.monotonic() >= self._down_until and not self.spool_only:
            if self.backlog:
                replay_backlog(self, 0.5)
            elif self.orphans:
                replay_orphans(self, 0.5)

    # -- draining -------------------------------------------------------------------------

    def _new_batch(self) -> Batch:
        return Batch(self.cfg.project, self.cfg.job, self.cfg.worker, self.problems)

    def _drain(self, limit: int, compress) -> None:
        batch = self._new_batch()
        cfg = self.cfg
        q = self.q
        for _ in range(limit):
            try:
                rec = q.popleft()
            except IndexError:
                break
            tag = rec[0]
            try:
                if tag == LOG_DICT:
                    batch.add_dict(rec[1], rec[2], rec[3])
                elif tag == LINE:
                    batch.add_line(rec[1], rec[2], rec[3], rec[4])
                elif tag == SCALAR:
                    batch.add_scalar(*rec[1:])
                elif tag == VECTOR:
                    batch.add_vector(*rec[1:])
                elif tag == PLOT:
                    batch.add_plot(*rec[1:])
                elif tag == IMAGE:
                    self._image(batch, rec)
                elif tag == REQUEST:
                    self._ship(batch, compress)
                    batch = self._new_batch()
                    self._deliver(rec[1])
                elif tag == MARK:
                    self._ship(batch, compress)
                    batch = self._new_batch()
                    rec[1].set()
            except Exception as exc:  # one bad record must not cost the others
                self.problems("record-error", f"a record could not be encoded ({exc!r}); dropped")
            if batch.points >= cfg.batch_points or batch.size >= cfg.batch_bytes:
                self._ship(batch, compress)
                batch = self._new_batch()
        self._ship(batch, compress)

    def _ship(self, batch: Batch, compress) -> None:
        if batch:
            for request in batch.requests(compress):
                self._deliver(request)

    def _image(self, batch: Batch, rec: tuple) -> None:
        _, ts_ns, metric, variant, it, key, source = rec
        try:
            step = check_iter(it)
            data, ext = encode_image(source)
        except Exception as exc:
            self.problems("bad-image", f"image {metric}/{variant} could not be read ({exc!r}); dropped")
            return
        key = key or f"{metric}/{variant}/{step}"
        path = f"/jp/v1/jobs/{quote(self.cfg.job)}/files/{quote(file_name(metric, variant, step, key, ext))}"
        upload = Request("PUT", path, data, _MIME.get(ext, "application/octet-stream"), kind="file")
        answer_url = self._deliver(upload)
        url = answer_url if isinstance(answer_url, str) else path
        event = {"kind": "image", "metric": metric, "variant": variant, "iter": step, "key": key}
        event.update(url=url, ts=ts_ns // 1_000_000)
        batch.add_event(event)

    # -- delivery -------------------------------------------------------------------------

    def _timeout(self) -> float:
        if self._deadline is None:
            return self.cfg.request_timeout
        return max(0.05, min(self.cfg.request_timeout, self._deadline - time.monotonic()))

    def _deliver(self, request: Request) -> bool | str:
        """Send now if the line is clear, else spool. A file upload returns its URL when sent."""
        if self.spool_only or self.backlog or time.monotonic() < self._down_until:
            self._put(request)
            return False
        self._inflight = request
        try:
            result = self.send(request)
        finally:
            self._inflight = None
        if result is None:
            self._put(request)
            return False
        return result

    def _put(self, request: Request) -> None:
        try:
            self.backlog.append(self.spool.put(request, self.url))
        except OSError as exc:
            self.dropped_events += request.events
            self.problems("spool-error", f"could not write the spool {self.spool.dir} ({exc}); data lost")

    def send(self, request: Request) -> bool | str | None:
        """True/URL when done with (sent, or dropped as bad), None when it must be kept."""
        answer = self.transport.send(request, self._timeout())
        if answer.outcome == OK:
            self._failures = 0
            self.sent_events += request.events
            return self._accepted(request, answer.body)
        self.last_error = answer.detail
        if answer.outcome == DROP:
            self.dropped_events += request.events
            self.problems(
                f"rejected-{answer.status}",
                f"the server rejected a {request.kind} request ({answer.detail}); "
                f"{request.events} event(s) dropped",
            )
            return True
        self._failures += 1
        cap = self.cfg.backoff_cap
        delay = min(cap, self.cfg.backoff_base * 2 ** min(self._failures - 1, 30))
        self._down_until = time.monotonic() + delay * random.uniform(0.5, 1.0)
        if answer.outcome == KEEP:
            self.problems(
                "refused",
                f"the server at {self.url} refused the data ({answer.detail}); "
                f"keeping it in {self.spool.dir}",
            )
        else:
            self.problems(
                "unreachable",
                f"cannot reach {self.url} ({answer.detail}); spooling to {self.spool.dir} and retrying",
            )
        return None

    def _accepted(self, request: Request, body: bytes) -> bool | str:
        if request.kind not in ("ingest", "file") or not body:
            return True
        try:
            answer = orjson.loads(body)
        except orjson.JSONDecodeError:
            return True
        if not isinstance(answer, dict):
            return True
        if request.kind == "file":
            return answer.get("url") or True
        rejected = answer.get("rejected") or 0
        if rejected:
            self.dropped_events += rejected
            self.sent_events -= rejected
            examples = answer.get("examples") or [{}]
            for reason, count in (answer.get("errors") or {}).items():
                detail = next((e.get("detail", "") for e in examples if e.get("reason") == reason), "")
                self.problems(
                    f"rejected-{reason}", f"the server rejected {count} event(s): {reason} {detail}".strip()
                )
        return True
