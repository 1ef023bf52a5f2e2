"""The background thread that delivers what the caller queued.

Every ``flush_interval`` seconds, or sooner when the queue holds ``batch_records``
records or a flush is asked for, the thread drains the queue into batches, encodes them
(scalars as an Arrow stream where pyarrow can be imported, else columnar JSON with zstd)
and sends them. Prepared requests (job and worker registration and
status) are sent in queue order between batches.

Batch size adapts to the queue: a batch is sent once it holds ``batch_points`` points and
nothing more waits in the queue; while records wait, a fresh batch grows up to
``max_batch_points`` (see ``jobpulse.sdk.batchsize``). While the queue holds
``batch_records`` records or more, the thread drains it again at once instead of sleeping.

Pipelining: a batch's request is written, and its answer read only when the next
request is ready to go (or the queue is drained), so the next batch is encoded while
the server stores this one. At most one request is on the wire, and the next is begun
only after the answer to the one before it: requests reach the server in queue order,
and a request whose answer says "keep" is in the spool before anything that follows it.

Delivery: one attempt per request (its timeout is ``request_timeout`` per ``batch_points``
events, so a large batch gets longer). When it fails, or the server refuses the data, the
request is written to the spool and the server is taken as down for a backoff; what each
answer leads to (413 halving, dropping, backoff) is in ``jobpulse.sdk.answers``. While the
server is down or the spool still holds requests of this worker, new requests go to the
spool too, so the order is kept; after the backoff the spool is replayed oldest first.

A request's body is encoded once: a replay sends the same bytes, so every event keeps
its ``ts`` and ``seq`` and the server's idempotent keys make a resend harmless.

After the caller's own backlog, spool directories that dead processes left behind
(any job, same server URL) are replayed, each under its owner lock.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import zstandard

from jobpulse.sdk import spool as sp
from jobpulse.sdk.answers import AnswerHandling
from jobpulse.sdk.arrow import ArrowScalars
from jobpulse.sdk.arrow import load as load_arrow
from jobpulse.sdk.batchsize import BatchSizing
from jobpulse.sdk.media import encode_image, image_upload
from jobpulse.sdk.problems import Problems
from jobpulse.sdk.replay import replay_backlog, replay_orphans
from jobpulse.sdk.transport import Pending, Transport, quote
from jobpulse.sdk.values import check_iter
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
)


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
    max_batch_points: int = 200_000  # while the queue is deep (see the module docstring)
    max_batch_bytes: int = 16_000_000
    request_timeout: float = 10.0
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    replay_orphans: bool = True
    arrow: bool = True  # scalars as an Arrow stream where pyarrow can be imported (jobpulse.sdk.arrow)


@dataclass
class Delivery:
    """What became of the run's data when the sender stopped."""

    sent_events: int
    spooled_requests: int
    spooled_events: int
    dropped_events: int
    spool_dir: Path
    last_error: str


