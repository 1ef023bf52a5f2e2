"""A keep-alive HTTP client for the sender thread (standard library only).

``send`` writes a request and reads its answer. ``begin`` only writes it, and
``complete`` reads the answer later: the sender encodes its next batch in between, while
the server works on this one. One connection carries one request at a time, so requests
reach the server, and are answered, in the order they were begun.
"""

from __future__ import annotations

import http.client
import socket
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from jobpulse.sdk.wire import Request

USER_AGENT = "jobpulse-sdk/0.1"

# What the sender does with an answer.
OK, RETRY, KEEP, DROP = "ok", "retry", "keep", "drop"


@dataclass
class Answer:
    outcome: str  # OK, RETRY (server unreachable or busy), KEEP (auth: keep the data), DROP (bad request)
    status: int  # 0 when no answer came
    body: bytes
    detail: str = ""


@dataclass
class Pending:
    """A request written to the connection whose answer was not read yet (see ``Transport.begin``)."""

    request: Request
    headers: dict[str, str] = field(repr=False)
    wait: float
    attempt: int = 0
    answer: Answer | None = None  # set when the request could not be written at all


# Errors of a kept-alive connection that the server closed while it was idle: sent again once, on a fresh one.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError)


def classify(status: int, kind: str) -> str:
    if 200 <= status < 300:
        return OK
    if status == 409 and kind in ("job", "worker"):
        return OK  # already exists
    if status in (408, 425, 429) or status >= 500:
        return RETRY
    if status in (401, 403) or (status == 404 and kind in ("ingest", "file")):
        return KEEP  # a key or scope problem: the data is fine, keep it for a later replay
    return DROP  # a bad request (or a status change of a job that is not there): sending again won't help


def refused_events(answer: Any) -> tuple[int, list[tuple[str, int, str]]]:
    """What the parsed answer to an accepted ingest request says the server still refused: the number of events,
    and per reason its count and one example's detail."""
    if not isinstance(answer, dict) or not answer.get("rejected"):
        return 0, []
    examples = answer.get("examples") or [{}]
    reasons = [
        (str(reason), int(count), next((e.get("detail", "") for e in examples if e.get("reason") == reason), ""))
        for reason, count in (answer.get("errors") or {}).items()
    ]
    return int(answer["rejected"]), reasons


def quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


class Transport:
    """Sends requests to one server; reconnects after any error."""

    def __init__(self, url: str, api_key: str | None, timeout: float = 10.0) -> None:
        parts = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"jobpulse URL must be http or https: {url!r}")
        self.url = url.rstrip("/")
        self.scheme = parts.scheme
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            self._conn = cls(self.host, self.port, timeout=timeout)
        else:
            self._conn.timeout = timeout
            if self._conn.sock is not None:
                self._conn.sock.settimeout(timeout)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def send(self, request: Request, timeout: float | None = None) -> Answer:
        """Write ``request`` and wait for its answer."""
        return self.complete(self.begin(request, timeout))

    def begin(self, request: Request, timeout: float | None = None) -> Pending:
        """Write ``request``; its answer is read by ``complete``, which must come before the next ``begin``."""
        headers = {"User-Agent": USER_AGENT, "Content-Type": request.content_type}
        if request.encoding:
            headers["Content-Encoding"] = request.encoding
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        wait = self.timeout if timeout is None else max(0.05, timeout)
        pending = Pending(request, headers, wait)
        self._write(pending)
        return pending

    def _write(self, pending: Pending) -> None:
        request = pending.request
        while True:
            conn = self._connection(pending.wait)
            try:
                conn.request(request.method, self.prefix + request.path, body=request.body, headers=pending.headers)
                return
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                if pending.attempt == 0 and isinstance(exc, _STALE):
                    pending.attempt = 1
                    continue
                pending.answer = _failed(exc)
                return

    def complete(self, pending: Pending) -> Answer:
        """The answer to a request written by ``begin``."""
        while pending.answer is None:
            conn = self._conn
            if conn is None:  # closed in between (the run is ending)
                return Answer(RETRY, 0, b"", "connection closed")
            try:
                resp = conn.getresponse()
                body = resp.read()
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                # a kept-alive connection the server closed fails at once: send again on a fresh one
                if pending.attempt == 0 and isinstance(exc, _STALE):
                    pending.attempt = 1
                    self._write(pending)
                    continue
                return _failed(exc)
            if resp.will_close:
                self.close()
            outcome = classify(resp.status, pending.request.kind)
            return Answer(outcome, resp.status, body, "" if outcome == OK else _detail(resp.status, body))
        return pending.answer


def _failed(exc: BaseException) -> Answer:
    detail = "timed out" if isinstance(exc, socket.timeout) else f"{type(exc).__name__}: {exc}"
    return Answer(RETRY, 0, b"", detail)


def _detail(status: int, body: bytes) -> str:
    text = body[:300].decode("utf-8", "replace").strip()
    return f"HTTP {status}" + (f": {text}" if text else "")
