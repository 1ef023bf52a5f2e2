"""A memory of recent answers (charts, series), each valid while the version it was computed at holds."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any


class Memory:
    """Least-recently-used answers keyed by their request; an entry answers only for the version it was
    computed at, so a caller that reads the version afresh on every request is never answered stale."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[tuple, tuple[Any, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple, version: Any) -> Any | None:
        """What was kept for ``key`` if it was computed at ``version``, else None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != version:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: tuple, version: Any, answer: Any) -> None:
        if self._size <= 0:
            return
        with self._lock:
            self._entries[key] = (version, answer)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)


def copy_series(answer: dict[str, Any]) -> dict[str, Any]:
    """A copy of a kept answer that its caller may change at the top and series level (the lists of values
    are shared and never changed)."""
    return {**answer, "series": [dict(series) for series in answer["series"]]}
