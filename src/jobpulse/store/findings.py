"""Findings of the insight detectors (``jobpulse.insights``) and the claims that make them happen once.

A finding is one row of ``insight_findings``, written again (a higher version) whenever it is updated or resolved;
``FINAL`` reads its newest state. Every replica evaluates the same stored data, so two replicas may see the same
condition begin at once. As with the nonces of signed requests (``nonces.py``), ``claim`` inserts a claim row (a
random token, timed by the store's clock) kept once per name (``once.py``: of replicas claiming at once, the engine
stores one row) and reads back the claims of that name; the earliest claim wins. Opening a finding and sending each
of its alerts are claimed so, and a finding's id is derived from what was claimed, so that even a replica that
takes over an abandoned claim writes the same finding, never a second one.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson
import pyarrow as pa

from .engine import Engine
from .once import kept_once

_MS = pa.timestamp("ms", tz="UTC")
_FINDING_ROW = pa.schema(
    [
        ("finding_id", pa.string()),
        ("project", pa.string()),
        ("job", pa.string()),
        ("kind", pa.string()),
        ("signal", pa.string()),
        ("severity", pa.string()),
        ("worker", pa.string()),
        ("device", pa.string()),
        ("started", _MS),
        ("ended", _MS),
        ("opened", _MS),
        ("updated", _MS),
        ("resolved", _MS),
        ("evidence", pa.string()),
        ("version", pa.uint64()),
    ]
)
_CLAIM_ROW = pa.schema([("name", pa.string()), ("claim", pa.string())])
_COLUMNS = """finding_id, project, job, kind, signal, severity, worker, device,
    toUnixTimestamp64Milli(started) AS started, toUnixTimestamp64Milli(ended) AS ended,
    toUnixTimestamp64Milli(opened) AS opened, toUnixTimestamp64Milli(updated) AS updated,
    toUnixTimestamp64Milli(resolved) AS resolved, evidence"""
MAX_LIST = 1000


@dataclass
class Finding:
    """What a detector found on a job: ``started``/``ended`` bound the condition in the data (``ended`` None while it
    holds); ``opened``/``updated``/``resolved`` are when the server stored, last changed and resolved the finding."""

    finding_id: str
    project: str
    job: str
    kind: str
    signal: str
    severity: str
    worker: str
    device: str
    started: int
    ended: int | None
    opened: int
    updated: int
    resolved: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What makes two findings of a job the same condition: kind, signal, worker and device."""
        return self.kind, self.signal, self.worker, self.device

    @property
    def status(self) -> str:
        return "open" if self.ended is None else "resolved"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status}


def _finding(row: dict[str, Any]) -> Finding:
    return Finding(**{**row, "evidence": orjson.loads(row["evidence"] or "{}")})


class Findings:
    def __init__(self, engine: Engine, db: str) -> None:
        self._engine = engine
        self._db = db

    def write(self, findings: list[Finding]) -> None:
        """Store each finding as its newest state."""
        if not findings:
            return
        version = time.time_ns()
        rows = []
        for number, one in enumerate(findings):
            row = {**asdict(one), "evidence": orjson.dumps(one.evidence).decode(), "version": version + number}
            rows.append(row)
        self._engine.insert(f"{self._db}.insight_findings", pa.Table.from_pylist(rows, schema=_FINDING_ROW))

    def current(self, jobs: list[str], since_ms: int) -> list[Finding]:
        """The findings of ``jobs`` that are open or ended at or after ``since_ms``: those an evaluation of data
        from ``since_ms`` on may continue."""
        if not jobs:
            return []
        rows = self._engine.query(
            f"""SELECT * FROM (SELECT {_COLUMNS} FROM {self._db}.insight_findings FINAL
                WHERE job IN {{jobs:Array(String)}})
            WHERE ended IS NULL OR ended >= {{since:Int64}} ORDER BY job, started, finding_id""",
            {"jobs": jobs, "since": since_ms},
        ).to_pylist()
        return [_finding(row) for row in rows]

    def of_job(self, job: str, status: str | None = None) -> list[Finding]:
        """The findings of ``job``, oldest first; ``status`` 'open' or 'resolved' keeps those only."""
        rows = self._engine.query(
            f"""SELECT * FROM (SELECT {_COLUMNS} FROM {self._db}.insight_findings FINAL WHERE job = {{job:String}})
            WHERE {_status_condition(status)} ORDER BY started, finding_id LIMIT {MAX_LIST}""",
            {"job": job},
        ).to_pylist()
        return [_finding(row) for row in rows]

    def of_project(
        self, project: str, *, status: str | None = None, kind: str | None = None, limit: int = 100
    ) -> list[Finding]:
        """The findings of the jobs of ``project`` that exist, newest first."""
        where = [_status_condition(status)]
        params: dict[str, Any] = {"project": project, "limit": limit}
        if kind:
            where.append("kind = {kind:String}")
            params["kind"] = kind
        rows = self._engine.query(
            f"""SELECT * FROM (SELECT {_COLUMNS} FROM {self._db}.insight_findings FINAL
                WHERE project = {{project:String}})
            WHERE {" AND ".join(where)} AND job IN (
                SELECT job FROM {self._db}.jobs FINAL WHERE project = {{project:String}} AND deleted = 0)
            ORDER BY started DESC, finding_id LIMIT {{limit:UInt32}}""",
            params,
        ).to_pylist()
        return [_finding(row) for row in rows]

    def open_counts(self, jobs: list[str]) -> dict[str, dict[str, int]]:
        """Per job of ``jobs`` with open findings: how many, by severity."""
        if not jobs:
            return {}
        rows = self._engine.query(
            f"""SELECT job, severity, count() AS n FROM (
                SELECT job, severity, ended FROM {self._db}.insight_findings FINAL WHERE job IN {{jobs:Array(String)}})
            WHERE ended IS NULL GROUP BY job, severity""",
            {"jobs": jobs},
        ).to_pylist()
        counts: dict[str, dict[str, int]] = {}
        for row in rows:
            counts.setdefault(row["job"], {})[row["severity"]] = int(row["n"])
        return counts

    def jobs_with_open(self) -> list[str]:
        """Every job with an open finding (a job that ended since it was last evaluated has some to resolve)."""
        rows = self._engine.query(
            f"""SELECT DISTINCT job FROM (SELECT job, ended FROM {self._db}.insight_findings FINAL)
            WHERE ended IS NULL"""
        )
        return rows.column("job").to_pylist()

    def claim(self, name: str, stale_ms: int | None = None) -> bool:
        """True when this caller holds the claim ``name``: its claim is the earliest, or (with ``stale_ms``) the
        earliest is older than ``stale_ms`` (a replica that claimed and stopped before it acted)."""
        token = secrets.token_hex(16)
        self._engine.insert(
            f"{self._db}.insight_claims",
            pa.Table.from_pylist([{"name": name, "claim": token}], schema=_CLAIM_ROW),
            kept_once("insight-claim", name),
        )
        first = self._engine.query(
            f"""SELECT claim, toUnixTimestamp64Milli(now64(6)) - toUnixTimestamp64Milli(claimed) AS age
            FROM {self._db}.insight_claims WHERE name = {{name:String}} ORDER BY claimed, claim LIMIT 1""",
            {"name": name},
        ).to_pylist()
        if not first:
            return False
        if first[0]["claim"] == token:
            return True
        return stale_ms is not None and int(first[0]["age"]) > stale_ms


def _status_condition(status: str | None) -> str:
    if status == "open":
        return "ended IS NULL"
    if status == "resolved":
        return "ended IS NOT NULL"
    return "1"
