"""Console logs: head, tail, paging from a position, filters, search and sizes.

A line's position is (ts, worker, seq): a total order, so paging from a position never
skips or repeats a line, even when many lines share one millisecond. The few lines that name a
metric, variant or iteration (ClearML log events may) keep them in ``log_fields``, by position.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import BadRequest
from .changes import Changes
from .engine import Engine

LEVELS = ("debug", "info", "warning", "error", "critical")
MAX_LINES = 100_000
Position = tuple[int, str, int]


@dataclass(frozen=True)
class LogFilter:
    """Which lines to read: ``metrics`` keeps the lines that name one of its (metric, variants) pairs (no variants:
    any variant of the metric), ``without_metrics`` leaves out the lines that name one of its metrics."""

    workers: tuple[str, ...] = ()
    levels: tuple[str, ...] = ()
    search: str = ""
    since_ms: int | None = None
    until_ms: int | None = None
    metrics: tuple[tuple[str, tuple[str, ...]], ...] = ()
    without_metrics: tuple[str, ...] = ()


def _like_pattern(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class Logs:
    def __init__(self, engine: Engine, db: str, changes: Changes) -> None:
        self._engine = engine
        self._db = db
        self._changes = changes

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
            clauses.append(
                f"ts {bound} fromUnixTimestamp64Milli({{pts:Int64}}) AND "
                f"(ts, worker, seq) {op} (fromUnixTimestamp64Milli({{pts:Int64}}), {{pw:String}}, {{ps:UInt64}})"
            )
            params.update(pts=position[0], pw=position[1], ps=position[2])
        order = "ASC" if direction == "forward" else "DESC"
        # Reading in the table's order with a plain LIMIT lets the engine stop early; the rare
        # duplicate of a racing resend is adjacent in that order and dropped here.
        params["limit"] = limit + 16
        rows = self._engine.query(
            f"""SELECT toUnixTimestamp64Milli(ts) AS ts, worker, seq, level, msg FROM {self._db}.logs
            WHERE {" AND ".join(clauses)}
            ORDER BY ts {order}, worker {order}, seq {order} LIMIT {{limit:UInt32}}""",
            params,
        ).to_pylist()
        unique = [
            row
            for i, row in enumerate(rows)
            if i == 0
            or (row["ts"], row["worker"], row["seq"]) != (rows[i - 1]["ts"], rows[i - 1]["worker"], rows[i - 1]["seq"])
        ]
        if len(unique) < len(rows) and len(unique) < limit and len(rows) == limit + 16:
            return self._read_distinct(job, direction, position, limit, where)
        unique = unique[:limit]
        if direction == "backward":
            unique.reverse()
        return unique

    def _read_distinct(
        self, job: str, direction: str, position: Position | None, limit: int, where: LogFilter
    ) -> list[dict[str, Any]]:
        """The slow, exact read for a page crowded with duplicates."""
        clauses, params = self._filter(job, where)
        if position is not None:
            op = ">" if direction == "forward" else "<"
            clauses.append(
                f"(ts, worker, seq) {op} (fromUnixTimestamp64Milli({{pts:Int64}}), {{pw:String}}, {{ps:UInt64}})"
            )
            params.update(pts=position[0], pw=position[1], ps=position[2])
        order = "ASC" if direction == "forward" else "DESC"
        params["limit"] = limit
        rows = self._engine.query(
            f"""SELECT toUnixTimestamp64Milli(ts) AS ts, worker, seq, level, msg FROM {self._db}.logs
            WHERE {" AND ".join(clauses)}
            ORDER BY ts {order}, worker {order}, seq {order} LIMIT 1 BY ts, worker, seq LIMIT {{limit:UInt32}}""",
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

    def tail_bytes(self, job: str, worker: str | tuple[str, ...], max_bytes: int) -> tuple[str, int]:
        """The latest whole lines of one worker's log (or of several workers' logs merged in time order) that fit
        in ``max_bytes`` (UTF-8, newline-joined), and the full size of the log in bytes.

        Reads only a time window at the end of the log, sized from the log's mean rate and corrected by a
        count over the primary key, so the cost depends on ``max_bytes``, not on the size of the log or on
        how many parts it is stored in; the kept lines are cut out of the read buffer in one piece.
        """
        names = (worker,) if isinstance(worker, str) else worker
        found = [row for row in self.workers(job) if row["worker"] in names and row["lines"]]
        if not found:
            return "", 0
        full = sum(int(row["bytes"]) for row in found)
        where = f"FROM {self._db}.logs WHERE job = {{job:String}} AND worker IN {{workers:Array(String)}}"
        params: dict[str, Any] = {"job": job, "workers": [row["worker"] for row in found]}
        ends = self._engine.query(
            f"SELECT (SELECT toUnixTimestamp64Milli(ts) {where} ORDER BY ts ASC LIMIT 1) AS first, "
            f"(SELECT toUnixTimestamp64Milli(ts) {where} ORDER BY ts DESC LIMIT 1) AS last",
            params,
        ).to_pylist()[0]
        if ends["first"] is None or ends["last"] is None:
            return "", full
        first, last = int(ends["first"]), int(ends["last"])
        window = max(1, int((last - first + 1) * min(1.0, 1.5 * max_bytes / max(1, full))))
        for _ in range(12):  # aim at a window holding between max_bytes and a few times more
            lo = max(first, last - window + 1)
            held = (
                self._engine.query(
                    f"SELECT sum(length(msg) + 1) AS bytes {where} AND ts >= fromUnixTimestamp64Milli({{lo:Int64}})",
                    {**params, "lo": lo},
                )
                .column("bytes")[0]
                .as_py()
                or 0
            )
            if held <= max_bytes and lo > first:
                window = int(window * max(2.0, 1.5 * max_bytes / max(1, held)))
            elif held > 4 * max_bytes and window > 1:
                window = max(1, int(window * 1.5 * max_bytes / held))
            else:
                break
        table = self._engine.query(
            f"SELECT toUnixTimestamp64Milli(ts) AS ts, worker, seq, concat(msg, '\\n') AS line {where} "
            "AND ts >= fromUnixTimestamp64Milli({lo:Int64}) ORDER BY ts, worker, seq",
            {**params, "lo": lo},
        )
        lines = table.column("line").combine_chunks()
        ts, seq = table.column("ts").to_numpy(), table.column("seq").to_numpy()
        again = (ts[1:] == ts[:-1]) & (seq[1:] == seq[:-1])  # a row stored twice comes twice in a row
        if again.any() and len(found) > 1:
            who = table.column("worker").to_numpy(zero_copy_only=False)
            again &= who[1:] == who[:-1]
        if again.any():
            lines = lines.filter(pa.array(np.concatenate([[True], ~again])))
        used = np.cumsum(pc.binary_length(lines).to_numpy(zero_copy_only=False)[::-1])  # newest first
        fits = int(np.searchsorted(used, max_bytes + 1, side="right"))
        if not fits:
            return "", full
        # The kept lines lie one after another in the values buffer: cut it out, no per-line work.
        wide = pa.types.is_large_string(lines.type) or pa.types.is_large_binary(lines.type)
        offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64 if wide else np.int32)[lines.offset :]
        start, end = int(offsets[len(lines) - fits]), int(offsets[len(lines)])
        text = lines.buffers()[2][start : end - 1].to_pybytes().decode(errors="replace")
        return text, max(full, int(used[fits - 1]) - 1)

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
        lines_of = f"SELECT ts, worker, seq FROM {self._db}.log_fields WHERE job = {{job:String}}"
        named = f"(ts, worker, seq) IN ({lines_of} AND "
        if where.metrics:
            clauses.append(
                named + "(metric IN {lm_any:Array(String)} "
                "OR (metric, variant) IN {lm_pairs:Array(Tuple(String, String))}))"
            )
            params["lm_any"] = [metric for metric, variants in where.metrics if not variants]
            params["lm_pairs"] = [(metric, v) for metric, variants in where.metrics for v in variants]
        if where.without_metrics:
            clauses.append("NOT " + named + "metric IN {lm_out:Array(String)})")
            params["lm_out"] = list(where.without_metrics)
        return clauses, params

    def fields(self, job: str, lines: list[dict[str, Any]]) -> dict[Position, dict[str, Any]]:
        """The metric, variant and iteration of those of ``lines`` (rows with ts, worker and seq) that name any,
        by position; one read over the time range of the lines."""
        if not lines:
            return {}
        stamps = [line["ts"] for line in lines]
        rows = self._engine.query(
            f"""SELECT toUnixTimestamp64Milli(ts) AS ts, worker, seq, metric, variant, iter
            FROM {self._db}.log_fields FINAL WHERE job = {{job:String}}
                AND ts BETWEEN fromUnixTimestamp64Milli({{lo:Int64}}) AND fromUnixTimestamp64Milli({{hi:Int64}})""",
            {"job": job, "lo": min(stamps), "hi": max(stamps)},
        ).to_pylist()
        wanted = {(line["ts"], line["worker"], line["seq"]) for line in lines}
        out: dict[Position, dict[str, Any]] = {}
        for row in rows:
            position = (row["ts"], row["worker"], row["seq"])
            if position in wanted:
                out[position] = {"metric": row["metric"], "variant": row["variant"], "iter": row["iter"]}
        return out

    def metrics(self, jobs: list[str], *, with_iter: bool = False) -> dict[str, list[tuple[str, str]]]:
        """The (metric, variant) pairs each of ``jobs`` named in log lines (``with_iter``: in lines that also
        name an iteration), sorted."""
        if not jobs:
            return {}
        rows = self._engine.query(
            f"""SELECT DISTINCT job, metric, variant FROM {self._db}.log_fields FINAL
            WHERE job IN {{jobs:Array(String)}}{" AND iter IS NOT NULL" if with_iter else ""}
            ORDER BY job, metric, variant""",
            {"jobs": list(jobs)},
        ).to_pylist()
        out: dict[str, list[tuple[str, str]]] = {}
        for row in rows:
            out.setdefault(row["job"], []).append((row["metric"], row["variant"]))
        return out

    def delete(self, job: str, before_ms: int | None = None, where: LogFilter = LogFilter()) -> int:
        """Delete a job's lines older than ``before_ms`` (all when None) among those ``where`` picks (its metric
        filters); answers how many were deleted."""
        if before_ms is not None:
            where = replace(where, until_ms=before_ms - 1)
        deleted = self.count(job, where)
        if not deleted:
            return 0
        clauses, params = self._filter(job, where)
        try:
            self._delete(job, clauses, params)
        finally:
            self._changes.note([job], deleted=True)
        return deleted

    def _delete(self, job: str, clauses: list[str], params: dict[str, Any]) -> None:
        # the lines' fields first: a line whose fields are gone reads as a line without any, never the reverse
        self._engine.command(
            f"DELETE FROM {self._db}.log_fields WHERE (ts, worker, seq) IN "
            f"(SELECT ts, worker, seq FROM {self._db}.logs WHERE {' AND '.join(clauses)}) AND job = {{job:String}}",
            params,
        )
        self._engine.command(f"DELETE FROM {self._db}.logs WHERE {' AND '.join(clauses)}", params)
        # The per-worker sizes are sums kept by a materialized view: recompute the job's from what is left.
        self._engine.command(f"DELETE FROM {self._db}.log_sizes WHERE job = {{job:String}}", {"job": job})
        self._engine.command(
            f"""INSERT INTO {self._db}.log_sizes SELECT job, worker, sum(length(msg) + 1), count()
            FROM (SELECT job, worker, msg FROM {self._db}.logs WHERE job = {{job:String}}
                  LIMIT 1 BY ts, worker, seq)
            GROUP BY job, worker""",
            {"job": job},
        )
