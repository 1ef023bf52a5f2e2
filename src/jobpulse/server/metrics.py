"""What operators watch: the server's figures for ``/metrics`` (Prometheus text) and the store's readiness.

Every app has a registry of its own (two apps in one process keep separate figures). Requests are counted by
route template, never by raw path, so the number of series stays bounded whatever clients send. Collectors
read their sources (the group commit's queue, the engine's failed statements) when scraped.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future

from prometheus_client import CollectorRegistry, Counter, GCCollector, Histogram, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..ingest import Committer
from ..settings import SETTINGS, Settings
from ..store import Store
from ..store.engine import Engine, Failures, ping
from ..version import __version__

METRICS_ACCESS = next(setting.choices for setting in SETTINGS if setting.name == "metrics_access")
# From a remembered-key read (~1 ms) to a big chart or a slow ingest; a live log follow lands in +Inf.
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
COMMIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
INGEST_KINDS = ("scalars", "events", "logs", "system")
UNMATCHED = "unmatched"  # the route label of a request no route answered (no such path, refused before routing)
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class Metrics:
    """The figures of one app: requests, ingest, group commit, store errors and the process."""

    def __init__(self, engine: Engine) -> None:
        self.registry = CollectorRegistry()
        self._requests = Counter(
            "jobpulse_http_requests",
            "HTTP requests answered, by method, route template and status",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self._latency = Histogram(
            "jobpulse_http_request_duration_seconds",
            "time from a request's arrival to the end of its answer, by method and route template",
            ("method", "route"),
            buckets=REQUEST_BUCKETS,
            registry=self.registry,
        )
        self._rows = Counter(
            "jobpulse_ingest_rows", "rows stored by ingest, by kind (table)", ("kind",), registry=self.registry
        )
        self._commits = Histogram(
            "jobpulse_ingest_commit_duration_seconds",
            "time one group commit (the insert shared by the ingest requests queued together) took",
            buckets=COMMIT_BUCKETS,
            registry=self.registry,
        )
        self._commit_failures = Counter(
            "jobpulse_ingest_commit_failures", "group commits the store refused", registry=self.registry
        )
        for kind in INGEST_KINDS:
            self._rows.labels(kind)
        self.registry.register(StoreErrors(engine.name, engine.failures))
        self.registry.register(BuildInfo(engine.name))
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self._request_children: dict[tuple[str, str, int], Counter] = {}
        self._latency_children: dict[tuple[str, str], Histogram] = {}

    def watch(self, committer: Committer) -> None:
        """Report ``committer``'s queue depth at every scrape."""
        self.registry.register(CommitQueue(committer))

    def request_done(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one answered request and its duration."""
        if method not in _METHODS:
            method = "other"
        key = (method, route, status)
        counter = self._request_children.get(key)
        if counter is None:
            counter = self._request_children[key] = self._requests.labels(method, route, str(status))
        counter.inc()
        histogram = self._latency_children.get(key[:2])
        if histogram is None:
            histogram = self._latency_children[key[:2]] = self._latency.labels(method, route)
        histogram.observe(seconds)

    def committed(self, seconds: float, written: dict[str, int]) -> None:
        """A group commit stored ``written`` rows per table in ``seconds``."""
        self._commits.observe(seconds)
        for kind, rows in written.items():
            self._rows.labels(kind).inc(rows)

    def failed(self, seconds: float) -> None:
        """A group commit failed after ``seconds``."""
        self._commits.observe(seconds)
        self._commit_failures.inc()

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """Every figure in the format ``accept`` asks for (OpenMetrics or Prometheus text); the body and its type."""
        encode, content_type = choose_encoder(accept or "")
        return encode(self.registry), content_type


def server_metrics(store: Store, settings: Settings) -> Metrics | None:
    """The figures ``create_app`` keeps for ``store``, or None where ``settings`` turns them off."""
    if settings.metrics_access not in METRICS_ACCESS:
        raise ValueError(f"metrics_access must be one of {', '.join(METRICS_ACCESS)}, got {settings.metrics_access!r}")
    return None if settings.metrics_access == "off" else Metrics(store.engine)


class RequestMetrics:
    """ASGI middleware: counts every HTTP request by method, route template and status, and times it."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the server answers if the app fails before it starts an answer

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", None) or UNMATCHED
            self.metrics.request_done(scope["method"], route, status, time.perf_counter() - started)


class StoreErrors(Collector):
    """``jobpulse_store_errors_total``: the engine's failed statements, read at each scrape."""

    def __init__(self, transport: str, failures: Failures) -> None:
        self._transport = transport
        self._failures = failures

    def collect(self) -> Iterable[CounterMetricFamily]:
        family = CounterMetricFamily(
            "jobpulse_store_errors",
            "store statements that failed (not those refused for a request's own bad values), by transport and "
            "statement",
            labels=("transport", "statement"),
        )
        for statement, count in self._failures.counts().items():
            family.add_metric((self._transport, statement), count)
        yield family


class CommitQueue(Collector):
    """The group commit's queue depth, read at each scrape."""

    def __init__(self, committer: Committer) -> None:
        self._committer = committer

    def collect(self) -> Iterable[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "jobpulse_ingest_queue_requests",
            "ingest requests waiting for their rows to be stored (queued or in the commit being written)",
            value=self._committer.waiting_requests,
        )
        yield GaugeMetricFamily(
            "jobpulse_ingest_queue_rows",
            "rows of the ingest requests waiting to be stored",
            value=self._committer.waiting_rows,
        )


class BuildInfo(Collector):
    """``jobpulse_build_info``: 1, labelled with the version and the store's transport."""

    def __init__(self, transport: str) -> None:
        self._transport = transport

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "jobpulse_build_info", "the server's version and store transport", labels=("version", "transport")
        )
        family.add_metric((__version__, self._transport), 1)
        yield family


class Readiness:
    """Whether the store answers a one-row query within ``timeout_s``.

    The query runs in a thread of its own, at most one at a time: while a store does not answer, further probes
    wait on the same query instead of stacking up threads."""

    def __init__(self, engine: Engine, timeout_s: float) -> None:
        self._engine = engine
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._probe: Future[str | None] | None = None

    async def failure(self) -> tuple[str, str] | None:
        """None when the store answered; otherwise a code (``store_timeout``, ``store_unavailable``) and a message."""
        with self._lock:
            if self._probe is None or self._probe.done():
                self._probe = Future()
                self._probe.set_running_or_notify_cancel()  # a waiter that goes away cannot cancel it
                threading.Thread(target=self._run, args=(self._probe,), name="jobpulse-readiness", daemon=True).start()
            probe = self._probe
        waiter = asyncio.wrap_future(probe)
        done, _ = await asyncio.wait({waiter}, timeout=self.timeout_s)
        if not done:
            return "store_timeout", f"the {self._engine.name} store did not answer within {self.timeout_s * 1000:g} ms"
        message = waiter.result()
        return None if message is None else ("store_unavailable", message)

    def _run(self, probe: Future[str | None]) -> None:
        try:
            ping(self._engine)
        except Exception as exc:  # answered as the reason the server is not ready
            probe.set_result(str(exc) or type(exc).__name__)
        else:
            probe.set_result(None)
