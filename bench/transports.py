"""The transports a benchmark runs a real ``jobpulse server`` on: the embedded engine (chdb in the server's process),
or HTTP to the ClickHouse stand-in (chdb behind ClickHouse's HTTP interface; not a ClickHouse server)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from jobpulse.testing import ServerProcess, running_server
from jobpulse.testing_clickhouse import running_standin

LABELS = {"embedded": "embedded chdb", "standin": "HTTP to the ClickHouse stand-in (chdb)"}


@contextmanager
def server_on(transport: str) -> Iterator[tuple[ServerProcess, str]]:
    """A started server on ``transport`` (``embedded`` or ``standin``) and the transport's label; stopped at the end."""
    if transport not in LABELS:
        raise SystemExit(f"unknown transport {transport!r}: {' or '.join(LABELS)}")
    with ExitStack() as stack:
        extra = ["--store", stack.enter_context(running_standin())] if transport == "standin" else []
        yield stack.enter_context(running_server(extra_args=extra)), LABELS[transport]
