"""A small blocking HTTP client for the native API, used by the CLI and the demo loader.

Errors come as ``ApiError``: the server's own message and status, and for the two mistakes a user makes
most (a server that cannot be reached, a key it refuses) where the URL or key came from, so the message
says what to fix.
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from .credentials import DEFAULT, GIVEN, Credentials, credentials_path, load_credentials

Params = Mapping[str, str | int | float | None]


class ApiError(Exception):
    """A request that failed: ``status`` 0 when no answer came, else the HTTP status and the server's message."""

    def __init__(self, status: int, message: str, *, code: str = "", field: str | None = None, hint: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.field = field
        self.hint = hint

    def __str__(self) -> str:
        text = self.message if self.status == 0 else f"{self.message} (HTTP {self.status})"
        return f"{text}; {self.hint}" if self.hint else text


def _source(where: str, what: str, flag: str, variable: str) -> str:
    if where == GIVEN:
        return f"the {what} was given with {flag}"
    if where == variable:
        return f"the {what} comes from {variable}"
    if where == DEFAULT:
        return f"no {what} is set, so the default is used: set {variable} or pass {flag}"
    if where:
        return f"the {what} comes from the credentials file {where}"
    return ""


def url_hint(creds: Credentials) -> str:
    """Where the URL came from, for a message about a server that cannot be reached."""
    return _source(creds.url_from, "URL", "--url", "JOBPULSE_URL")


def key_hint(creds: Credentials) -> str:
    """Where the API key came from (or how to give one), for a message about a refused key."""
    if not creds.api_key:
        return (
            "no API key was found: set JOBPULSE_API_KEY, pass --api-key, or run the CLI as the user whose "
            f"server wrote {credentials_path()}"
        )
    return _source(creds.key_from, "API key", "--api-key", "JOBPULSE_API_KEY")


def error_from_body(status: int, raw: bytes) -> ApiError:
    """The ApiError of an HTTP error answer, with the message of the native API's error shape where it has one."""
    try:
        error = orjson.loads(raw)["error"]
        return ApiError(status, str(error["message"]), code=str(error.get("code") or ""), field=error.get("field"))
    except (orjson.JSONDecodeError, KeyError, TypeError):
        text = raw.decode(errors="replace").strip()[:500]
        return ApiError(status, text or http.client.responses.get(status, "error"))


def query_string(params: Params | None) -> str:
    """``?a=1&b=x`` of the parameters that are set (None and "" are left out)."""
    pairs = [(k, str(v)) for k, v in (params or {}).items() if v is not None and v != ""]
    return f"?{urllib.parse.urlencode(pairs)}" if pairs else ""


class Client:
    def __init__(self, credentials: Credentials | None = None, timeout: float = 60.0) -> None:
        self.credentials = credentials or load_credentials()
        self.timeout = timeout

    def _headers(self, accept: str) -> dict[str, str]:
        headers = {"Accept": accept}
        if self.credentials.api_key:
            headers["Authorization"] = f"Bearer {self.credentials.api_key}"
        return headers

    def _failed(self, status: int, raw: bytes) -> ApiError:
        error = error_from_body(status, raw)
        if status == 401:
            error.hint = key_hint(self.credentials)
        return error

    def _unreachable(self, reason: object) -> ApiError:
        return ApiError(
            0, f"cannot reach the server at {self.credentials.url} ({reason})", hint=url_hint(self.credentials)
        )

    def send(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        data: bytes | None = None,
        content_type: str = "application/json",
        gzip_body: bool = False,
        accept: str = "application/json",
    ) -> bytes:
        """The body of the answer to one request; ApiError when it failed."""
        headers = self._headers(accept)
        if data is not None:
            headers["Content-Type"] = content_type
            if gzip_body:
                data = gzip.compress(data, compresslevel=1)
                headers["Content-Encoding"] = "gzip"
        url = self.credentials.url + path + query_string(params)
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            raise self._failed(exc.code, exc.read()) from None
        except urllib.error.URLError as exc:
            raise self._unreachable(exc.reason) from None
        except (OSError, http.client.HTTPException) as exc:
            raise self._unreachable(exc) from None

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        json: Any = None,
        data: bytes | None = None,
        content_type: str = "application/json",
        gzip_body: bool = False,
    ) -> Any:
        """Send a request and answer its JSON body (None for an empty one)."""
        if json is not None:
            data = orjson.dumps(json)
        body = self.send(method, path, params=params, data=data, content_type=content_type, gzip_body=gzip_body)
        try:
            return orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            raise ApiError(0, f"the server at {self.credentials.url} did not answer {path} with JSON") from None

    def get(self, path: str, **params: str | int | float | None) -> Any:
        """``GET path?params`` (parameters that are None are left out), answered as JSON."""
        return self.request("GET", path, params=params)

    def stream(self, path: str, params: Params | None = None, *, read_timeout: float = 60.0) -> Stream:
        """Open a long answer (server-sent events, a download) to read as it comes."""
        return Stream(self, path, params, read_timeout)

    def ingest(self, body: dict | list[dict], **defaults: str) -> dict:
        query = "&".join(f"{k}={v}" for k, v in defaults.items() if v)
        path = "/jp/v1/ingest" + (f"?{query}" if query else "")
        if isinstance(body, list):
            data = b"\n".join(orjson.dumps(e) for e in body)
            return self.request("POST", path, data=data, content_type="application/x-ndjson", gzip_body=True)
        return self.request("POST", path, data=orjson.dumps(body), gzip_body=True)


class Stream:
    """One streamed GET: its lines as they arrive; ``interrupt`` (from any thread) ends them."""

    def __init__(self, client: Client, path: str, params: Params | None, read_timeout: float) -> None:
        parts = urllib.parse.urlsplit(client.credentials.url)
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self._client = client
        self._conn = kind(parts.hostname or "127.0.0.1", parts.port, timeout=client.timeout)
        self._target = parts.path.rstrip("/") + path + query_string(params)
        self._read_timeout = read_timeout
        self._response: http.client.HTTPResponse | None = None
        self._interrupted = threading.Event()

    def __enter__(self) -> Stream:
        try:
            self._conn.request("GET", self._target, headers=self._client._headers("*/*"))
            response = self._conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            self._conn.close()
            raise self._client._unreachable(exc) from None
        if response.status != 200:
            raw = response.read()
            self._conn.close()
            raise self._client._failed(response.status, raw)
        if self._conn.sock is not None:
            self._conn.sock.settimeout(self._read_timeout)
        self._response = response
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._conn.close()

    def lines(self) -> Iterator[bytes]:
        """Each line of the answer without its line end; stops at the end of the answer or on ``interrupt``.
        ApiError when the connection fails or stays silent for ``read_timeout`` seconds."""
        assert self._response is not None, "use the stream in a with block"
        while not self._interrupted.is_set():
            try:
                line = self._response.readline()
            except (OSError, http.client.HTTPException) as exc:
                if self._interrupted.is_set():
                    return
                raise self._client._unreachable(exc) from None
            if not line:
                return
            yield line.rstrip(b"\r\n")

    def interrupt(self) -> None:
        """End ``lines`` at once, from another thread."""
        self._interrupted.set()
        sock = self._conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
