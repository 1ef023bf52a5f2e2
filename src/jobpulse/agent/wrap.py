"""``jobpulse run -- cmd ...``: run a command as the node worker of a job.

The wrapper stands for the node (machine, pod) it runs on: the command it starts may be one process or a launcher
(torchrun, mpirun, ...) of several ranks, each of which, with the SDK, reports as a worker of its own under this
node (``JOBPULSE_NODE`` tells them its name, ``jobpulse.sdk.env``). The wrapper registers the job and its node
worker (status ``running``), starts the command with its
standard output and error on pipes, and copies both to its own as they come (byte for byte, so
progress bars still draw) while cutting them into log lines of the node: what a rank's SDK captured as its own log
arrives marked and is only echoed, not logged again (``jobpulse.sdk.passthrough``), so the node's log keeps what no
rank captured, such as the launcher's own output. Each line gets a
``seq`` when it is read, so the log keeps the order in which the lines arrived; a line redrawn
with carriage returns is kept in its final state. Each line gets the level its text states, else its
stream's (``info`` on stdout, ``warning`` on stderr but for progress bars), by the same rule as the
SDK's console capture (``jobpulse.sdk.levels``). Meanwhile the command's process tree is sampled (CPU, memory,
disk I/O) together with the network, the job's GPUs/NPUs and the agent itself; the first samples also tell the
worker's hardware, sent as the job's instance type (``hardware.py``).

SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to the wrapper are passed on to the
command. A Ctrl-C typed at a terminal already reaches the command (it shares the terminal's
foreground process group), so that one is not sent a second time.

When the command ends the worker is marked ``completed`` (exit 0), ``stopped`` (it ended after
the wrapper was asked to stop) or ``failed``, with its exit code (128 + N for a command killed by
signal N, as a shell reports it), and the wrapper exits with that same code. A command that
cannot be started gives 127 (not found) or 126 (not executable).
"""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from jobpulse.agent.hardware import reporting_hardware
from jobpulse.agent.sampler import Sampler, build_collectors
from jobpulse.agent.storage import PathSpec
from jobpulse.sdk.console import LineSplitter
from jobpulse.sdk.levels import STDERR, STDOUT, LineLevels
from jobpulse.sdk.passthrough import PIPES_VAR, Unmarker, pipe_id
from jobpulse.sdk.seq import SeqClock

FORWARDED = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)
STOPPING = {getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)}
READ_SIZE = 65536


class LineOutlet(Protocol):
    """What the wrapper needs of an outlet (``jobpulse.agent.outlet.Outlet`` is one)."""

    def line(self, ts_ms: int, seq: int, level: str, msg: str) -> None: ...
    def system(self, ts_ms: int, samples: list) -> None: ...
    def register_job(
        self, name: str | None = None, tags: list[str] | None = None, instance_type: dict | None = None
    ) -> None: ...
    def worker_status(
        self, status: str, exit_code: int | None = None, host: str | None = None, fields: dict | None = None
    ) -> None: ...
    def close(self, timeout: float = 10.0) -> Any: ...


