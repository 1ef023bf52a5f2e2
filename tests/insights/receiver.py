"""A webhook receiver on loopback: records every JSON body posted to it; can refuse the first few."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    def __init__(self, fail_first: int = 0) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.refused = 0
        self._fail_first = fail_first
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with receiver._lock:
                    refuse = receiver.refused < receiver._fail_first
                    if refuse:
                        receiver.refused += 1
                    else:
                        receiver.bodies.append(body)
                self.send_response(503 if refuse else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait_for(self, count: int, timeout: float = 20.0, settle: float = 0.5) -> list[dict[str, Any]]:
        """The bodies once ``count`` have come (and nothing more for ``settle`` seconds), or what came in time."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(self.bodies) < count:
            time.sleep(0.05)
        time.sleep(settle)
        with self._lock:
            return list(self.bodies)
