"""Alerts: a finding that opens or resolves is posted to each webhook of its project, once.

Each (event, finding) is claimed in the store before it is sent (``store/findings.py``): whichever replica
evaluated, and however often, one of them sends it. Sending runs on a thread of its own, so an evaluation never
waits on a receiver; a failed post (a connection error, a timeout, a 5xx or 429 answer) is tried again after
1, 2, 4 ... seconds, up to ``attempts`` times, and every outcome is recorded per webhook.

Payloads: ``json`` posts the finding itself (``{"event": "opened" | "resolved" | "test", "finding": {...},
"job_url": ...}``); ``slack`` posts a Slack-compatible incoming-webhook message (``{"text": ..., "blocks": [...]}``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

from ..store import Store
from ..store.findings import Finding
from ..store.insight_config import Webhook

log = logging.getLogger("jobpulse.insights")
FORMATS = ("json", "slack")
_ICONS = {"critical": ":red_circle:", "warning": ":large_orange_circle:", "info": ":large_blue_circle:"}


@dataclass
class Delivery:
    hook: Webhook
    event: str
    finding: Finding


def payload(fmt: str, event: str, finding: Finding, job_url: str) -> dict[str, Any]:
    """The body posted for ``event`` of ``finding`` in webhook format ``fmt``."""
    if fmt == "json":
        return {"event": event, "finding": finding.to_dict(), "job_url": job_url}
    where = " ".join(p for p in (finding.worker, f"GPU {finding.device}" if finding.device else "") if p)
    title = f"{finding.kind.replace('_', ' ')}{f' ({finding.signal})' if finding.signal else ''}"
    text = f"{_ICONS.get(finding.severity, '')} [{finding.project}] {finding.job}: {title} {event}"
    if where:
        text += f" on {where}"
    details = ", ".join(f"{k}={v}" for k, v in finding.evidence.items() if not isinstance(v, (list, dict)))
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{text}*\n{details}"}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": f"<{job_url}|open the job>"}]},
        ],
    }


class Alerter:
    """Claims and sends the alerts of findings on a thread of its own; ``close`` stops it."""

    def __init__(
        self, store: Store, base_url: str, *, attempts: int = 6, backoff_s: float = 1.0, timeout_s: float = 10.0
    ) -> None:
        self._store = store
        self._base_url = base_url.rstrip("/")
        self._attempts = attempts
        self._backoff_s = backoff_s
        self._timeout_s = timeout_s
        self._queue: queue.Queue[Delivery | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    def notify(self, opened: list[Finding], resolved: list[Finding]) -> int:
        """Queue the alerts of findings that ``opened`` and ``resolved`` that this caller is first to claim;
        answers how many deliveries were queued."""
        queued = 0
        hooks: dict[str, list[Webhook]] = {}
        for event, findings in (("opened", opened), ("resolved", resolved)):
            for finding in findings:
                if finding.project not in hooks:
                    hooks[finding.project] = self._store.insight_config.webhooks(finding.project)
                if not hooks[finding.project]:
                    continue
                if not self._store.findings.claim(f"alert|{event}|{finding.finding_id}"):
                    continue
                for hook in hooks[finding.project]:
                    self._put(Delivery(hook, event, finding))
                    queued += 1
        return queued

    def send_test(self, hook: Webhook) -> dict[str, Any]:
        """Post a test alert to ``hook`` now (no retries): its HTTP status, or the error."""
        sample = Finding(
            "f_test",
            hook.project,
            "example-job",
            "idle_gpu",
            "",
            "warning",
            "worker-0",
            "0",
            int(time.time() * 1000) - 300_000,
            None,
            int(time.time() * 1000),
            int(time.time() * 1000),
            None,
            {"mean_util_pct": 0.4, "minutes": 5, "test": True},
        )
        try:
            status = self._post(hook, "test", sample)
        except httpx.HTTPError as exc:
            return {"delivered": False, "error": f"{type(exc).__name__}: {exc}"}
        return {"delivered": 200 <= status < 300, "status": status}

    def _put(self, delivery: Delivery) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="jobpulse-alerts", daemon=True)
                self._thread.start()
        self._queue.put(delivery)

    def _run(self) -> None:
        while True:
            delivery = self._queue.get()
            if delivery is None:
                return
            try:
                self._deliver(delivery)
            except Exception:  # a store failure while recording must not end the thread
                log.exception("alert delivery failed")

    def _deliver(self, d: Delivery) -> None:
        error, attempt = "", 0
        for attempt in range(1, self._attempts + 1):
            try:
                status = self._post(d.hook, d.event, d.finding)
                if 200 <= status < 300:
                    self._store.insight_config.record_delivery(
                        d.hook.webhook_id, d.finding.finding_id, d.event, "delivered", attempt, ""
                    )
                    return
                error = f"HTTP {status}"
                if status < 500 and status != 429:
                    break  # the receiver refuses it: trying again would not help
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}"
            if attempt < self._attempts and self._stopping.wait(self._backoff_s * 2 ** (attempt - 1)):
                break
        log.warning("alert to webhook %s failed after %d attempts: %s", d.hook.webhook_id, attempt, error)
        self._store.insight_config.record_delivery(
            d.hook.webhook_id, d.finding.finding_id, d.event, "failed", attempt, error
        )

    def _post(self, hook: Webhook, event: str, finding: Finding) -> int:
        body = payload(hook.format, event, finding, f"{self._base_url}/jobs/{finding.job}")
        answer = httpx.post(hook.url, json=body, timeout=self._timeout_s)
        return answer.status_code

    def close(self) -> None:
        self._stopping.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread.is_alive():
            self._queue.put(None)
            thread.join(timeout=5)
