"""A small blocking HTTP client for the native API, used by the CLI and the demo loader."""

from __future__ import annotations

import gzip
import urllib.error
import urllib.request
from typing import Any

import orjson

from .credentials import Credentials, load_credentials


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class Client:
    def __init__(self, credentials: Credentials | None = None, timeout: float = 60.0) -> None:
        self.credentials = credentials or load_credentials()
        self.timeout = timeout

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        data: bytes | None = None,
        content_type: str = "application/json",
        gzip_body: bool = False,
    ) -> Any:
        if json is not None:
            data = orjson.dumps(json)
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
            if gzip_body:
                data = gzip.compress(data, compresslevel=1)
                headers["Content-Encoding"] = "gzip"
        if self.credentials.api_key:
            headers["Authorization"] = f"Bearer {self.credentials.api_key}"
        req = urllib.request.Request(self.credentials.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                message = orjson.loads(raw)["error"]["message"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                message = raw.decode(errors="replace")[:500]
            raise ApiError(exc.code, message) from None
        except urllib.error.URLError as exc:
            raise ApiError(0, f"cannot reach {self.credentials.url}: {exc.reason}") from None
        return orjson.loads(body) if body else None

    def ingest(self, body: dict | list[dict], **defaults: str) -> dict:
        query = "&".join(f"{k}={v}" for k, v in defaults.items() if v)
        path = "/jp/v1/ingest" + (f"?{query}" if query else "")
        if isinstance(body, list):
            data = b"\n".join(orjson.dumps(e) for e in body)
            return self.request("POST", path, data=data, content_type="application/x-ndjson", gzip_body=True)
        return self.request("POST", path, data=orjson.dumps(body), gzip_body=True)
