"""Inserts kept once: of callers inserting a row under one name at once, the engine stores the first and drops the
others (an insert deduplication token; in Keeper on a replicated table, under the table's own lock on one server).

A claim then reads back which row was stored. Timing claims by the store's clock alone is not enough: an insert
timed earlier may become visible after a later one was read back, and both claimants would find their own row
first. The table needs a deduplication window (``non_replicated_deduplication_window`` on one server; replicated
tables keep one by default): rows of a name inserted further apart than the window are both stored, and the claim's
read (the earliest row) decides between them.
"""

from __future__ import annotations

import hashlib


def kept_once(*name: str) -> dict[str, str]:
    """The insert settings under which a row named by the parts of ``name`` is stored once."""
    digest = hashlib.sha256("\0".join(name).encode()).hexdigest()
    return {"insert_deduplication_token": f"jobpulse-once-{digest}"}
