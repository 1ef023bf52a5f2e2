"""``jobpulse logs``: a job's log lines, filtered, from the start or the tail, and followed live."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from ..client import ApiError, Client, Stream
from .format import since_ms, when
from .options import color, connect, job_path, read_options

LEVELS = ("debug", "info", "warning", "error", "critical")
ENDED = ("completed", "failed", "stopped")
PAGE = 5000
MAX_TAIL = 100_000  # the most lines the API answers at once
STATUS_POLL_S = 2.0  # how often a follow looks whether the job has ended
_COLORS = {"warning": "33", "error": "31", "critical": "1;31", "debug": "2"}


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``logs`` command."""
    p = sub.add_parser(
        "logs",
        help="print a job's log, or follow it",
        description="Print a job's log lines (all workers, in time order), filtered by worker, level, text and "
        "time. With --follow, keep printing new lines until the job ends (or Ctrl-C).",
    )
    p.add_argument("job", metavar="JOB", help="the job's id")
    p.add_argument("--worker", "-w", action="append", help="only this worker (repeat for more)")
    p.add_argument(
        "--level",
        action="append",
        choices=LEVELS,
        metavar="LEVEL",
        help=f"only lines of this level: {', '.join(LEVELS)} (repeat for more)",
    )
    p.add_argument("--grep", "-g", metavar="TEXT", help="only lines that contain TEXT (case-insensitive)")
    p.add_argument(
        "--since",
        metavar="WHEN",
        help="only lines since WHEN: a duration back from now (10m, 1h30m, 2d) or a time (2024-05-01T08:00)",
    )
    p.add_argument("--tail", type=_lines, metavar="N", help=f"only the last N lines (at most {MAX_TAIL})")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new lines until the job ends")
    read_options(p)
    p.set_defaults(func=cmd_logs)


def _lines(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= MAX_TAIL:
        raise argparse.ArgumentTypeError(f"must be 1 to {MAX_TAIL}, got {value}")
    return value


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "worker": ",".join(args.worker or []) or None,
        "level": ",".join(args.level or []) or None,
        "q": args.grep,
    }


def _printer(as_json: bool) -> Callable[[dict[str, Any]], None]:
    out = sys.stdout

    def text(line: dict[str, Any]) -> None:
        level = line["level"].upper()
        code = _COLORS.get(line["level"])
        shown = color(f"{level:<8}", code) if code else f"{level:<8}"
        out.write(f"{when(line['ts'], millis=True)} {line['worker']} {shown} {line['msg']}\n")

    def json_line(line: dict[str, Any]) -> None:
        line.pop("cursor", None)
        out.write(orjson.dumps(line).decode() + "\n")

    return json_line if as_json else text


def _emit(lines: Iterable[dict[str, Any]], show: Callable[[dict[str, Any]], None]) -> None:
    for line in lines:
        show(line)
    sys.stdout.flush()


def print_lines(
    client: Client,
    path: str,
    params: dict[str, Any],
    show: Callable,
    *,
    tail: int | None = None,
    after: str | None = None,
) -> str | None:
    """Print the lines the filters select: the last ``tail`` of them, else all of them (those after the cursor
    ``after`` where one is given), a page at a time. Answers the cursor of the last line printed (else ``after``)."""
    if tail is not None:
        page = client.get(path, **params, start="tail", limit=tail)
        _emit(page["lines"], show)
        return page["last_cursor"] or after
    last = after
    while True:
        page = (
            client.get(path, **params, after=last, limit=PAGE)
            if last
            else client.get(path, **params, limit=PAGE, start="head")
        )
        _emit(page["lines"], show)
        last = page["last_cursor"] or last
        if len(page["lines"]) < PAGE:
            return last


def cmd_logs(args: argparse.Namespace) -> int:
    client = connect(args)
    job = job_path(args.job)
    status = client.get(job)["job"]["status"]  # a job that does not exist is named as such
    params = _filters(args)
    show = _printer(args.json)
    since = since_ms(args.since) if args.since else None
    last = print_lines(client, f"{job}/logs", {**params, "since": since}, show, tail=args.tail)
    if args.follow and status not in ENDED:
        last = follow(client, job, {**params, "since": since}, last, show)
        # what came after the job ended
        print_lines(client, f"{job}/logs", {**params, "since": since}, show, after=last)
    return 0


def follow(client: Client, job: str, params: dict[str, Any], cursor: str | None, show: Callable) -> str | None:
    """Print the lines that arrive after ``cursor`` through the server's live follow until the job ends; answers
    the cursor of the last line printed. A dropped connection is opened again after that line.

    The live follow starts after the last line there is when it is opened: until a first line has been printed
    (no cursor yet), the log is read again every second instead, so that no line comes in between."""
    ended = threading.Event()
    streams: list[Stream] = []

    def end() -> None:
        ended.set()
        for stream in streams:
            stream.interrupt()

    threading.Thread(target=_watch, args=(client, job, end), daemon=True).start()
    while cursor is None and not ended.is_set():
        cursor = print_lines(client, f"{job}/logs", params, show)
        ended.wait(0 if cursor else 1.0)
    live = {k: v for k, v in params.items() if k != "since"}  # after a cursor, the time needs no filter
    failures = 0
    while not ended.is_set():
        try:
            with client.stream(f"{job}/logs/follow", {**live, "after": cursor}, read_timeout=30) as stream:
                streams[:] = [stream]
                failures = 0
                if not ended.is_set():
                    cursor = _read_events(stream.lines(), show, cursor)
            if not ended.is_set():
                time.sleep(0.5)  # the server closed the stream (a restart): open it again
        except ApiError as exc:
            failures += 1
            if exc.status != 0 or failures > 5:
                raise
            time.sleep(min(8.0, 0.5 * 2**failures))
    return cursor


def _read_events(lines: Iterable[bytes], show: Callable, cursor: str | None) -> str | None:
    """Print the ``lines`` events of a server-sent event stream; answers the cursor of the last line printed."""
    for raw in lines:
        if raw.startswith(b"data: "):
            page = orjson.loads(raw[6:])
            _emit(page["lines"], show)
            cursor = page["last_cursor"] or cursor
    return cursor


def _watch(client: Client, job: str, end: Callable[[], None]) -> None:
    """Call ``end`` once the job has ended (and its last lines had time to arrive), or can no longer be read."""
    while True:
        time.sleep(STATUS_POLL_S)
        try:
            if client.get(job)["job"]["status"] in ENDED:
                time.sleep(STATUS_POLL_S)
                break
        except ApiError as exc:
            if exc.status != 0:
                break
    end()
