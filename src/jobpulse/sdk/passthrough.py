"""Marked console output: how a rank under ``jobpulse run`` tells the wrapper which output it captured itself.

Under the node wrapper, every rank's standard output and error end in the wrapper's pipes (a launcher such as
torchrun passes its own on to its ranks), and the wrapper logs what it reads there as the node worker's. A rank
whose SDK captures its console logs those lines as its own worker's; so that they are not logged twice, the SDK
writes what it captured to the wrapper's pipe *marked*, and the wrapper echoes marked output to the terminal but
leaves it out of the node's log. What nobody marked (the launcher's own output, a rank without the SDK, a C
library writing to file descriptor 1, a child process of a rank) stays the node's.

The wrapper names its pipes in ``JOBPULSE_WRAPPER_PIPES`` (``DEV:INODE`` of its stdout and stderr pipes, space
separated); the SDK marks its output only where the file descriptor it writes to is one of them, so that nothing
is marked in a file the output was redirected to.

A mark is a frame: ``MARK``, a flag byte, the bytes written (never a newline), and a newline that ends the frame.
Flag ``l``: the written bytes ended a line (the wrapper echoes them with their newline); ``p``: a piece of a line
still open (a progress bar redrawn with carriage returns is echoed as it comes). Each frame is written with one
``write`` of at most ``PIPE_BUF`` bytes, which a pipe never interleaves with another process's writes: the ranks
of a node share the wrapper's pipe, and a frame always arrives whole.
"""

from __future__ import annotations

import os
import select
import stat
from collections.abc import Mapping

MARK = b"\x1ejp"
LINE, PIECE = b"l", b"p"
FRAME_MAX = getattr(select, "PIPE_BUF", 512)  # a write of up to this many bytes to a pipe is atomic (4096 on Linux)
_PAYLOAD_MAX = FRAME_MAX - len(MARK) - 2
PIPES_VAR = "JOBPULSE_WRAPPER_PIPES"


def pipe_id(fd: int) -> str:
    """``DEV:INODE`` of the pipe open at ``fd``; "" where ``fd`` is no pipe."""
    try:
        st = os.fstat(fd)
    except OSError:
        return ""
    return f"{st.st_dev}:{st.st_ino}" if stat.S_ISFIFO(st.st_mode) else ""


def marked_fd(fd: int, env: Mapping[str, str] | None = None) -> bool:
    """Whether output written to ``fd`` reaches a wrapper's pipe, and so is to be marked."""
    env = os.environ if env is None else env
    ids = env.get(PIPES_VAR, "").split()
    return bool(ids) and pipe_id(fd) in ids


def frames(data: bytes) -> list[bytes]:
    """``data`` as frames of at most ``FRAME_MAX`` bytes each (see the module doc)."""
    out: list[bytes] = []
    start = 0
    while start < len(data):
        end = data.find(b"\n", start, start + _PAYLOAD_MAX + 1)
        if end >= 0:
            out.append(MARK + LINE + data[start:end] + b"\n")
            start = end + 1
        else:
            stop = min(len(data), start + _PAYLOAD_MAX)
            out.append(MARK + PIECE + data[start:stop] + b"\n")
            start = stop
    return out


def write_marked(fd: int, data: bytes) -> None:
    """Write ``data`` to ``fd`` as frames, each with one ``write``; OSError as ``os.write`` raises it."""
    for frame in frames(data):
        view = memoryview(frame)
        while view:  # a blocking pipe takes a write of up to PIPE_BUF bytes whole; this is for signals
            try:
                view = view[os.write(fd, view) :]
            except InterruptedError:
                continue


class Unmarker:
    """The wrapper's side: cuts what it reads from a pipe into marked and unmarked bytes, in order.

    ``feed`` answers a list of ``(bytes, marked)``: marked bytes are what a rank captured (to echo, not to log),
    unmarked bytes the rest. A frame or a mark cut by a read is completed by the following reads.
    """

    def __init__(self) -> None:
        self._held = b""  # the start of a mark whose end has not been read yet
        self._flag: bytes | None = None  # the flag of the frame being read, None between frames

    def feed(self, data: bytes) -> list[tuple[bytes, bool]]:
        buf, self._held = self._held + data, b""
        out: list[tuple[bytes, bool]] = []
        pos = 0
        while pos < len(buf):
            if self._flag is not None:
                end = buf.find(b"\n", pos)
                if end < 0:
                    out.append((buf[pos:], True))
                    break
                out.append((buf[pos:end] + (b"\n" if self._flag == LINE else b""), True))
                self._flag, pos = None, end + 1
                continue
            start = buf.find(MARK, pos)
            if start < 0:
                keep = _open_mark(buf, pos)
                out.append((buf[pos:keep], False))
                self._held = buf[keep:]
                break
            if start > pos:
                out.append((buf[pos:start], False))
            flag_at = start + len(MARK)
            if flag_at >= len(buf):
                self._held = buf[start:]
                break
            flag = buf[flag_at : flag_at + 1]
            if flag in (LINE, PIECE):
                self._flag, pos = flag, flag_at + 1
            else:  # the mark's bytes in output of its own: plain text
                out.append((buf[start:flag_at], False))
                pos = flag_at
        return [(chunk, marked) for chunk, marked in out if chunk]

    def flush(self) -> bytes:
        """What is held at the end of the stream (an unfinished mark), as plain output."""
        held, self._held = self._held, b""
        return held


def _open_mark(buf: bytes, pos: int) -> int:
    """Where a mark that ``buf`` ends with, cut short, begins (``len(buf)`` where it ends with none)."""
    for size in range(min(len(MARK), len(buf) - pos), 0, -1):
        if MARK.startswith(buf[len(buf) - size :]):
            return len(buf) - size
    return len(buf)
