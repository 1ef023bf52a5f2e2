"""One evaluation: read the data of some jobs, run the detectors, and bring the stored findings up to date.

A detection continues the stored finding of the same kind, signal, worker and device whose time span it overlaps;
one without such a finding opens a new one, claimed (``store/findings.py``) so that it opens once however many
replicas evaluate the job at the same moment. A stored finding still open that no detection continues is resolved.
What opened and resolved is answered as events for the alerts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..store import Store
from ..store.findings import Finding
from . import frames
from .detect_gpu import idle_gpu, straggler, underused
from .detect_hardware import hardware
from .detect_progress import divergence, hang, lost_worker
from .frames import MINUTE_MS, JobData
from .model import Detection, continued_evidence
from .thresholds import effective, minutes

DETECTORS: dict[str, Callable[[JobData, dict[str, Any]], list[Detection]]] = {
    "idle_gpu": idle_gpu,
    "underused": underused,
    "straggler": straggler,
    "hang": hang,
    "divergence": divergence,
    "hardware": hardware,
    "lost_worker": lost_worker,
}
BASE_LOOKBACK_MIN = 20  # minutes of data a running job is evaluated over, at least
FINAL_MAX_MIN = 7 * 24 * 60  # the most of a finished job's history an evaluation reads
CHUNK = 100  # jobs read per set of queries (a longer list of names in one query failed over HTTP to the stand-in)
STALE_CLAIM_MS = 120_000  # a claim this old without its finding was abandoned by a replica that stopped


@dataclass
class Outcome:
    """What an evaluation changed: findings opened and resolved (for alerts), and how many it wrote."""

    jobs: int = 0
    opened: list[Finding] = field(default_factory=list)
    resolved: list[Finding] = field(default_factory=list)
    written: int = 0

    def add(self, other: Outcome) -> None:
        self.jobs += other.jobs
        self.opened += other.opened
        self.resolved += other.resolved
        self.written += other.written


def lookback_minutes(t: dict[str, Any]) -> int:
    """How many minutes of data the detectors need under thresholds ``t`` to see a condition begin and clear."""
    longest = max(
        t["idle_min_s"],
        t["underused_window_s"],
        t["straggler_min_s"],
        t["hang_min_s"],
        t["spike_window_s"],
        t["hardware_min_s"],
        t["lost_after_s"],
    )
    return max(BASE_LOOKBACK_MIN, minutes(longest) + 2 * minutes(t["resolve_after_s"]) + 2)


class Evaluator:
    def __init__(self, store: Store) -> None:
        self._store = store

    def running(self, now_ms: int) -> Outcome:
        """Evaluate every running job at ``now_ms``, and close the findings of jobs that ended since."""
        data = self._store.insight_data
        running = data.running_jobs()
        outcome = self._window(running, now_ms)
        names = {row["job"] for row in running}
        ended = [j for j in self._store.findings.jobs_with_open() if j not in names]
        for chunk in frames.chunks(ended, CHUNK):
            for row in data.jobs(chunk):
                outcome.add(self.job(row, now_ms))
        return outcome

    def job(self, row: dict[str, Any], now_ms: int | None = None) -> Outcome:
        """Evaluate one job (a row of ``InsightData.jobs``): a running one at ``now_ms``, a finished one over its
        whole run, at its end."""
        if row["status"] == "running" or row["ended"] is None:
            assert now_ms is not None
            return self._window([row], now_ms)
        end = int(row["ended"]) if now_ms is None else min(int(row["ended"]), now_ms)
        progress = self._store.insight_data.first_progress([row["job"]]).get(row["job"])
        start = self._began(row, end, progress)
        first = max(start - start % MINUTE_MS, end - end % MINUTE_MS - FINAL_MAX_MIN * MINUTE_MS)
        return self._evaluate([{**row, "started": start, "first_progress": progress}], first, end, final=True)

    def _began(self, row: dict[str, Any], end: int, progress: int | None) -> int:
        """When a finished job began: its start, or its first system sample, scalar point or log line (``progress``)
        where one is earlier. A run recorded while its server could not be reached and sent later (``jobpulse sync``)
        may have been registered only when it was sent, after every sample of it; its warm-up counts from its data
        too."""
        job = row["job"]
        found = [int(row["started"])] if row["started"] else []
        extent = self._store.system.extent(job)
        if extent is not None:
            found.append(extent[0])
        if progress is not None:
            found.append(progress)
        return min(found, default=end)

    def _window(self, rows: list[dict[str, Any]], now_ms: int) -> Outcome:
        thresholds = self._thresholds(rows)
        lookback = max((lookback_minutes(t) for t in thresholds.values()), default=BASE_LOOKBACK_MIN)
        first = now_ms - now_ms % MINUTE_MS - (lookback - 1) * MINUTE_MS
        outcome = Outcome()
        for chunk in frames.chunks(rows, CHUNK):
            outcome.add(self._evaluate(chunk, first, now_ms, final=False, thresholds=thresholds))
        return outcome

    def _thresholds(self, rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        projects = sorted({row["project"] for row in rows})
        changed = self._store.insight_config.thresholds(projects)
        return {p: effective(changed.get(p)) for p in projects}

    def _evaluate(
        self,
        rows: list[dict[str, Any]],
        first: int,
        now_ms: int,
        *,
        final: bool,
        thresholds: dict[str, dict[str, Any]] | None = None,
    ) -> Outcome:
        thresholds = thresholds or self._thresholds(rows)
        stored: dict[str, list[Finding]] = {}
        for finding in self._store.findings.current([row["job"] for row in rows], first):
            stored.setdefault(finding.job, []).append(finding)
        outcome = Outcome(jobs=len(rows))
        writes: list[Finding] = []
        for data in frames.load(self._store, rows, first, now_ms, final=final):
            t = thresholds[data.project]
            detections = [d for kind, detect in DETECTORS.items() if kind not in t["disabled"] for d in detect(data, t)]
            writes += self._reconcile(data, detections, stored.get(data.job, []), outcome)
        self._store.findings.write(writes)
        outcome.written = len(writes)
        return outcome

    def _reconcile(
        self, data: JobData, detections: list[Detection], stored: list[Finding], outcome: Outcome
    ) -> list[Finding]:
        now = data.now_ms
        writes, continued = [], set()
        for detection in detections:
            found = _match(detection, stored, continued)
            if found is None:
                opened = self._open(data, detection)
                if opened is not None:
                    writes.append(opened)
                    outcome.opened.append(opened)
                    if opened.ended is not None:
                        outcome.resolved.append(opened)
                continue
            continued.add(found.finding_id)
            was_open = found.ended is None
            if not was_open and detection.ended is not None:
                continue  # resolved: a later window that sees only its end does not rewrite it
            detection.evidence = continued_evidence(found.evidence, detection.evidence)
            if found.ended == detection.ended and found.evidence == detection.evidence:
                continue
            found.ended, found.evidence, found.severity, found.updated = (
                detection.ended,
                detection.evidence,
                detection.severity,
                now,
            )
            found.resolved = now if detection.ended is not None else None
            writes.append(found)
            if was_open and detection.ended is not None:
                outcome.resolved.append(found)
        for found in stored:
            if found.ended is None and found.finding_id not in continued:
                found.ended = found.resolved = found.updated = now
                writes.append(found)
                outcome.resolved.append(found)
        return writes

    def _open(self, data: JobData, d: Detection) -> Finding | None:
        """The finding ``d`` opens, if this evaluation holds its claim (None: another evaluation opens it)."""
        name = f"open|{data.job}|{d.kind}|{d.signal}|{d.worker}|{d.device}|{d.started}"
        if not self._store.findings.claim(name, stale_ms=STALE_CLAIM_MS):
            return None
        finding_id = "f_" + hashlib.sha256(name.encode()).hexdigest()[:24]
        now = data.now_ms
        resolved = now if d.ended is not None else None
        return Finding(finding_id, data.project, data.job, opened=now, updated=now, resolved=resolved, **asdict(d))


def _match(d: Detection, stored: list[Finding], taken: set[str]) -> Finding | None:
    """The stored finding ``d`` continues: the same key, a time span that overlaps, not continued already."""
    end = d.ended if d.ended is not None else float("inf")
    for found in stored:
        if found.key != d.key or found.finding_id in taken:
            continue
        if found.started <= end and (found.ended is None or found.ended >= d.started):
            return found
    return None
