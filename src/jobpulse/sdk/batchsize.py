"""How large the sender lets a batch grow: the adaptive batch-size policy of ``jobpulse.sdk.sender``.

A batch is sent once it holds ``batch_points`` points (or ``batch_bytes``) and nothing more
waits in the queue; while records wait (the caller reports faster than the server stores) a
fresh batch grows up to ``max_batch_points`` (or ``max_batch_bytes``): fewer, larger
requests, each stored by the server with one insert. Fresh (see ``jobpulse.sdk.wire``): no
scalar at or below the highest iteration of its series already stored or sent. The server
replaces stored points at a cost that grows faster than their number in one request, so a
batch that may replace any stays at ``batch_points``. What is stored is known when the job
registration answers that this run created the job (nothing), else asked once from
``/jp/v1/scalars/latest`` when a batch could grow; until then batches stay at their normal
size. A server that answered 413 keeps every later batch below the size it refused
(``jobpulse.sdk.answers``).

``BatchSizing`` is a part of ``Sender``: its methods use the sender's queue, settings,
transport, ``_settle`` and ``_timeout``, and the state named below, all set up by ``Sender.__init__``.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

import orjson

from jobpulse.sdk.problems import Problems
from jobpulse.sdk.transport import RETRY, Transport, quote
from jobpulse.sdk.values import ITER_MIN
from jobpulse.sdk.wire import Batch, Request

if TYPE_CHECKING:
    from jobpulse.sdk.sender import SenderConfig


class BatchSizing:
    """The sender's batch-size policy (mixed into ``Sender``)."""

    cfg: SenderConfig
    q: deque
    problems: Problems
    transport: Transport
    backlog: deque
    spool_only: bool
    _down_until: float
    _max_points: int  # lowered when the server refuses a size (413)
    _iters: dict[tuple[str, str], int]  # (metric, variant) -> highest iteration stored or sent
    _stored_known: bool  # whether _iters covers what was stored before this run
    _next_lookup: float

    def _new_batch(self) -> Batch:
        frontier = self._iters if self._stored_known else None
        return Batch(self.cfg.project, self.cfg.job, self.cfg.worker, self.problems, frontier)

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
