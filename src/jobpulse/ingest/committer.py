"""Group commit: concurrent requests share one insert, and each is answered once its rows are stored."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pyarrow as pa

from ..store.writer import Writer


@dataclass
class CommitStats:
    requests: int = 0
    commits: int = 0
    rows: int = 0


class Committer:
    """Queues the tables of each request; one flusher at a time writes everything queued so far."""

    def __init__(self, writer: Writer) -> None:
        self._writer = writer
        self._pending: list[tuple[dict[str, pa.Table], asyncio.Future]] = []
        self._flusher: asyncio.Task | None = None
        self.stats = CommitStats()

    async def commit(self, tables: dict[str, pa.Table]) -> None:
        """Store ``tables``; returns when they are stored, raises what the store raised otherwise."""
        future = asyncio.get_running_loop().create_future()
        self._pending.append((tables, future))
        self.stats.requests += 1
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        await asyncio.shield(future)

    async def _flush(self) -> None:
        while self._pending:
            group, self._pending = self._pending, []
            merged: dict[str, list[pa.Table]] = {}
            for tables, _ in group:
                for name, table in tables.items():
                    if table.num_rows:
                        merged.setdefault(name, []).append(table)
            combined = {name: pa.concat_tables(parts) for name, parts in merged.items()}
            try:
                written = await asyncio.to_thread(self._writer.write, combined)
            except Exception as exc:  # every waiter learns that nothing of its request is acknowledged
                for _, future in group:
                    if not future.done():
                        future.set_exception(exc)
                continue
            self.stats.commits += 1
            self.stats.rows += sum(written.values())
            for _, future in group:
                if not future.done():
                    future.set_result(None)
