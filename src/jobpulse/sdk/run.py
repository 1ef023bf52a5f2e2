"""A run: what one process of a training job reports.

Report calls (``log``, ``scalar``, ``vector``, ``plot``, ``image``, ``text``) append one
tuple to a deque and return; they never wait for the network. A bad argument (a step that is
not a whole number, ``log`` given something else than a mapping, an unknown log level) raises
``ValueError`` at once; bad values (a metric that is not a number, an image that cannot be
read) never raise: they are reported once per kind of problem on stderr and dropped. The
sender thread does the rest (see ``jobpulse.sdk.sender``).

Making a run checks its names (``ValueError`` naming the argument or variable) and registers the
job with the server, waiting for the answer (``init_timeout``): a server that refuses it raises
``RefusedError`` unless ``never_raise``; one that cannot be reached does not (the registration is
spooled and sent later, as everything else).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import time
import traceback
import weakref
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from jobpulse.credentials import load_credentials
from jobpulse.sdk import checks
from jobpulse.sdk.console import Console
from jobpulse.sdk.env import Placement, detect_placement, env_flag, env_float, run_names
from jobpulse.sdk.media import snapshot
from jobpulse.sdk.problems import Problems
from jobpulse.sdk.sender import Delivery, Sender, SenderConfig
from jobpulse.sdk.seq import SeqClock
from jobpulse.sdk.spool import default_root
from jobpulse.sdk.sync import leftover_message
from jobpulse.sdk.transport import quote
from jobpulse.sdk.values import ITER_MAX, ITER_MIN, plot_json
from jobpulse.sdk.wire import (
    IMAGE,
    LINE,
    LOG_DICT,
    MARK,
    PLOT,
    REQUEST,
    SCALAR,
    VECTOR,
    Request,
)

STATUSES = ("completed", "failed", "stopped")
_time_ns = time.time_ns
_runs: weakref.WeakSet[Run] = weakref.WeakSet()


class Run:
    """One process (worker) of a job. Use ``jobpulse.init`` to make one.

    ``log({"train/loss": 0.1, "lr": 3e-4}, step=100)`` reports scalars at iteration
    ``step``. A key is stored as written, as both metric and variant (``"train/loss"``:
    one chart ``train/loss``, in the UI's section ``train``; docs/names.md). Without ``step``, the iteration is
    the previous call's plus one (0 for the first call). Values are numbers (Python,
    numpy, 0-d tensors); NaN and infinities are kept as such.
    """

    def __init__(
        self,
        project: str | None = None,
        job: str | None = None,
        worker: str | None = None,
        *,
        name: str | None = None,
        config: Mapping[str, Any] | None = None,
        tags: Iterable[str] | None = None,
        url: str | None = None,
        api_key: str | None = None,
        capture_console: bool | None = None,
        flush_timeout: float | None = None,
        flush_interval: float = 1.0,
        spool_dir: str | Path | None = None,
        spool_max_bytes: int | None = None,
        replay_spool: bool = True,
        handle_sigterm: bool = True,
        backoff_cap: float = 30.0,
        max_queue: int = 2_000_000,
        send_arrow: bool = True,
        never_raise: bool | None = None,
        init_timeout: float | None = None,
    ) -> None:
        self.placement: Placement = detect_placement()
        self.project, self.job, self.worker, shared = run_names(project, job, worker, self.placement)
        if not shared and self.placement.world_size > 1:
            print(
                f"jobpulse: no job id given and none found in the environment; "
                f"rank {self.placement.rank} reports to its own job {self.job} "
                "(set JOBPULSE_JOB or pass job=)",
                file=sys.__stderr__,
            )
        if name is not None and not isinstance(name, str):
            raise ValueError(f"name must be a string, got {name!r}")
        tags = checks.check_tags(tags)
        self._config: dict[str, Any] = checks.check_config(config)
        if never_raise is None:
            never_raise = checks.check_flag(os.environ.get("JOBPULSE_NEVER_RAISE"), "JOBPULSE_NEVER_RAISE")
        if init_timeout is None:
            init_timeout = env_float("JOBPULSE_INIT_TIMEOUT", 10.0)
        creds = load_credentials(url, api_key)
        self.url = creds.url
        self.flush_timeout = env_float("JOBPULSE_FLUSH_TIMEOUT", 10.0) if flush_timeout is None else flush_timeout
        self.delivery: Delivery | None = None
        self.status: str | None = None

        self._q: deque = deque()
        self._max_queue = max_queue
        self._next_step = 0
        self._clock = SeqClock()
        self._finished = False
        self._failure: str | None = None
        self._terminated = False
        self._finish_lock = threading.Lock()

        if capture_console is None:
            capture_console = env_flag("JOBPULSE_CAPTURE_CONSOLE")
        # Each rank ends its own worker, under `jobpulse run` too (its node worker ends with the command);
        # JOBPULSE_WORKER_STATUS=0 leaves a completed worker's end to whoever runs the process (it still registers).
        self._worker_status = env_flag("JOBPULSE_WORKER_STATUS")

        job_path = f"/jp/v1/jobs/{quote(self.job)}"
        self._worker_path = f"{job_path}/workers/{quote(self.worker)}"
        self._job_path = job_path
        body = {"project": self.project, "job": self.job, "name": name or self.job, "tags": tags}
        body["config"] = self._config
        registration = self._encoded("POST", "/jp/v1/jobs", {**body, "at": _time_ns() // 1_000_000}, "job")
        registered = checks.register(registration, creds.url, creds.api_key, init_timeout, never_raise)

        self._console = Console(self._line)
        if capture_console:
            self._console.start()
        self._problems = Problems(self._console.stderr_stream() if capture_console else None)
        if not registered:
            self._q.append((REQUEST, registration))  # sent by the sender, kept in the spool while need be
        self._put_worker({"status": "running", **self.placement.worker_fields()})

        root = Path(spool_dir) if spool_dir is not None else default_root()
        spool_bytes = spool_max_bytes or int(env_float("JOBPULSE_SPOOL_MAX_BYTES", 1 << 30))
        cfg = SenderConfig(
            url=creds.url,
            api_key=creds.api_key,
            project=self.project,
            job=self.job,
            worker=self.worker,
            spool_root=root,
            spool_max_bytes=spool_bytes,
            flush_interval=flush_interval,
            replay_orphans=replay_spool,
            backoff_cap=backoff_cap,
            arrow=send_arrow,
        )
        self._sender = Sender(cfg, self._q, self._problems)
        self._previous_hook = sys.excepthook
        sys.excepthook = self._excepthook
        self._previous_sigterm: Any = None
        main = threading.current_thread() is threading.main_thread()
        if handle_sigterm and main and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            self._previous_sigterm = signal.signal(signal.SIGTERM, self._sigterm)
        _runs.add(self)
        self._sender.start()
        atexit.register(self._at_exit)

    @property
    def finished(self) -> bool:
        """Whether ``finish`` was called (report calls are ignored from then on)."""
        return self._finished

    # -- report calls (cheap; never raise) ------------------------------------------------

    def log(self, values: Mapping[str, Any], step: int | None = None) -> None:
        """Report scalars ``{key: value}`` at iteration ``step`` (see the class docstring)."""
        if step is not None and (type(step) is not int or not ITER_MIN <= step <= ITER_MAX):
            step = checks.check_step(step)
        if type(values) is not dict and not isinstance(values, Mapping):
            raise ValueError(f"run.log takes a mapping of names to values, got {values!r}")
        try:
            if step is None:
                step = self._next_step
            self._next_step = step + 1
            q = self._q
            if len(q) < self._max_queue:
                q.append((LOG_DICT, _time_ns(), step, dict(values)))
            else:
                self._overflow()
        except Exception as exc:
            self._problems("bad-log", f"run.log could not take its arguments ({exc!r}); dropped")

    def _push(self, record: tuple) -> None:
        if len(self._q) < self._max_queue:
            self._q.append(record)
        else:
            self._overflow()

    def _overflow(self) -> None:
        if self._finished:
            self._problems("finished", f"a report call after the run {self.job}/{self.worker} finished is ignored")
        else:
            self._problems("queue-full", f"the report queue is full ({self._max_queue} records); records are dropped")

    def _current_iter(self, it: int | None) -> int:
        return max(self._next_step - 1, 0) if it is None else checks.check_step(it, "iter")

    def scalar(self, metric: str, variant: str, value: float, iter: int | None = None) -> None:
        """Report one scalar point ``(metric, variant, iter) = value``."""
        self._push((SCALAR, _time_ns(), metric, variant, self._current_iter(iter), value))

    def vector(self, metric: str, variant: str, values: Iterable[float], iter: int | None = None) -> None:
        """Report a vector of numbers (a histogram's counts, say) at one iteration."""
        try:
            data = values.tolist() if hasattr(values, "tolist") else list(values)  # type: ignore[union-attr]
        except Exception as exc:
            self._problems("bad-vector", f"run.vector values are not a sequence ({exc!r}); dropped")
            return
        self._push((VECTOR, _time_ns(), metric, variant, self._current_iter(iter), data))

    def plot(self, figure: Any, metric: str = "plot", variant: str = "", iter: int | None = None) -> None:
        """Report a Plotly figure (object, dict or JSON string)."""
        try:
            data = plot_json(figure)
        except Exception as exc:
            self._problems("bad-plot", f"run.plot could not encode the figure ({exc!r}); dropped")
            return
        self._push((PLOT, _time_ns(), metric, variant, self._current_iter(iter), data))

    def image(
        self,
        image: Any,
        metric: str = "debug",
        variant: str = "",
        iter: int | None = None,
        key: str | None = None,
    ) -> None:
        """Report a debug image: a file path, encoded bytes, a PIL image, or an array.

        Arrays are HxW, HxWxC or CxHxW (C in 1, 3, 4); floats are taken as 0..1. The file
        is uploaded, and the image event sent, by the sender thread. A path is read then,
        not now: do not overwrite the file right away.
        """
        try:
            data = snapshot(image)
        except Exception as exc:
            self._problems("bad-image", f"run.image could not copy the image ({exc!r}); dropped")
            return
        self._push((IMAGE, _time_ns(), metric, variant, self._current_iter(iter), key, data))

    def set_config(self, config: Mapping[str, Any]) -> None:
        """Add to the job's config (hyperparameters); keys given again are replaced."""
        try:
            self._config.update(config)
            self._request("PATCH", self._job_path, {"config": dict(self._config)}, "job")
        except Exception as exc:
            self._problems("bad-config", f"run.set_config could not take its argument ({exc!r}); ignored")

    def text(self, message: str, level: str = "info") -> None:
        """Add a line (or lines) of text to the job's log, as this worker."""
        self._line(checks.check_level(level), str(message))

    def _line(self, level: str, message: str) -> None:
        ts, seq = self._clock.next()
        self._push((LINE, ts, seq, level, message))

    # -- flushing and the end ---------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until what was reported so far is delivered; False if the wait ran out first."""
        if self._finished:
            return not (self.delivery and self.delivery.spooled_requests)
        deadline = time.monotonic() + (self.flush_timeout if timeout is None else timeout)
        done = threading.Event()
        self._q.append((MARK, done))
        self._sender.flush()
        if not done.wait(max(0.0, deadline - time.monotonic())):
            return False
        while self._sender.busy() and time.monotonic() < deadline:
            self._sender.flush()
            time.sleep(0.01)
        return not self._sender.busy()

    def finish(self, status: str = "completed", timeout: float | None = None) -> Delivery | None:
        """End the run: set the worker's status, deliver what is queued (bounded wait), report leftovers."""
        if status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
        with self._finish_lock:
            if self._finished:
                return self.delivery
            self._finished = True
        self.status = status
        self._console.stop()
        if sys.excepthook == self._excepthook:
            sys.excepthook = self._previous_hook
        if self._previous_sigterm is not None and signal.getsignal(signal.SIGTERM) == self._sigterm:
            with contextlib.suppress(ValueError):  # not the main thread
                signal.signal(signal.SIGTERM, self._previous_sigterm)
        if status == "failed" and self._failure:
            self._request("PATCH", self._job_path, {"error_message": self._failure[:2000]}, "job")
        if self._worker_status or status != "completed":
            self._put_worker({"status": status})
        self._max_queue = 0  # later report calls are ignored
        wait = self.flush_timeout if timeout is None else timeout
        self.delivery = delivery = self._sender.close(wait)
        leftover = leftover_message(delivery, self.job, self.url, wait)
        if leftover:
            self._problems.say(leftover)
        if delivery.dropped_events:
            self._problems.say(f"{delivery.dropped_events} event(s) were dropped (see the messages above)")
        with contextlib.suppress(Exception):
            atexit.unregister(self._at_exit)
        return delivery

    def _put_worker(self, body: dict) -> None:
        """The worker's status, timed now: sent late (from the spool), it still says when the worker ran."""
        self._request("PUT", self._worker_path, {**body, "at": _time_ns() // 1_000_000}, "worker")

    def _request(self, method: str, path: str, body: dict, kind: str) -> None:
        self._q.append((REQUEST, self._encoded(method, path, body, kind)))

    @staticmethod
    def _encoded(method: str, path: str, body: dict, kind: str) -> Request:
        data = orjson.dumps(body, default=str, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)
        return Request(method, path, data, "application/json", "", 0, kind)

    def _excepthook(self, exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if not issubclass(exc_type, KeyboardInterrupt):
            self._failure = "".join(traceback.format_exception_only(exc_type, exc)).strip()
        else:
            self._terminated = True
        self._console.level_override = "error"
        try:
            self._previous_hook(exc_type, exc, tb)
        finally:
            self._console.level_override = None

    def _sigterm(self, signum: int, frame: Any) -> None:
        self._terminated = True
        raise SystemExit(128 + signum)

    def _at_exit(self) -> None:
        status = "failed" if self._failure else ("stopped" if self._terminated else "completed")
        self.finish(status)

    def _disown(self) -> None:
        """In a forked child: this run belongs to the parent; report nothing from here."""
        self._finished = True
        self._max_queue = 0
        self._console.active = False

    def __enter__(self) -> Run:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.finish("completed")
        elif issubclass(exc_type, KeyboardInterrupt) or (
            issubclass(exc_type, SystemExit) and exc is not None and exc.code not in (0, None)
        ):
            self.finish("stopped")
        elif issubclass(exc_type, SystemExit):
            self.finish("completed")
        else:
            self._failure = "".join(traceback.format_exception_only(exc_type, exc)).strip()
            self._line("error", "".join(traceback.format_exception(exc_type, exc, tb)).rstrip("\n"))
            self.finish("failed")

    def __repr__(self) -> str:
        where = f"project={self.project!r} job={self.job!r} worker={self.worker!r}"
        return f"<jobpulse.Run {where} url={self.url!r}>"


def _after_fork_in_child() -> None:
    for run in list(_runs):
        run._disown()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
