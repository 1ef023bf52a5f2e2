"""The insights of one server: evaluation on demand, the periodic evaluation of running jobs, and alerts.

``start`` runs a cycle every ``insights_interval_s`` seconds on a thread of its own (0: never; the server's
default is 60); ``close`` stops it. Every replica may run the cycle: findings open, and alerts go out, once.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from ..settings import Settings
from ..store import Store, identity
from .alerts import Alerter
from .evaluate import Evaluator, Outcome

log = logging.getLogger("jobpulse.insights")


class Insights:
    def __init__(self, store: Store, settings: Settings, *, alerter: Alerter | None = None) -> None:
        self.interval_s = settings.insights_interval_s
        self.evaluator = Evaluator(store)
        self.alerter = alerter or Alerter(store, settings.url)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_cycle: dict[str, Any] | None = None

    def evaluate_job(self, row: dict[str, Any], now_ms: int | None = None) -> Outcome:
        """Evaluate one job now (a running job at ``now_ms``, default the wall clock; a finished one at its end)
        and send the alerts of what changed."""
        if now_ms is None and (row["status"] == "running" or row["ended"] is None):
            now_ms = identity.now_ms()
        outcome = self.evaluator.job(row, now_ms)
        self.alerter.notify(outcome.opened, outcome.resolved)
        return outcome

    def cycle(self, now_ms: int | None = None) -> Outcome:
        """Evaluate every running job (and close the findings of jobs that ended) and send the alerts."""
        began = time.perf_counter()
        outcome = self.evaluator.running(identity.now_ms() if now_ms is None else now_ms)
        self.alerter.notify(outcome.opened, outcome.resolved)
        self.last_cycle = {
            "jobs": outcome.jobs,
            "opened": len(outcome.opened),
            "resolved": len(outcome.resolved),
            "seconds": round(time.perf_counter() - began, 3),
            "at": identity.now_ms(),
        }
        return outcome

    def start(self) -> None:
        if self.interval_s <= 0 or self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="jobpulse-insights", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.cycle()
            except Exception:  # a store outage ends one cycle, not the loop
                log.exception("insights cycle failed")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self.alerter.close()