def _write_all(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError:
            return False  # the terminal or the pipe went away: keep capturing, stop echoing
        view = view[n:]
    return True


class StreamPump(threading.Thread):
    """Copies one pipe of the command to ``echo_fd`` and cuts what no rank marked into lines for ``on_line``."""

    def __init__(self, pipe: IO[bytes], echo_fd: int | None, on_line: Callable[[str], None], name: str) -> None:
        super().__init__(name=f"jobpulse-{name}", daemon=True)
        self.pipe = pipe
        self.echo_fd = echo_fd
        self.on_line = on_line

    def run(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        splitter = LineSplitter(self.on_line)
        unmarker = Unmarker()
        fd = self.pipe.fileno()
        try:
            while True:
                try:
                    chunk = os.read(fd, READ_SIZE)
                except InterruptedError:
                    continue
                except OSError:
                    break
                if not chunk:
                    break
                pieces = unmarker.feed(chunk)
                self._echo(b"".join(piece for piece, _ in pieces))
                for piece, marked in pieces:
                    if not marked:
                        splitter.write(decoder.decode(piece))
            held = unmarker.flush()
            self._echo(held)
            splitter.write(decoder.decode(held, final=True))
            splitter.close()
        finally:
            with contextlib.suppress(OSError):
                self.pipe.close()

    def _echo(self, data: bytes) -> None:
        if data and self.echo_fd is not None and not _write_all(self.echo_fd, data):
            self.echo_fd = None


@dataclass
class RunResult:
    exit_code: int
    status: str
    lines: int
    signals: list[int] = field(default_factory=list)
    delivery: Any = None  # what the outlet's close answered (a ``Delivery`` for the real outlet)


def _terminal_delivers_sigint() -> bool:
    """Whether a SIGINT here most likely came from the terminal, which also sent it to the command."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def _wait_for_exit(child: subprocess.Popen) -> None:
    """Wait until ``child`` has exited, leaving it to be reaped. A reaped child's CPU time joins this process's
    (``cutime`` in ``/proc/self/stat``, which the agent reports as its own cost); the sampler is stopped first,
    so no sample can count the whole command's CPU as the agent's."""
    if hasattr(os, "waitid") and hasattr(os, "WNOWAIT"):
        with contextlib.suppress(ChildProcessError):  # already reaped (a signal handler polled it)
            os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
        return
    child.wait()


def _start(argv: Sequence[str], env: dict[str, str]) -> tuple[subprocess.Popen, list[IO[bytes]]]:
    """Start the command with its stdout and stderr on pipes of ours, named to it in ``PIPES_VAR`` (the SDK of a
    rank marks what it captures only where it writes to one of them); answers the child and the pipes' read ends."""
    fds = [*os.pipe(), *os.pipe()]  # stdout read, write; stderr read, write
    try:
        env[PIPES_VAR] = f"{pipe_id(fds[0])} {pipe_id(fds[2])}"
        child = subprocess.Popen(list(argv), stdout=fds[1], stderr=fds[3], env=env)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    os.close(fds[1])
    os.close(fds[3])
    return child, [os.fdopen(fds[0], "rb", buffering=0), os.fdopen(fds[2], "rb", buffering=0)]


def run_wrapped(
    argv: Sequence[str],
    outlet: LineOutlet,
    *,
    interval: float = 10.0,
    paths: Sequence[PathSpec] = (),
    gpus: str | None = None,
    env: Mapping[str, str] | None = None,
    echo: bool = True,
    sample: bool = True,
    job_name: str | None = None,
    collectors_factory: Callable[[int], list] | None = None,
    flush_timeout: float = 10.0,
    drain_timeout: float = 5.0,
    worker_fields: Mapping[str, Any] | None = None,
) -> RunResult:
    """Run ``argv`` to its end as a worker reporting through ``outlet``; see the module doc. ``worker_fields``
    (``kind``, ``node``, ...) are registered with the worker."""
    clock = SeqClock()
    counter = [0]
    lock = threading.Lock()

    def on_line(msg: str, level: str = "info") -> None:
        with lock:
            ts_ms, seq = clock.next()
            counter[0] += 1
            outlet.line(ts_ms, seq, level, msg)

    def stream_lines(stream: str) -> Callable[[str], None]:
        levels = LineLevels(stream)
        return lambda msg: on_line(msg, levels(msg))

    outlet.register_job(job_name)
    outlet.worker_status("running", fields=dict(worker_fields) if worker_fields else None)
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    try:
        child, outputs = _start(argv, child_env)
    except OSError as exc:
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        msg = f"jobpulse run: cannot start {argv[0]!r}: {exc.strerror or exc}"
        print(msg, file=sys.stderr, flush=True)
        on_line(msg, "error")
        outlet.worker_status("failed", code)
        delivery = outlet.close(flush_timeout)
        return RunResult(code, "failed", counter[0], delivery=delivery)

    received: list[int] = []

    def forward(signum: int, frame: Any) -> None:
        received.append(signum)
        if signum == signal.SIGINT and _terminal_delivers_sigint():
            return
        if child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signum)

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in FORWARDED:
            with contextlib.suppress(OSError, ValueError):
                previous[signum] = signal.signal(signum, forward)

    pumps = [
        StreamPump(outputs[0], 1 if echo else None, stream_lines(STDOUT), "stdout"),
        StreamPump(outputs[1], 2 if echo else None, stream_lines(STDERR), "stderr"),
    ]
    for pump in pumps:
        pump.start()
    sampler: Sampler | None = None
    if sample:
        try:
            if collectors_factory is not None:
                collectors = collectors_factory(child.pid)
            else:
                collectors = build_collectors(pid=child.pid, scope="process", paths=paths, gpus=gpus, env=child_env)
            emit = reporting_hardware(outlet.system, lambda found: outlet.register_job(instance_type=found), collectors)
            sampler = Sampler(collectors, emit, interval)
            sampler.start()
        except Exception as exc:  # sampling is a bonus; the command runs regardless
            print(f"jobpulse run: not sampling resources: {exc}", file=sys.stderr, flush=True)
            sampler = None
    try:
        while True:
            try:
                _wait_for_exit(child)
                break
            except KeyboardInterrupt:  # a handler that was not ours; keep waiting for the child
                continue
    finally:
        if sampler is not None:
            sampler.stop()
        rc = child.wait()  # reaped only now: see _wait_for_exit
        deadline = time.monotonic() + drain_timeout
        for pump in pumps:
            # A background process of the command may hold the pipes open: do not wait forever.
            pump.join(max(0.0, deadline - time.monotonic()))
        for signum, handler in previous.items():
            with contextlib.suppress(OSError, ValueError, TypeError):
                signal.signal(signum, handler)
    exit_code = 128 - rc if rc < 0 else rc
    if rc == 0:
        status = "completed"
    elif any(s in STOPPING for s in received):
        status = "stopped"
    else:
        status = "failed"
    outlet.worker_status(status, exit_code)
    delivery = outlet.close(flush_timeout)
    return RunResult(exit_code, status, counter[0], received, delivery)
