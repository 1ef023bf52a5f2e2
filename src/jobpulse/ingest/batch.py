"""The good events of one request, as table columns, and the count of the bad ones per reason."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..store.columns import SCHEMAS, columns_to_arrow

MAX_EXAMPLES = 10


@dataclass
class Batch:
    """The good events of one request, as columns per table, and what was wrong with the rest."""

    columns: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # single events (JSON lines)
    frames: dict[str, list[pa.Table]] = field(default_factory=dict)  # whole JSON-lines bodies, built at once
    jobs: dict[str, str | None] = field(default_factory=dict)  # job -> project named by the events
    workers: set[tuple[str, str]] = field(default_factory=set)
    first_ts: dict[str, int] = field(default_factory=dict)
    accepted: int = 0
    errors: Counter = field(default_factory=Counter)
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rejected(self) -> int:
        return sum(self.errors.values())

    def reject(self, index: int, reason: str, detail: str) -> None:
        self.errors[reason] += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append({"index": index, "reason": reason, "detail": detail})

    def add(self, table: str, chunk: dict[str, Any], job: str, project: str | None, worker: str, ts0: int) -> None:
        ts = chunk["ts"]
        if isinstance(ts, list) and len(ts) == 1:  # one event of JSON lines: gathered as a row
            self.rows.setdefault(table, []).append({k: v[0] if isinstance(v, list) else v for k, v in chunk.items()})
        else:
            self.columns.setdefault(table, []).append(chunk)
        known = self.jobs.get(job)
        if known is None:
            self.jobs[job] = project
        if worker and table in ("logs", "system"):
            self.workers.add((job, worker))
        if ts0 < self.first_ts.get(job, 1 << 62):
            self.first_ts[job] = ts0

    def drop_job(self, job: str) -> int:
        """Remove every event of ``job`` (its project was refused); answers how many."""
        dropped = 0
        for table, chunks in self.columns.items():
            kept = []
            for chunk in chunks:
                if chunk["job"] == job:
                    dropped += _chunk_len(table, chunk)
                else:
                    kept.append(chunk)
            self.columns[table] = kept
        for table, rows in self.rows.items():
            kept_rows = [row for row in rows if row["job"] != job]
            dropped += len(rows) - len(kept_rows)
            self.rows[table] = kept_rows
        for table, frames in self.frames.items():
            kept_frames = []
            for frame in frames:
                rest = frame.filter(pc.not_equal(frame["job"], job))
                dropped += frame.num_rows - rest.num_rows
                kept_frames.append(rest)
            self.frames[table] = kept_frames
        self.jobs.pop(job, None)
        self.workers = {(j, w) for j, w in self.workers if j != job}
        self.accepted -= dropped
        return dropped

    def tables(self) -> dict[str, pa.Table]:
        parts: dict[str, list[pa.Table]] = {}
        for table, chunks in self.columns.items():
            parts.setdefault(table, []).extend(_to_arrow(table, c) for c in chunks)
        for table, rows in self.rows.items():
            if rows:
                parts.setdefault(table, []).append(pa.Table.from_pylist(rows, schema=SCHEMAS[table]))
        for table, frames in self.frames.items():
            parts.setdefault(table, []).extend(frame for frame in frames if frame.num_rows)
        return {table: pa.concat_tables(tables) for table, tables in parts.items() if tables}


def _chunk_len(table: str, chunk: dict) -> int:
    return len(chunk["ts"])


def _to_arrow(table: str, chunk: dict[str, Any]) -> pa.Table:
    return columns_to_arrow(table, chunk, rows=len(chunk["ts"]))
