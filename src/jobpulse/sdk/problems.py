"""Reports of bad input and delivery trouble: one stderr line per kind of problem.

The SDK never raises into the training loop and never uses ``warnings`` (which a test
suite may turn into errors): the first problem of each kind is printed to the
process's real stderr, later ones of the same kind are only counted.
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO


class Problems:
    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def stream(self) -> TextIO | None:
        """The given stream, else the current sys.stderr (past a console capture's tee)."""
        stream = self._stream or sys.stderr or sys.__stderr__
        return getattr(stream, "wrapped", stream)

    def __call__(self, kind: str, message: str) -> None:
        with self._lock:
            first = kind not in self.counts
            self.counts[kind] = self.counts.get(kind, 0) + 1
        if first:
            self.say(f"{message} (reported once)")

    def say(self, message: str) -> None:
        """Print one line to the real stderr, never raising."""
        stream = self.stream()
        if stream is None:
            return
        try:
            stream.write(f"jobpulse: {message}\n")
            stream.flush()
        except (OSError, ValueError):
            pass