class Sender(BatchSizing, AnswerHandling):
    """The background sender thread, and the caller's handle on it (see the module docstring)."""

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
        self._pending: Pending | None = None  # begun, answer not read yet (sender thread only)
        self._max_points = cfg.max_batch_points  # lowered when the server refuses a size (413)
        self._iters: dict[tuple[str, str], int] = {}  # (metric, variant) -> highest iteration stored or sent
        self._stored_known = False  # whether _iters covers what was stored before this run
        self._next_lookup = 0.0
        self.orphans: list[Path] = []
        self._compress = zstandard.ZstdCompressor(level=3).compress
        self._arrow: ArrowScalars | None = None  # loaded by the thread as it starts, where cfg.arrow
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
        return bool(self.q or self.backlog or self.orphans or self._pending)

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
        try:
            self._settle()
        except Exception as exc:
            self.problems("sender-error", f"internal error in the sender thread: {exc!r}")

    def _startup(self) -> None:
        if self.cfg.arrow:
            self._arrow = load_arrow()
        self.spool.claim()
        for path in self.spool.files():
            header = sp.read_header(path)
            if header is not None and header.get("url") == self.url:
                self.backlog.append(path)
        if self.cfg.replay_orphans:
            self.orphans = list(sp.orphan_dirs(self.spool.root, skip=self.spool.dir))

    def _deep(self) -> bool:
        """Whether the caller reports faster than the sender drains: the queue holds a batch's worth."""
        return len(self.q) >= self.cfg.batch_records and not self._stop

    def _sleep_time(self) -> float:
        if self._deep():
            return 0.0
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
        if self._deep() and not (self.backlog or self.orphans):
            return  # straight on to the next drain, the last request still on the wire
        self._settle()
        if time.monotonic() >= self._down_until and not self.spool_only:
            if self.backlog:
                replay_backlog(self, 0.5)
            elif self.orphans:
                replay_orphans(self, 0.5)

    # -- draining -------------------------------------------------------------------------

    def _drain(self, limit: int, compress) -> None:
        batch = self._new_batch()
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
                    self._deliver(rec[1])
                    batch = self._new_batch()  # after the answer: a job registration may tell what is stored
                elif tag == MARK:
                    self._ship(batch, compress)
                    batch = self._new_batch()
                    self._settle()
                    rec[1].set()
            except Exception as exc:  # one bad record must not cost the others
                self.problems("record-error", f"a record could not be encoded ({exc!r}); dropped")
            if self._full(batch):
                self._ship(batch, compress)
                if q and batch.scalars and not self._stored_known and time.monotonic() >= self._next_lookup:
                    self._look_up_stored()  # records wait: the next batch could grow if it is fresh
                batch = self._new_batch()
        self._ship(batch, compress)

    def _ship(self, batch: Batch, compress) -> None:
        if batch:
            requests = batch.requests(compress, self._arrow)
            batch.advance(self._iters)
            for request in requests:
                self._deliver(request, wait=False)

    def _image(self, batch: Batch, rec: tuple) -> None:
        _, ts_ns, metric, variant, it, key, source = rec
        try:
            step = check_iter(it)
            data, ext = encode_image(source)
        except Exception as exc:
            self.problems("bad-image", f"image {metric}/{variant} could not be read ({exc!r}); dropped")
            return
        key = key or f"{metric}/{variant}/{step}"
        upload = image_upload(f"/jp/v1/jobs/{quote(self.cfg.job)}", metric, variant, step, key, data, ext)
        answer_url = self._deliver(upload)
        url = answer_url if isinstance(answer_url, str) else upload.path
        event = {"kind": "image", "metric": metric, "variant": variant, "iter": step, "key": key}
        event.update(url=url, ts=ts_ns // 1_000_000)
        batch.add_event(event)

    # -- delivery -------------------------------------------------------------------------

    def _timeout(self, request: Request) -> float:
        """``request_timeout`` per ``batch_points`` events (a large batch gets longer), within the deadline."""
        timeout = self.cfg.request_timeout * max(1.0, request.events / max(1, self.cfg.batch_points))
        if self._deadline is None:
            return timeout
        return max(0.05, min(timeout, self._deadline - time.monotonic()))

    def _deliver(self, request: Request, wait: bool = True) -> bool | str:
        """Send now if the line is clear, else spool. A file upload returns its URL when sent.

        With ``wait=False`` the answer is read later, by ``_settle``: before the next request
        is sent or spooled, before a mark is set, and when the queue is drained.
        """
        self._settle()
        if self.spool_only or self.backlog or time.monotonic() < self._down_until:
            self._put(request)
            return False
        self._inflight = request
        if not wait:
            self._pending = self.transport.begin(request, self._timeout(request))
            return True
        try:
            result = self.send(request)
        finally:
            self._inflight = None
        if result is None:
            self._put(request)
            return False
        return result

    def _settle(self) -> None:
        """Read the answer to the request begun last, if any (spooling it when it must be kept)."""
        pending = self._pending
        if pending is None or (self._thread.is_alive() and threading.current_thread() is not self._thread):
            return  # close() spooling from the caller's thread: the live sender thread owns the connection
        self._pending = None
        try:
            result = self._answered(pending.request, self.transport.complete(pending))
        finally:
            self._inflight = None
        if result is None:
            self._put(pending.request)

    def _put(self, request: Request) -> None:
        try:
            self.backlog.append(self.spool.put(request, self.url))
        except OSError as exc:
            self.dropped_events += request.events
            self.problems("spool-error", f"could not write the spool {self.spool.dir} ({exc}); data lost")
