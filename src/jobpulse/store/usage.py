"""Storage used by one job: rows per kind and their share of each table's bytes on disk."""

from __future__ import annotations

from typing import Any

from .engine import Engine

_KINDS = {
    "scalars": "scalars",
    "events": "events",
    "logs": "logs",
    "system": "system",
    "system_1m": "system_1m",
    "system_1h": "system_1h",
}


class Usage:
    def __init__(self, engine: Engine, db: str) -> None:
        self._engine = engine
        self._db = db

    def job(self, job: str) -> dict[str, Any]:
        """Rows per kind for ``job`` and bytes: the job's share of its table's compressed size on disk."""
        counts = self._engine.query(
            " UNION ALL ".join(
                f"SELECT '{kind}' AS kind, count() AS rows FROM {self._db}.{table} WHERE job = {{job:String}}"
                for kind, table in _KINDS.items()
            ),
            {"job": job},
        ).to_pylist()
        parts = self._engine.query(
            "SELECT table, sum(rows) AS rows, sum(bytes_on_disk) AS bytes FROM system.parts "
            "WHERE database = {db:String} AND active GROUP BY table",
            {"db": self._db},
        ).to_pylist()
        totals = {p["table"]: p for p in parts}
        kinds: dict[str, dict[str, int]] = {}
        for row in counts:
            total = totals.get(_KINDS[row["kind"]])
            share = row["rows"] / total["rows"] if total and total["rows"] else 0.0
            kinds[row["kind"]] = {
                "rows": int(row["rows"]),
                "bytes": int(round(share * (total["bytes"] if total else 0))),
            }
        return {
            "job": job,
            "kinds": kinds,
            "rows": sum(k["rows"] for k in kinds.values()),
            "bytes": sum(k["bytes"] for k in kinds.values()),
        }
