"""The module-level calls: ``jobpulse.init``, ``jobpulse.log``, ``jobpulse.finish``."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from jobpulse.sdk.problems import Problems
from jobpulse.sdk.run import Run
from jobpulse.sdk.sender import Delivery

_current: Run | None = None
_lock = threading.Lock()
_problems = Problems()


def init(
    project: str | None = None,
    job: str | None = None,
    worker: str | None = None,
    *,
    config: Mapping[str, Any] | None = None,
    tags: Iterable[str] | None = None,
    **options: Any,
) -> Run:
    """Start reporting for this process and return its ``Run``.

    ``project`` defaults to ``JOBPULSE_PROJECT`` or "default"; ``job`` to ``JOBPULSE_JOB``,
    the launcher's run id (torchrun, SLURM), or a new id; ``worker`` to ``JOBPULSE_WORKER``
    or ``worker-{rank}``, the rank read from the launcher (``RANK``, ``SLURM_PROCID``,
    ``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``, ...). A rank's worker is registered with its host, its
    node (``JOBPULSE_NODE``, which ``jobpulse run`` sets, else ``node-<node rank>``) and its local
    rank (``jobpulse.sdk.env``). The server URL and API key come from
    ``url=``/``api_key=``, ``JOBPULSE_URL``/``JOBPULSE_API_KEY``, or the credentials file.

    Other options (keywords): ``name``, ``capture_console`` (True unless
    ``JOBPULSE_CAPTURE_CONSOLE=0``; under ``jobpulse run`` too, which then leaves the lines to this
    worker, ``jobpulse.sdk.passthrough``), ``flush_timeout``
    (``JOBPULSE_FLUSH_TIMEOUT`` or 10 s: the longest wait at exit), ``flush_interval`` (1 s),
    ``spool_dir`` (``JOBPULSE_SPOOL_DIR`` or ``~/.cache/jobpulse/spool``), ``spool_max_bytes``
    (1 GiB per worker), ``replay_spool`` (True: send what dead processes left in the spool),
    ``handle_sigterm`` (True: SIGTERM ends the run as "stopped"), ``backoff_cap`` (30 s: the
    longest pause between two tries while the server is unreachable), ``send_arrow`` (True:
    scalars travel as Arrow streams where pyarrow is installed, the cheapest form to encode and to
    store; False, or no pyarrow: columnar JSON), ``init_timeout`` (``JOBPULSE_INIT_TIMEOUT`` or 10 s: the
    longest wait for the server's answer to the job's registration), ``never_raise`` (False unless
    ``JOBPULSE_NEVER_RAISE=1``).

    Raises ``ValueError`` naming the argument or environment variable that is wrong (a project id with a
    space, say), and ``jobpulse.RefusedError`` with the server's message when the server refuses to register
    the run (a bad key, a key without write access to the project), unless ``never_raise``: then the refusal
    is printed and the run goes on, its data kept in the spool for a key problem. A server that cannot be
    reached is no error: the run spools and sends later.

    A run that is still active is finished first.
    """
    global _current
    with _lock:
        previous = _current
    if previous is not None:
        previous.finish()
    run = Run(project, job, worker, config=config, tags=tags, **options)
    with _lock:
        _current = run
    return run


def current_run() -> Run | None:
    """The run started by the last ``init``, until it finishes."""
    run = _current
    return run if run is not None and not run.finished else None


def log(values: Mapping[str, Any], step: int | None = None) -> None:
    """``current_run().log(...)``; reported once and ignored when no run is active."""
    run = current_run()
    if run is not None:
        run.log(values, step)
    else:
        _problems("no-run", "jobpulse.log was called before jobpulse.init (or after finish); ignored")


def finish(status: str = "completed", timeout: float | None = None) -> Delivery | None:
    """Finish the current run (see ``Run.finish``)."""
    run = current_run()
    return run.finish(status, timeout) if run is not None else None
