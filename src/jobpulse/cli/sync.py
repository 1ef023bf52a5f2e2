"""``jobpulse sync``: send what the spool kept while the server could not be reached."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..credentials import load_credentials
from .options import client_options


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``sync`` command."""
    sync = sub.add_parser(
        "sync",
        help="send the requests kept in the spool while the server could not be reached",
        description="Send what the SDK, `jobpulse run` and `jobpulse agent` kept in the spool while the server "
        "could not be reached, oldest first, removing each request once the server has it. Directories "
        "a running process writes are left to it. Exits 1 when something could not be sent.",
    )
    sync.add_argument(
        "--spool-dir", type=Path, help="the spool (default: JOBPULSE_SPOOL_DIR, else ~/.cache/jobpulse/spool)"
    )
    sync.add_argument("--job", action="append", help="only this job (repeat for more)")
    sync.add_argument("--list", action="store_true", help="list what is waiting, send nothing")
    sync.add_argument("--any-url", action="store_true", help="also send requests recorded for another server URL")
    client_options(sync)
    sync.set_defaults(func=cmd_sync)


def cmd_sync(args: argparse.Namespace) -> int:
    from ..sdk import spool, sync

    root = args.spool_dir or spool.default_root()
    jobs = set(args.job) if args.job else None
    if args.list:
        return _list_spool(sync.survey(root, jobs), root)
    creds = load_credentials(args.url, args.api_key)
    report = sync.sync(root, creds.url, creds.api_key, jobs=jobs, any_url=args.any_url)
    if report.jobs:
        print(
            f"sent {report.sent_requests} request(s) ({report.sent_events} event(s)) of "
            f"{len(report.jobs)} job(s) to {creds.url.rstrip('/')}"
        )
    elif not (report.left or report.live or report.unreadable):
        print(f"nothing spooled in {root}")
    for reason, events in report.refusals.items():
        print(f"jobpulse sync: the server refused {events} event(s): {reason}", file=sys.stderr)
    for url, count in report.other_url.items():
        print(
            f"jobpulse sync: left {count} request(s) recorded for {url or 'an unknown server'} "
            "(--url names that server; --any-url sends them here)",
            file=sys.stderr,
        )
    for directory in report.live:
        print(f"jobpulse sync: left {directory}: a running process writes it and sends it itself", file=sys.stderr)
    if report.unreadable:
        print(f"jobpulse sync: {report.unreadable} file(s) under {root} are not spooled requests", file=sys.stderr)
    if report.stopped:
        print(
            f"jobpulse sync: stopped: {report.stopped}; {report.left} request(s) are still in {root}",
            file=sys.stderr,
        )
        return 1
    return 1 if report.dropped_events or report.other_url else 0


def _list_spool(found: list, root: Path) -> int:  # list[sync.SpoolDir]
    if not found:
        print(f"nothing spooled in {root}")
        return 0
    rows = [("JOB", "WORKER", "REQUESTS", "EVENTS", "BYTES", "OLDEST (UTC)", "SERVER")]
    for d in found:
        oldest = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(d.oldest)) if d.oldest else "-"
        servers = ", ".join(sorted(u or "?" for u in d.urls)) or "-"
        state = " (being written by a running process)" if d.live else ""
        rows.append((d.job, d.worker, str(d.requests), str(d.events), str(d.bytes), oldest, servers + state))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])
    return 0
