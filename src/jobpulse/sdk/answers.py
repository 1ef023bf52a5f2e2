"""What the sender does with the server's answer to a request it sent.

``jobpulse.sdk.transport.classify`` sorts each answer into one of four outcomes:

- OK: the request's events count as sent, less the ones the answer says it refused one
  by one (each reason reported); a job registration that says this run created the job
  tells the sender that nothing was stored before it (``jobpulse.sdk.batchsize``); a file
  upload's answer gives the URL the image event keeps.
- DROP: the request is bad and dropped, reported once; but one the server found too large
  (413) is sent again in two halves (halved again if need be), and later batches stay
  below what it refused. When a half must be kept, the whole request is kept: sent again
  later, the half that went through is stored again under the same keys, which the server
  makes harmless.
- RETRY (no connection, timeout, 408/429/5xx) and KEEP (a key or scope problem): the
  request is kept, and the server is taken as down for a backoff (exponential,
  ``backoff_base`` doubling up to ``backoff_cap``, with jitter: a random 50-100 % of it).

``AnswerHandling`` is a part of ``Sender``: its methods use the sender's settings,
transport, ``_timeout`` and the state named below, all set up by ``Sender.__init__``.
"""

from __future__ import annotations

import contextlib
import random
import time
from typing import TYPE_CHECKING

import orjson

from jobpulse.sdk.problems import Problems
from jobpulse.sdk.split import split_request
from jobpulse.sdk.spool import Spool
from jobpulse.sdk.transport import DROP, KEEP, OK, Answer, Transport, refused_events
from jobpulse.sdk.wire import Request

if TYPE_CHECKING:
    from jobpulse.sdk.sender import SenderConfig


class AnswerHandling:
    """The sender's handling of answers (mixed into ``Sender``)."""

    cfg: SenderConfig
    url: str
    problems: Problems
    transport: Transport
    spool: Spool
    sent_events: int
    dropped_events: int
    last_error: str
    _failures: int
    _down_until: float
    _max_points: int
    _stored_known: bool

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
