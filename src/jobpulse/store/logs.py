"""Console logs: head, tail, paging from a position, filters, search and sizes.

A line's position is (ts, worker, seq): a total order, so paging from a position never
skips or repeats a line, even when many lines share one millisecond.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..errors import BadRequest
from .engine import Engine

LEVELS = ("debug", "info", "warning", "error", "critical")
MAX_LINES = 100_000
Position = tuple[int, str, int]


@dataclass(frozen=True)
class LogFilter:
    workers: tuple[str, ...] = ()
    levels: tuple[str, ...] = ()
    search: str = ""
    since_ms: int | None = None
    until_ms: int | None = None


def _like_pattern(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class Logs:
    def __init__(self, engine: Engine, db: str) -> None:
        self._engine = engine
        self._db = db

    def read(
        self,
        job: str,
        *,
        direction: Literal["forward", "backward"] = "forward",
        position: Position | None = None,
        limit: int = 500,
        where: LogFilter = LogFilter(),
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` lines after (forward) or before (backward) ``position``, oldest first.

        With no position, forward reads from the first line and backward from the last.
        """
        if not 1 <= limit <= MAX_LINES:
            raise BadRequest(f"'limit' must be between 1 and {MAX_LINES}", field="limit")
        clauses, params = self._filter(job, where)
        if position is not None:
            op, bound = (">", ">=") if direction == "forward" else ("<", "<=")
            clauses.append(f"ts {bound} fromUnixTimestamp64Milli({{pts:Int64}}) AND "
                           f"(ts, worker, seq) {op} (fromUnixTimestamp64Milli({{pts:Int64}}), {{pw:String}}, {{ps:UInt64}})")
            params.update(pts=position[0], pw=position[1], ps=position[2])
        order = "ASC" if direction == "forward" else "DESC"
        params["limit"] = limit
        rows = self._engine.query(
            f"""SELECT toUnixTimestamp64Milli(ts) AS ts, worker, seq, level, msg FROM {self._db}.logs
            WHERE {' AND '.join(clauses)}
            ORDER BY ts {order}, worker {order}, seq {order}
            LIMIT 1 BY ts, worker, seq LIMIT {{limit:UInt32}}""",
            params,
        ).to_pylist()
        if direction == "backward":
            rows.reverse()
        return rows

    def count(self, job: str, where: LogFilter = LogFilter()) -> int:
        clauses, params = self._filter(job, where)
        table = self._engine.query(
            f"SELECT count() AS n FROM (SELECT 1 FROM {self._db}.logs WHERE {' AND '.join(clauses)} "
            "LIMIT 1 BY ts, worker, seq)",
            params,
        )
        return int(table.column("n")[0].as_py())

    def workers(self, job: str) -> list[dict[str, Any]]:
        """Workers that have log lines, with their line count and size in bytes (a newline per line)."""
        return self._engine.query(
            f"SELECT worker, sum(lines) AS lines, sum(bytes) AS bytes FROM {self._db}.log_sizes "
            "WHERE job = {job:String} GROUP BY worker ORDER BY length(worker), worker",
            {"job": job},
        ).to_pylist()

    def tail_bytes(self, job: str, worker: str, max_bytes: int) -> tuple[str, int]:
        """The latest whole lines of one worker's log that fit in ``max_bytes`` (UTF-8, newline-joined),
        and the full size of the log in bytes."""
        sizes = {row["worker"]: row["bytes"] for row in self.workers(job)}
        full = int(sizes.get(worker, 0))
        chunks: list[str] = []
        used = 0
        position: Position | None = None
        done = False
        while not done:
            rows = self.read(job, direction="backward", position=position, limit=20_000,
                             where=LogFilter(workers=(worker,)))
            if not rows:
                break
            for row in reversed(rows):
                size = len(row["msg"].encode()) + 1
                if used + size - 1 > max_bytes:
                    done = True
                    break
                chunks.append(row["msg"])
                used += size
            position = (rows[0]["ts"], rows[0]["worker"], rows[0]["seq"])
            if len(rows) < 20_000:
                break
        chunks.reverse()
        text = "\n".join(chunks)
        return text, max(full, len(text.encode()))

    def _filter(self, job: str, where: LogFilter) -> tuple[list[str], dict[str, Any]]:
        clauses = ["job = {job:String}"]
        params: dict[str, Any] = {"job": job}
        if where.workers:
            clauses.append("worker IN {workers:Array(String)}")
            params["workers"] = list(where.workers)
        if where.levels:
            bad = [lvl for lvl in where.levels if lvl not in LEVELS]
            if bad:
                raise BadRequest(f"'level' must be among {', '.join(LEVELS)}, got {bad[0]!r}", field="level")
            clauses.append("level IN {levels:Array(String)}")
            params["levels"] = list(where.levels)
        if where.search:
            clauses.append("lower(msg) LIKE {pattern:String}")
            params["pattern"] = _like_pattern(where.search)
        if where.since_ms is not None:
            clauses.append("ts >= fromUnixTimestamp64Milli({since:Int64})")
            params["since"] = where.since_ms
        if where.until_ms is not None:
            clauses.append("ts <= fromUnixTimestamp64Milli({until:Int64})")
            params["until"] = where.until_ms
        return clauses, params
