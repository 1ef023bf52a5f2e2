"""Timing one call again and again, the way the latency benchmarks do."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np


def timed(call: Callable[[], object], repeats: int, warmup: int, pause: float = 0.0) -> np.ndarray:
    """Milliseconds of each of ``repeats`` calls after ``warmup`` untimed ones, ``pause`` seconds before each."""
    for _ in range(warmup):
        call()
    out = np.empty(repeats)
    for i in range(repeats):
        time.sleep(pause)
        started = time.perf_counter()
        call()
        out[i] = time.perf_counter() - started
    return out * 1000
