"""The background thread that delivers what the caller queued.

Every ``flush_interval`` seconds, or sooner when the queue holds ``batch_records``
records or a flush is asked for, the thread drains the queue into batches, encodes them
(scalars as an Arrow stream where pyarrow can be imported, else columnar JSON with zstd)
and sends them. Prepared requests (job and worker registration and
status) are sent in queue order between batches.

Batch size adapts to the queue: a batch is sent once it holds ``batch_points`` points
(or ``batch_bytes``) and nothing more waits in the queue; while records wait (the caller
reports faster than the server stores) a fresh batch grows up to ``max_batch_points``
(or ``max_batch_bytes``): fewer, larger requests, each stored by the server with one
insert. Fresh (see ``jobpulse.sdk.wire``): no scalar at or below the highest iteration
of its series already stored or sent. The server replaces stored points at a cost that
grows faster than their number in one request, so a batch that may replace any stays at
``batch_points``. What is stored is known when the job registration answers that this
run created the job (nothing), else asked once from ``/jp/v1/scalars/latest`` when a
batch could grow; until then batches stay at their normal size.

While the queue holds ``batch_records`` records or more, the thread drains it again at
once instead of sleeping. A server that answers 413 (too large) gets the request again
in two halves (halved again if need be), and later batches stay below what it refused.

Pipelining: a batch's request is written, and its answer read only when the next
request is ready to go (or the queue is drained), so the next batch is encoded while
the server stores this one. At most one request is on the wire, and the next is begun
only after the answer to the one before it: requests reach the server in queue order,
and a request whose answer says "keep" is in the spool before anything that follows it.

Delivery: one attempt per request (its timeout is ``request_timeout`` per ``batch_points``
events, so a large batch gets longer). When it fails (no connection, timeout, 408/429/5xx)
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

import contextlib
import random
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import orjson
import zstandard

from jobpulse.sdk import spool as sp
from jobpulse.sdk.arrow import ArrowScalars
from jobpulse.sdk.arrow import load as load_arrow
from jobpulse.sdk.media import encode_image, image_upload
from jobpulse.sdk.problems import Problems
from jobpulse.sdk.replay import replay_backlog, replay_orphans
from jobpulse.sdk.transport import DROP, KEEP, OK, RETRY, Answer, Pending, Transport, quote, refused_events
from jobpulse.sdk.wire import (
    IMAGE,
    ITER_MIN,
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
    split_request,
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

    def _new_batch(self) -> Batch:
        frontier = self._iters if self._stored_known else None
        return Batch(self.cfg.project, self.cfg.job, self.cfg.worker, self.problems, frontier)

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

    def _full(self, batch: Batch) -> bool:
        """Full at ``batch_points``; while more records wait, at ``max_batch_points`` (see the docstring)."""
        cfg = self.cfg
        if batch.points >= self._max_points:
            return True
        if batch.points < cfg.batch_points and batch.size < cfg.batch_bytes:
            return False
        if not batch.fresh:
            return True
        return not self.q or batch.points >= cfg.max_batch_points or batch.size >= cfg.max_batch_bytes

    def _ship(self, batch: Batch, compress) -> None:
        if batch:
            requests = batch.requests(compress, self._arrow)
            batch.advance(self._iters)
            for request in requests:
                self._deliver(request, wait=False)

    def _look_up_stored(self) -> None:
        """Learn the highest stored iteration of each series of the job: what a fresh batch must exceed."""
        self._settle()
        if self.spool_only or self.backlog or time.monotonic() < self._down_until:
            return
        self._next_lookup = time.monotonic() + 30.0
        request = Request("GET", f"/jp/v1/scalars/latest?jobs={quote(self.cfg.job)}", kind="read")
        answer = self.transport.send(request, self._timeout(request))
        found: dict[tuple[str, str], int] = {}
        if answer.status == 200:
            try:
                for row in orjson.loads(answer.body)["jobs"][self.cfg.job]:
                    found[(row["metric"], row["variant"])] = int(row["iter"])
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                return
        elif answer.status != 404:  # 404: no such job yet, nothing stored
            if answer.outcome != RETRY:
                self._next_lookup = float("inf")  # the key may not read: batches keep their normal size
            return
        for key, it in found.items():
            if it > self._iters.get(key, ITER_MIN - 1):
                self._iters[key] = it
        self._stored_known = True

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

    def send(self, request: Request) -> bool | str | None:
        """True/URL when done with (sent, or dropped as bad), None when it must be kept."""
        return self._answered(request, self.transport.send(request, self._timeout(request)))

    def _answered(self, request: Request, answer: Answer) -> bool | str | None:
        if answer.outcome == OK:
            self._failures = 0
            self.sent_events += request.events
            return self._accepted(request, answer.body)
        self.last_error = answer.detail
        if answer.outcome == DROP:
            if answer.status == 413:
                halves = split_request(request)
                if halves is not None:
                    return self._send_halves(request, halves)
            self.dropped_events += request.events
            self.problems(
                f"rejected-{answer.status}",
                f"the server rejected a {request.kind} request ({answer.detail}); {request.events} event(s) dropped",
            )
            return True
        self._failures += 1
        cap = self.cfg.backoff_cap
        delay = min(cap, self.cfg.backoff_base * 2 ** min(self._failures - 1, 30))
        self._down_until = time.monotonic() + delay * random.uniform(0.5, 1.0)
        if answer.outcome == KEEP:
            self.problems(
                "refused",
                f"the server at {self.url} refused the data ({answer.detail}); keeping it in {self.spool.dir}",
            )
        else:
            self.problems(
                "unreachable",
                f"cannot reach {self.url} ({answer.detail}); spooling to {self.spool.dir} and retrying",
            )
        return None

    def _send_halves(self, request: Request, halves: list[Request]) -> bool | None:
        """Send a request the server found too large as two (each halved again if need be).

        When a half must be kept, the whole request is kept: sent again later, the half that
        went through is stored again under the same keys, which the server makes harmless.
        """
        self._max_points = max(1, min(self._max_points, request.events // 2))
        self.problems(
            "split",
            f"the server at {self.url} found a request of {request.events} events too large; "
            "sending it in parts, and smaller batches from now on",
        )
        sent = self.sent_events
        for half in halves:
            if self.send(half) is None:
                self.sent_events = sent
                return None
        return True

    def _accepted(self, request: Request, body: bytes) -> bool | str:
        if request.kind == "job" and request.method == "POST" and body:
            with contextlib.suppress(orjson.JSONDecodeError, AttributeError):
                if orjson.loads(body).get("created") is True:
                    self._stored_known = True  # a job this run created has nothing stored yet
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
        rejected, reasons = refused_events(answer)
        if rejected:
            self.dropped_events += rejected
            self.sent_events -= rejected
            for reason, count, detail in reasons:
                self.problems(f"rejected-{reason}", f"the server rejected {count} event(s): {reason} {detail}".strip())
        return True
