"""Group commit: concurrent requests share one insert, and each is answered once its rows are stored."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa

from ..store.writer import Writer


@dataclass
class CommitStats:
    requests: int = 0
    commits: int = 0
    rows: int = 0


class CommitObserver(Protocol):
    """Told of every commit: how long it took and the rows stored per table, or that it failed."""

    def committed(self, seconds: float, written: dict[str, int]) -> None: ...

    def failed(self, seconds: float) -> None: ...


class Committer:
    """Queues the tables of each request; one flusher at a time writes everything queued so far.

    ``waiting_requests`` and ``waiting_rows`` are the queue depth: what is queued or being written and not yet
    acknowledged; ``observer`` (the server's metrics) is told of each commit."""

    def __init__(self, writer: Writer, observer: CommitObserver | None = None) -> None:
        self._writer = writer
        self._observer = observer
        self._pending: list[tuple[dict[str, pa.Table], asyncio.Future]] = []
        self._flusher: asyncio.Task | None = None
        self.stats = CommitStats()
        self.waiting_requests = 0
        self.waiting_rows = 0

    async def commit(self, tables: dict[str, pa.Table]) -> None:
        """Store ``tables``; returns when they are stored, raises what the store raised otherwise."""
        future = asyncio.get_running_loop().create_future()
        self._pending.append((tables, future))
        self.stats.requests += 1
        self.waiting_requests += 1
        self.waiting_rows += _rows(tables)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        await asyncio.shield(future)

    async def _flush(self) -> None:
        while self._pending:
            group, self._pending = self._pending, []
            try:
                await self._write(group)
            finally:
                self.waiting_requests -= len(group)
                self.waiting_rows -= sum(_rows(tables) for tables, _ in group)

    async def _write(self, group: list[tuple[dict[str, pa.Table], asyncio.Future]]) -> None:
        """One insert of every table of ``group``; each waiter learns its outcome."""
        started = time.perf_counter()
        try:
            written = await asyncio.to_thread(self._writer.write, _merge(group))
        except Exception as exc:  # every waiter learns that nothing of its request is acknowledged
            if self._observer is not None:
                self._observer.failed(time.perf_counter() - started)
            for _, future in group:
                if not future.done():
                    future.set_exception(exc)
            return
        if self._observer is not None:
            self._observer.committed(time.perf_counter() - started, written)
        self.stats.commits += 1
        self.stats.rows += sum(written.values())
        for _, future in group:
            if not future.done():
                future.set_result(None)


def _merge(group: list[tuple[dict[str, pa.Table], asyncio.Future]]) -> dict[str, pa.Table]:
    """One table per name holding the rows of every request of ``group``."""
    merged: dict[str, list[pa.Table]] = {}
    for tables, _ in group:
        for name, table in tables.items():
            if table.num_rows:
                merged.setdefault(name, []).append(table)
    return {name: pa.concat_tables(parts) for name, parts in merged.items()}


def _rows(tables: dict[str, pa.Table]) -> int:
    return sum(table.num_rows for table in tables.values())
