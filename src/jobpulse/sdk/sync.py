"""Sending what the spool holds, now: ``jobpulse sync``.

A training node that could not reach the server keeps its requests in the spool
(:mod:`jobpulse.sdk.spool`). The next run, agent or ``jobpulse.init`` on the machine replays
them on its own; ``sync`` sends them without starting anything: every spool directory whose
writer has ended, oldest request first, each file removed only once the server has answered
it. A directory still held by a live process is left to that process, which sends it itself.

Requests remember the server they were meant for; those recorded for another URL are left in
place unless asked for (``any_url``), so data of one server never lands on another by accident.
A request the server refuses as malformed is removed and reported, as the sender does; one it
refuses for the key, or that cannot be delivered at all, stops the sync with the rest kept.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from jobpulse.sdk import spool as sp
from jobpulse.sdk.split import split_request
from jobpulse.sdk.transport import DROP, OK, Answer, Transport, refused_events
from jobpulse.sdk.wire import Request

if TYPE_CHECKING:
    from jobpulse.sdk.sender import Delivery


def leftover_message(delivery: Delivery, job: str, url: str, wait: float) -> str | None:
    """What to tell the user of requests a stopped sender left in the spool; None when it left none."""
    if not delivery.spooled_requests:
        return None
    why = f" ({delivery.last_error})" if delivery.last_error else ""
    return (
        f"{delivery.spooled_events} event(s) in {delivery.spooled_requests} request(s) of job {job} could not be "
        f"delivered to {url} within {wait:g} s{why}; they are kept in {delivery.spool_dir}: `jobpulse sync` "
        "sends them, as does the next run, agent or jobpulse.init on this machine"
    )


@dataclass
class SpoolDir:
    """What one ``<root>/<job>/<worker>`` directory holds."""

    job: str  # the directory's name (the job id, with unsafe characters %-escaped)
    worker: str
    path: Path
    requests: int = 0
    events: int = 0
    bytes: int = 0
    unreadable: int = 0
    oldest: float | None = None  # when the oldest request was made (Unix seconds)
    urls: Counter[str] = field(default_factory=Counter)
    live: bool = False  # a running process writes it and will send it itself


@dataclass
class SyncReport:
    sent_requests: int = 0
    sent_events: int = 0
    dropped_events: int = 0
    refusals: Counter[str] = field(default_factory=Counter)  # why the server refused events it dropped
    other_url: Counter[str] = field(default_factory=Counter)  # requests left for another server
    live: list[Path] = field(default_factory=list)
    unreadable: int = 0
    jobs: set[str] = field(default_factory=set)
    stopped: str = ""  # why sending stopped early: the server's answer or the connection error
    left: int = 0  # requests still waiting after the sync


def _dirs(root: Path, jobs: set[str] | None) -> list[tuple[str, Path]]:
    wanted = {sp.dir_name(j) for j in jobs} if jobs else None
    out = []
    for directory in sp.orphan_dirs(root):
        if wanted is None or directory.parent.name in wanted:
            out.append((directory.parent.name, directory))
    return out


def _is_live(directory: Path) -> bool:
    fd = sp.claim_dir(directory)
    if fd is None:
        return True
    sp.release_dir(directory, fd, remove=False)
    return False


def survey(root: Path, jobs: set[str] | None = None) -> list[SpoolDir]:
    """Every spool directory under ``root`` that holds requests (of ``jobs`` when given)."""
    out = []
    for job, directory in _dirs(root, jobs):
        found = SpoolDir(job, directory.name, directory, live=_is_live(directory))
        for path in sp.spool_files(directory):
            header = sp.read_header(path)
            if header is None:
                found.unreadable += 1
                continue
            found.requests += 1
            found.events += int(header.get("events") or 0)
            found.urls[str(header.get("url", "")).rstrip("/")] += 1
            created = header.get("created")
            if isinstance(created, (int, float)) and (found.oldest is None or created < found.oldest):
                found.oldest = float(created)
            with contextlib.suppress(OSError):
                found.bytes += os.stat(path).st_size
        out.append(found)
    return out


def _deliver(transport: Transport, request: Request, report: SyncReport) -> Answer:
    """Send one request (halved while the server finds it too large); the answer that decides its file."""
    answer = transport.send(request)
    if answer.outcome == DROP and answer.status == 413:
        halves = split_request(request)
        if halves is not None:
            before = (report.sent_events, report.dropped_events, report.refusals.copy())
            for half in halves:
                answer = _deliver(transport, half, report)
                if answer.outcome not in (OK, DROP):
                    # The whole request stays: sent again, the halves already stored are stored under the
                    # same keys, which the server makes harmless.
                    report.sent_events, report.dropped_events, report.refusals = before
                    return answer
            return Answer(OK, 200, b"")
    if answer.outcome == OK:
        report.sent_events += request.events
        rejected = _rejected(request, answer.body)
        if rejected:
            report.sent_events -= sum(rejected.values())
            report.dropped_events += sum(rejected.values())
            report.refusals.update(rejected)
    elif answer.outcome == DROP:
        report.dropped_events += request.events
        report.refusals[f"{request.kind} request refused: {answer.detail}"] += request.events
    return answer


def _rejected(request: Request, body: bytes) -> Counter[str]:
    """Events of an accepted ingest request that the server still refused, by reason."""
    if request.kind != "ingest" or not body:
        return Counter()
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return Counter()
    return Counter({reason: count for reason, count, _ in refused_events(answer)[1]})


def sync(
    root: Path,
    url: str,
    api_key: str | None,
    *,
    jobs: set[str] | None = None,
    any_url: bool = False,
    timeout: float = 30.0,
) -> SyncReport:
    """Send the spooled requests under ``root`` to ``url`` (see the module doc)."""
    transport = Transport(url, api_key, timeout)
    report = SyncReport()
    try:
        for job, directory in _dirs(root, jobs):
            if report.stopped:
                report.left += len(sp.spool_files(directory))
                continue
            fd = sp.claim_dir(directory)
            if fd is None:
                report.live.append(directory)
                continue
            try:
                _sync_dir(transport, directory, job, any_url, report)
            finally:
                sp.release_dir(directory, fd, remove=True)
    finally:
        transport.close()
    return report


def _sync_dir(transport: Transport, directory: Path, job: str, any_url: bool, report: SyncReport) -> None:
    for path in sp.spool_files(directory):
        if report.stopped:
            report.left += 1
            continue
        entry = sp.take(path)
        if entry is None:
            if sp.read_header(path) is None and path.exists():
                report.unreadable += 1
            continue
        recorded = entry.url.rstrip("/")
        if recorded != transport.url and not any_url:
            report.other_url[recorded] += 1
            report.left += 1
            sp.put_back(entry)
            continue
        answer = _deliver(transport, entry.request, report)
        if answer.outcome in (OK, DROP):
            report.sent_requests += answer.outcome == OK
            report.jobs.add(job)
            sp.done(entry)
        else:
            report.stopped = answer.detail or f"HTTP {answer.status}"
            report.left += 1
            sp.put_back(entry)
