"""Jobs recorded on a real H100 (``tests/agent/data/README.md``): their spools synced to a real server, and the
thresholds scaled to runs of a few minutes."""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jobpulse.cli import main
from jobpulse.client import Client
from jobpulse.credentials import Credentials
from jobpulse.testing import running_server

DATA = Path(__file__).parent.parent / "agent" / "data"
MINUTE = 60_000
# The shortest durations the thresholds allow (the recordings last one to a few minutes), no warm-up (the runs
# begin with their idle phase); the utilization levels are the defaults.
SCALED = {
    "warmup_s": 0,
    "resolve_after_s": 60,
    "idle_min_s": 60,
    "underused_window_s": 60,
    "straggler_min_s": 60,
    "hang_min_s": 60,
    "spike_window_s": 180,
    "hardware_min_s": 60,
    "lost_after_s": 60,
}


@contextmanager
def synced(spools: tuple[str, ...], folder: Path) -> Iterator[Client]:
    """A started server holding the recorded ``spools`` (sent with ``jobpulse sync``), and a client of it."""
    with running_server() as server:
        for i, name in enumerate(spools):
            spool = folder / f"spool-{i}"
            with tarfile.open(DATA / name) as archive:
                archive.extractall(spool, filter="data")
            argv = ["sync", "--spool-dir", str(spool / "spool"), "--url", server.url, "--api-key", server.api_key]
            assert main([*argv, "--any-url"]) == 0
        yield Client(Credentials(server.url, server.api_key), timeout=30)


def evaluate(api: Client, job: str) -> list[dict[str, Any]]:
    """The job's findings, evaluated now."""
    return api.request("POST", f"/jp/v1/jobs/{job}/insights/evaluate")["findings"]


def of_kind(findings: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [f for f in findings if f["kind"] == kind]
