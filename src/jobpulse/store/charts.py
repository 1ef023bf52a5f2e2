"""A memory of recent charts, each valid while the version of the series it was drawn from holds."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any


class ChartCache:
    """Least-recently-used charts keyed by their request; an entry answers only for the version it was
    built at (read from the store on every request, so a write through any replica is seen at once)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[tuple, tuple[Any, dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple, version: Any) -> dict[str, Any] | None:
        """A copy of the chart kept for ``key`` if it was built at ``version``, else None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != version:
                return None
            self._entries.move_to_end(key)
            return self.copy(entry[1])

    def put(self, key: tuple, version: Any, chart: dict[str, Any]) -> None:
        if self._size <= 0:
            return
        with self._lock:
            self._entries[key] = (version, chart)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    @staticmethod
    def copy(chart: dict[str, Any]) -> dict[str, Any]:
        """A copy its caller may change at the top and series level (the lists are shared, never changed)."""
        return {**chart, "series": [dict(series) for series in chart["series"]]}
