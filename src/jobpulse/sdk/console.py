"""Console capture: stdout, stderr and ``logging`` records become log lines of the job.

What is written to ``sys.stdout``/``sys.stderr`` still reaches the terminal first; a copy
is cut into lines. A line rewritten with carriage returns (a tqdm progress bar) is
collapsed to its final state: of the ``\\r``-separated pieces of a line, the last one
that is not blank is kept, so a bar that redrew itself a thousand times is one line.
A line still open at the end of the run is taken as it stands then.

Levels: ``logging`` records keep their own level; lines that ``warnings`` prints are
``warning``; the traceback of an uncaught exception is ``error``; any other line gets the level
its text states, else its stream's (``info`` on stdout, ``warning`` on stderr but for progress
bars): the rule of ``jobpulse.sdk.levels``, which ``jobpulse run`` follows too. Records are taken
when they are created (through the log record factory, so that ``logging.basicConfig`` and the
last-resort handler work as before), and the text a ``logging.StreamHandler`` then prints is not
taken a second time.

Only text written through the Python stream objects is seen: output that C code or a child
process writes straight to file descriptors 1 and 2, or bytes written to ``sys.stdout.buffer``,
is not.

Under the node wrapper ``jobpulse run``, what is captured goes on to the wrapper's pipe marked
(``jobpulse.sdk.passthrough``): the wrapper echoes it but leaves it to this process's worker, and
logs as the node's only what no rank captured.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any, TextIO

from jobpulse.sdk.levels import STDERR, STDOUT, LineLevels
from jobpulse.sdk.passthrough import marked_fd, write_marked

MAX_LINE = 32_768
_KEEP_PENDING = 4_096

Sink = Callable[[str, str], None]  # (level, message)

_EMIT_CODE = logging.StreamHandler.emit.__code__
_WARN_FILE = warnings.__file__


def collapse(raw: str) -> str | None:
    """The final state of one line; None for a line that only held blank rewrites."""
    if "\r" not in raw:
        return raw
    for piece in reversed(raw.split("\r")):
        if piece.strip():
            return piece
    return None


class LineSplitter:
    """Cuts written text into lines and passes each finished line to ``emit``."""

    def __init__(self, emit: Callable[[str], None], max_line: int = MAX_LINE) -> None:
        self.emit = emit
        self.max_line = max_line
        self.pending = ""

    def write(self, text: str) -> None:
        if "\n" not in text:
            self.pending += text
            if len(self.pending) > _KEEP_PENDING:
                self._trim()
            return
        parts = text.split("\n")
        parts[0] = self.pending + parts[0]
        self.pending = parts.pop()
        for raw in parts:
            self._line(raw)
        if len(self.pending) > _KEEP_PENDING:
            self._trim()

    def _trim(self) -> None:
        """Bound the open line: keep only its last rewrite, or cut an over-long line."""
        pieces = self.pending.split("\r")
        if len(pieces) > 1:
            last = len(pieces) - 1
            while last > 0 and not pieces[last].strip():
                last -= 1
            self.pending = "\r".join(pieces[last:])
        while len(self.pending) > self.max_line:
            self._line(self.pending[: self.max_line])
            self.pending = self.pending[self.max_line :]

    def _line(self, raw: str) -> None:
        line = collapse(raw)
        if line is not None:
            self.emit(line)

    def close(self) -> None:
        if self.pending:
            raw, self.pending = self.pending, ""
            line = collapse(raw)
            if line:
                self.emit(line)


class Tee:
    """Stands in for sys.stdout or sys.stderr (``name``): writes through, and keeps a copy of each line."""

    def __init__(self, stream: TextIO, name: str, capture: Console) -> None:
        self._stream = stream
        self._capture = capture
        self._lock = threading.RLock()
        self._splitter = LineSplitter(self._emit)
        self._levels = LineLevels(name)
        self._forced: str | None = None  # the level of every line the write under way ends
        self._marked_fd = _wrapper_fd(stream)  # the wrapper's pipe, written marked while capturing
        self._held = ""  # the open line, written marked when it ends or on flush (line buffering)

    def _emit(self, line: str) -> None:
        level = self._levels(line)  # read even when forced: it follows the stream's tracebacks
        self._capture.sink(self._forced or level, line)

    def write(self, text: str) -> int:
        capture = self._capture
        if self._marked_fd is not None and capture.active and isinstance(text, str):
            written = self._write_marked(text)
        else:
            written = self._stream.write(text)
        if not capture.active or not isinstance(text, str):
            return written
        try:
            caller = sys._getframe(1).f_code
            if caller is _EMIT_CODE and capture.logging_taken:
                return written  # a logging record, already taken with its level
            forced = capture.level_override
            if caller.co_name == "_showwarnmsg_impl" and caller.co_filename == _WARN_FILE:
                forced = "warning"
            with self._lock:
                self._forced = forced
                self._splitter.write(text)
        except Exception:  # never break the caller's print
            pass
        return written

    def _write_marked(self, text: str) -> int:
        """Write the lines ``text`` ends on to the wrapper's pipe as frames, a line per frame (the ranks of a node
        share the pipe: whole lines do not interleave); the open line waits for its end or a flush."""
        with self._lock:
            held = self._held + text
            cut = held.rfind("\n") + 1 if len(held) <= _KEEP_PENDING else len(held)
            self._held = held[cut:]
            self._send_marked(held[:cut])
        return len(text)

    def _send_marked(self, text: str) -> None:
        if not text:
            return
        stream = self._stream
        stream.flush()  # what was written around the capture (bytes to sys.stdout.buffer) goes first
        encoding = getattr(stream, "encoding", None) or "utf-8"
        write_marked(self._marked_fd, text.encode(encoding, getattr(stream, "errors", None) or "strict"))

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._flush_held()
        self._stream.flush()

    def _flush_held(self) -> None:
        with self._lock:
            held, self._held = self._held, ""
            if self._capture.active:  # else a forked child's copy of its parent's open line: the parent's to write
                self._send_marked(held)

    def close_lines(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # the wrapper went away: the line is still taken below
            self._flush_held()
        with self._lock:
            self._splitter.close()

    @property
    def wrapped(self) -> TextIO:
        return self._stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _wrapper_fd(stream: TextIO) -> int | None:
    """The file descriptor of ``stream`` where it is a pipe of the node wrapper, else None."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture, an in-memory stream)
        return None
    return fd if marked_fd(fd) else None


