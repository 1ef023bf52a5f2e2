"""Sequence numbers of log lines.

The server keys a log line by (job, worker, ts, seq) and replaces a line that arrives
again with the same key, so a seq must be assigned once, when the line is captured, and
never reused for another line of the same worker, also not by a later process of the
same worker (a restarted rank would otherwise overwrite the first one's lines).

A seq is therefore the capture time in microseconds since the epoch, bumped by one when
that would not exceed the previous seq of this process: strictly increasing within a
process, and larger than every seq of an earlier process of the worker as long as that
process did not capture more than a million lines per second for a sustained time, or
the clock did not step back between the two. Microseconds since the epoch stay below
2^53 (exact in a JSON number and a JavaScript double) until the year 2255.

The seq travels in the encoded body, which is spooled and resent byte for byte, so a
resend carries the same seq and ts.
"""

from __future__ import annotations

import threading
import time


class SeqClock:
    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> tuple[int, int]:
        """(ts in epoch milliseconds, seq) for a line captured now."""
        now_us = time.time_ns() // 1000
        with self._lock:
            seq = now_us if now_us > self._last else self._last + 1
            self._last = seq
        return now_us // 1000, seq
