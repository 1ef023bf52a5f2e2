"""The good events of one request, as one Arrow frame per table, and the count of the bad ones per reason."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

MAX_EXAMPLES = 10


@dataclass
class Batch:
    """The good events of one request, as frames per table, and what was wrong with the rest."""

    frames: dict[str, list[pa.Table]] = field(default_factory=dict)
    jobs: dict[str, str | None] = field(default_factory=dict)  # job -> the first project its events name
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

    def drop_job(self, job: str) -> int:
        """Remove every event of ``job`` (its project was refused); answers how many."""
        dropped = 0
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
        """One table per name, of the frames that still hold rows."""
        parts = {table: [frame for frame in frames if frame.num_rows] for table, frames in self.frames.items()}
        return {table: pa.concat_tables(frames) for table, frames in parts.items() if frames}
