"""Replaying spooled requests: this worker's own backlog, and what dead processes left.

A spooled request is sent again byte for byte (same events, same ts and seq), and its
file is removed only after the server answered it. Each file is locked while it is sent
(see ``jobpulse.sdk.spool``), so two live processes never send the same file.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from jobpulse.sdk import spool as sp

if TYPE_CHECKING:
    from jobpulse.sdk.sender import Sender


def replay_backlog(sender: Sender, budget: float) -> None:
    """Send this worker's spooled requests, oldest first, until one fails or the budget is spent."""
    end = time.monotonic() + budget
    while sender.backlog and time.monotonic() < end and not sender.spool_only:
        entry = sp.take(sender.backlog[0])
        if entry is None or entry.url != sender.url:
            if entry is not None:
                sp.put_back(entry)
            sender.backlog.popleft()
            continue
        if sender.send(entry.request) is None:
            sp.put_back(entry)
            return
        sender.spool.forget(entry)
        sp.done(entry)
        sender.backlog.popleft()


def replay_orphans(sender: Sender, budget: float) -> None:
    """Send what dead processes left in other spool directories, each under its owner lock."""
    end = time.monotonic() + budget
    while sender.orphans and time.monotonic() < end and not sender.spool_only:
        directory = sender.orphans[0]
        fd = sp.claim_dir(directory)
        if fd is None:  # its process is alive and will send it
            sender.orphans.pop(0)
            continue
        try:
            finished = _replay_dir(sender, directory, end)
        finally:
            sp.release_dir(directory, fd, remove=True)
        if not finished:
            return
        sender.orphans.pop(0)


def _replay_dir(sender: Sender, directory: Path, end: float) -> bool:
    """Replay one left-over directory; False when stopped early (budget, server down)."""
    for path in sp.spool_files(directory):
        if time.monotonic() >= end or sender.spool_only:
            return False
        entry = sp.take(path)
        if entry is None:
            continue
        if entry.url != sender.url:
            sp.put_back(entry)
            continue
        if sender.send(entry.request) is None:
            sp.put_back(entry)
            return False
        sp.done(entry)
    return True
