"""Network receive/transmit rates: ``net_rx_Bps``, ``net_tx_Bps`` (bytes per second).

Read from ``/proc/net/dev``, which shows the interfaces of the reading process's network
namespace, so a container or pod sees only its own traffic. Loopback is excluded. Rates are
summed over interfaces, each interface's counters tracked on their own, so one interface being
re-created (its counters reset) does not spoil the others.
"""

from __future__ import annotations

import os
from pathlib import Path

from jobpulse.agent.base import CounterRates, Sample, read_text


def parse_net_dev(text: str) -> dict[str, tuple[int, int]]:
    """``{interface: (rx_bytes, tx_bytes)}`` from the text of ``/proc/net/dev``."""
    out: dict[str, tuple[int, int]] = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        if not sep or "|" in line:
            continue
        fields = rest.split()
        if len(fields) < 9:
            continue
        try:
            out[name.strip()] = (int(fields[0]), int(fields[8]))
        except ValueError:
            continue
    return out


class NetworkCollector:
    def __init__(
        self,
        proc_root: str | os.PathLike[str] = "/proc",
        pid: int | str = "self",
        exclude: tuple[str, ...] = ("lo",),
    ) -> None:
        self.path = Path(proc_root) / str(pid) / "net" / "dev"
        self.exclude = set(exclude)
        self._rx = CounterRates()
        self._tx = CounterRates()

    def collect(self, now: float) -> list[Sample]:
        text = read_text(self.path)
        if text is None:
            return []
        counters = {k: v for k, v in parse_net_dev(text).items() if k not in self.exclude}
        rx = self._rx.update(now, {k: v[0] for k, v in counters.items()})
        tx = self._tx.update(now, {k: v[1] for k, v in counters.items()})
        out: list[Sample] = []
        if rx is not None:
            out.append(Sample("net_rx_Bps", "", rx))
        if tx is not None:
            out.append(Sample("net_tx_Bps", "", tx))
        return out
