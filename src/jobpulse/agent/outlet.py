"""Where the agent's data goes: the SDK's sender (batching, compression, retries, spooling).

System samples of one tick become one prepared ingest request in the columnar form of
docs/ingest.md (a series per metric and device); log lines of a wrapped command are queued as
the sender's own log-line records; job and worker registration and status changes are prepared
requests, which the sender delivers in queue order with everything else.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import orjson
import zstandard

from jobpulse.agent.base import Sample
from jobpulse.sdk import spool as sdk_spool
from jobpulse.sdk.problems import Problems
from jobpulse.sdk.sender import Delivery, Sender, SenderConfig
from jobpulse.sdk.transport import quote
from jobpulse.sdk.wire import LINE, REQUEST, Request


def system_body(project: str, job: str, worker: str, ts_ms: int, samples: list[Sample]) -> dict[str, Any]:
    """The columnar ingest body for one tick of samples."""
    series = [
        {"kind": "system", "metric": s.metric, "device": s.device, "ts": [ts_ms], "value": [s.value]} for s in samples
    ]
    return {"project": project, "job": job, "worker": worker, "series": series}


class Outlet:
    def __init__(
        self,
        url: str,
        api_key: str | None,
        project: str,
        job: str,
        worker: str,
        *,
        spool_root: Path | None = None,
        flush_interval: float = 1.0,
        problems: Problems | None = None,
    ) -> None:
        self.project, self.job, self.worker = project, job, worker
        self.queue: deque = deque()
        self.problems = problems or Problems()
        cfg = SenderConfig(
            url=url,
            api_key=api_key,
            project=project,
            job=job,
            worker=worker,
            spool_root=spool_root or sdk_spool.default_root(),
            flush_interval=flush_interval,
            # The agent sends system samples and log lines, never scalars: no pyarrow to load (40 MB of a
            # process that runs beside every job).
            arrow=False,
        )
        self.sender = Sender(cfg, self.queue, self.problems)
        self._compress = zstandard.ZstdCompressor(level=3).compress
        self._lock = threading.Lock()
        self.sender.start()

    def _request(self, method: str, path: str, body: dict[str, Any], kind: str, events: int = 0) -> Request:
        raw = orjson.dumps(body)
        encoding = ""
        if kind == "ingest" and len(raw) > 256:
            raw, encoding = self._compress(raw), "zstd"
        return Request(method, path, raw, "application/json", encoding, events, kind)

    def system(self, ts_ms: int, samples: list[Sample]) -> None:
        """Queue one tick of system samples."""
        if not samples:
            return
        body = system_body(self.project, self.job, self.worker, ts_ms, samples)
        with self._lock:  # zstd compressor objects are not thread-safe
            request = self._request("POST", "/jp/v1/ingest", body, "ingest", len(samples))
        self.queue.append((REQUEST, request))

    def line(self, ts_ms: int, seq: int, level: str, msg: str) -> None:
        """Queue one log line of this worker."""
        self.queue.append((LINE, ts_ms, seq, level, msg))

    def register_job(
        self, name: str | None = None, tags: list[str] | None = None, instance_type: dict[str, Any] | None = None
    ) -> None:
        """Queue the job's registration; ``instance_type`` (the worker's hardware, ``hardware.py``) is kept by the
        server where the job has none yet."""
        body: dict[str, Any] = {"project": self.project, "job": self.job, "at": time.time_ns() // 1_000_000}
        if name:
            body["name"] = name
        if tags:
            body["tags"] = tags
        if instance_type:
            body["instance_type"] = instance_type
        with self._lock:
            self.queue.append((REQUEST, self._request("POST", "/jp/v1/jobs", body, "job")))

    def worker_status(
        self, status: str, exit_code: int | None = None, host: str | None = None, fields: dict[str, Any] | None = None
    ) -> None:
        """Queue the worker's status; ``fields`` are more of its registration (``kind``, ``node``, ``rank``, ...)."""
        # timed now: sent late (from the spool), it still says when the worker started or ended
        at = time.time_ns() // 1_000_000
        body: dict[str, Any] = {**(fields or {}), "status": status, "host": host or socket.gethostname(), "at": at}
        if exit_code is not None:
            body["exit_code"] = exit_code
        path = f"/jp/v1/jobs/{quote(self.job)}/workers/{quote(self.worker)}"
        with self._lock:
            self.queue.append((REQUEST, self._request("PUT", path, body, "worker")))

    def flush(self) -> None:
        self.sender.flush()

    def close(self, timeout: float = 10.0) -> Delivery:
        """Send what is queued, waiting at most ``timeout`` seconds; the rest stays in the spool."""
        return self.sender.close(timeout)
