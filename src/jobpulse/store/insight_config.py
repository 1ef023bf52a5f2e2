"""What a project configures for insights: detector thresholds, and webhook destinations with what was sent to them."""

from __future__ import annotations

import secrets
import time
from dataclasses import asdict, dataclass
from typing import Any

import orjson
import pyarrow as pa

from .engine import Engine

_MS = pa.timestamp("ms", tz="UTC")
_SETTINGS_ROW = pa.schema([("project", pa.string()), ("thresholds", pa.string()), ("version", pa.uint64())])
_WEBHOOK_ROW = pa.schema(
    [
        ("project", pa.string()),
        ("webhook_id", pa.string()),
        ("name", pa.string()),
        ("url", pa.string()),
        ("format", pa.string()),
        ("created", _MS),
        ("deleted", pa.uint8()),
        ("version", pa.uint64()),
    ]
)
_DELIVERY_ROW = pa.schema(
    [
        ("webhook_id", pa.string()),
        ("finding_id", pa.string()),
        ("event", pa.string()),
        ("status", pa.string()),
        ("attempts", pa.uint32()),
        ("error", pa.string()),
        ("at", _MS),
    ]
)


@dataclass
class Webhook:
    project: str
    webhook_id: str
    name: str
    url: str
    format: str  # 'json' or 'slack'
    created: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class InsightConfig:
    def __init__(self, engine: Engine, db: str) -> None:
        self._engine = engine
        self._db = db

    # -- thresholds ------------------------------------------------------------------------------------

    def thresholds(self, projects: list[str]) -> dict[str, dict[str, Any]]:
        """The thresholds each of ``projects`` changed from the defaults (projects without any are absent)."""
        if not projects:
            return {}
        rows = self._engine.query(
            f"SELECT project, thresholds FROM {self._db}.insight_settings FINAL WHERE project IN {{p:Array(String)}}",
            {"p": projects},
        ).to_pylist()
        return {row["project"]: orjson.loads(row["thresholds"]) for row in rows}

    def set_thresholds(self, project: str, values: dict[str, Any]) -> None:
        row = {"project": project, "thresholds": orjson.dumps(values).decode(), "version": time.time_ns()}
        self._engine.insert(f"{self._db}.insight_settings", pa.Table.from_pylist([row], schema=_SETTINGS_ROW))

    # -- webhooks --------------------------------------------------------------------------------------

    def webhooks(self, project: str) -> list[Webhook]:
        rows = self._engine.query(
            f"""SELECT project, webhook_id, name, url, format, toUnixTimestamp64Milli(created) AS created, deleted
            FROM {self._db}.insight_webhooks FINAL WHERE project = {{project:String}} ORDER BY created, webhook_id""",
            {"project": project},
        ).to_pylist()
        return [Webhook(**{k: v for k, v in row.items() if k != "deleted"}) for row in rows if not row["deleted"]]

    def webhook(self, project: str, webhook_id: str) -> Webhook | None:
        return next((w for w in self.webhooks(project) if w.webhook_id == webhook_id), None)

    def add_webhook(self, project: str, name: str, url: str, fmt: str) -> Webhook:
        hook = Webhook(project, "wh_" + secrets.token_hex(8), name, url, fmt, time.time_ns() // 1_000_000)
        self._write_webhook(hook, deleted=False)
        return hook

    def delete_webhook(self, hook: Webhook) -> None:
        self._write_webhook(hook, deleted=True)

    def _write_webhook(self, hook: Webhook, *, deleted: bool) -> None:
        row = {**hook.to_dict(), "deleted": int(deleted), "version": time.time_ns()}
        self._engine.insert(f"{self._db}.insight_webhooks", pa.Table.from_pylist([row], schema=_WEBHOOK_ROW))

    # -- deliveries ------------------------------------------------------------------------------------

    def record_delivery(
        self, webhook_id: str, finding_id: str, event: str, status: str, attempts: int, error: str
    ) -> None:
        row = {
            "webhook_id": webhook_id,
            "finding_id": finding_id,
            "event": event,
            "status": status,
            "attempts": attempts,
            "error": error[:1000],
            "at": time.time_ns() // 1_000_000,
        }
        self._engine.insert(f"{self._db}.insight_deliveries", pa.Table.from_pylist([row], schema=_DELIVERY_ROW))

    def deliveries(self, webhook_id: str, limit: int = 100) -> list[dict[str, Any]]:
        """What was sent to ``webhook_id``, newest first."""
        return self._engine.query(
            f"""SELECT finding_id, event, status, attempts, error, toUnixTimestamp64Milli(at) AS at
            FROM {self._db}.insight_deliveries WHERE webhook_id = {{id:String}} ORDER BY at DESC LIMIT {{n:UInt32}}""",
            {"id": webhook_id, "n": limit},
        ).to_pylist()
