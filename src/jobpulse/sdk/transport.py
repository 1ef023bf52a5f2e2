"""A keep-alive HTTP client for the sender thread (standard library only)."""

from __future__ import annotations

import http.client
import socket
import urllib.parse
from dataclasses import dataclass

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
        headers = {"User-Agent": USER_AGENT, "Content-Type": request.content_type}
        if request.encoding:
            headers["Content-Encoding"] = request.encoding
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        wait = self.timeout if timeout is None else max(0.05, timeout)
        for attempt in (0, 1):
            conn = self._connection(wait)
            try:
                conn.request(request.method, self.prefix + request.path, body=request.body, headers=headers)
                resp = conn.getresponse()
                body = resp.read()
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                # a kept-alive connection the server closed fails at once: retry on a fresh one
                if attempt == 0 and isinstance(exc, http.client.RemoteDisconnected | BrokenPipeError):
                    continue
                detail = "timed out" if isinstance(exc, socket.timeout) else f"{type(exc).__name__}: {exc}"
                return Answer(RETRY, 0, b"", detail)
            if resp.will_close:
                self.close()
            outcome = classify(resp.status, request.kind)
            return Answer(outcome, resp.status, body, "" if outcome == OK else _detail(resp.status, body))
        return Answer(RETRY, 0, b"", "connection closed")  # pragma: no cover


def _detail(status: int, body: bytes) -> str:
    text = body[:300].decode("utf-8", "replace").strip()
    return f"HTTP {status}" + (f": {text}" if text else "")