_LEVELS = ((logging.CRITICAL, "critical"), (logging.ERROR, "error"), (logging.WARNING, "warning"))


def level_name(levelno: int) -> str:
    for threshold, name in _LEVELS:
        if levelno >= threshold:
            return name
    return "info" if levelno >= logging.INFO else "debug"


class Console:
    """Installs and removes the capture for one run."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.active = False
        self.logging_taken = False
        self.level_override: str | None = None
        self.stdout: Tee | None = None
        self.stderr: Tee | None = None
        self._factory: Callable[..., logging.LogRecord] | None = None
        self._our_factory: Callable[..., logging.LogRecord] | None = None
        self._formatter = logging.Formatter()

    def start(self, streams: bool = True, records: bool = True) -> None:
        self.active = True
        if streams:
            self.stdout = Tee(sys.stdout, STDOUT, self)
            self.stderr = Tee(sys.stderr, STDERR, self)
            sys.stdout = self.stdout  # type: ignore[assignment]
            sys.stderr = self.stderr  # type: ignore[assignment]
        if records:
            self._factory = logging.getLogRecordFactory()
            self._our_factory = self._make_record
            logging.setLogRecordFactory(self._our_factory)
            self.logging_taken = True

    def _make_record(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self._factory(*args, **kwargs)  # type: ignore[misc]
        if self.active:
            with contextlib.suppress(Exception):
                self.sink(level_name(record.levelno), self.format(record))
        return record

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.name and record.name != "root":
            message = f"{record.name}: {message}"
        if record.exc_info and record.exc_info[0] is not None:
            message = f"{message}\n{self._formatter.formatException(record.exc_info)}"
        if record.stack_info:
            message = f"{message}\n{record.stack_info}"
        return message

    def close_lines(self) -> None:
        """Take the open line of each stream as it stands."""
        for tee in (self.stdout, self.stderr):
            if tee is not None:
                tee.close_lines()

    def stop(self) -> None:
        """Take open lines, then put back what was replaced (where nobody replaced it since)."""
        self.close_lines()
        self.active = False
        if self.stdout is not None and sys.stdout is self.stdout:
            sys.stdout = self.stdout.wrapped
        if self.stderr is not None and sys.stderr is self.stderr:
            sys.stderr = self.stderr.wrapped
        if self._our_factory is not None and logging.getLogRecordFactory() is self._our_factory:
            logging.setLogRecordFactory(self._factory)  # type: ignore[arg-type]
        self.logging_taken = False

    def stderr_stream(self) -> TextIO:
        """The stream that was sys.stderr before the capture (for the SDK's own messages)."""
        return self.stderr.wrapped if self.stderr is not None else sys.stderr
