"""Helpers shared by every benchmark worker: standard library only, so it runs in any virtual environment.

A worker is a script run as a subprocess; it prints exactly one JSON object (its result) as the last line
of its standard output. Everything else (progress, server output) goes to standard error or to files.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

try:  # the fastest JSON parser at hand: orjson where installed (jobpulse's environment), else the stdlib
    from orjson import loads as json_loads
except ImportError:
    json_loads = json.loads

LOOPBACK = "127.0.0.1"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


class Http:
    """A keep-alive HTTP/1.1 client for one loopback server (no dependencies, little overhead): one
    connection per thread, so threads may share it to keep several requests in flight."""

    def __init__(self, base_url: str, headers: dict[str, str] | None = None, timeout: float = 300.0) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.hostname not in (LOOPBACK, "localhost"):
            raise ValueError(f"benchmark traffic stays on loopback, not {base_url}")
        self.host, self.port = parsed.hostname, parsed.port or 80
        self.headers = dict(headers or {})
        self.timeout = timeout
        self._local = threading.local()

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        for attempt in (0, 1):
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                conn.request(method, path, body=body, headers={**self.headers, **(headers or {})})
                response = conn.getresponse()
                return response.status, response.read()
            except (ConnectionError, http.client.HTTPException):
                self.close()  # e.g. the server closed an idle kept-alive connection: open a new one once
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def get_json(self, path: str, params: dict[str, Any] | None = None) -> Any:
        if params:
            path += "?" + urllib.parse.urlencode(params)
        status, body = self.request("GET", path)
        if status != 200:
            raise RuntimeError(f"GET {path} answered {status}: {body[:300]!r}")
        return json_loads(body)

    def post(self, path: str, body: bytes, content_type: str, expect: tuple[int, ...] = (200, 204)) -> bytes:
        status, answer = self.request("POST", path, body, {"Content-Type": content_type})
        if status not in expect:
            raise RuntimeError(f"POST {path} answered {status}: {answer[:300]!r}")
        return answer

    def close(self) -> None:
        """Close this thread's connection (the next request opens a new one)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def wait_http(url: str, timeout: float, proc: subprocess.Popen | None = None, ok: tuple[int, ...] = (200,)) -> None:
    """Poll ``url`` until it answers one of ``ok``; fail early if ``proc`` exits."""
    deadline = time.monotonic() + timeout
    parsed = urllib.parse.urlsplit(url)
    last = ""
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before answering {url}")
        try:
            conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=2)
            conn.request("GET", parsed.path or "/")
            status = conn.getresponse().status
            conn.close()
            if status in ok:
                return
            last = f"status {status}"
        except OSError as exc:
            last = repr(exc)
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout} s ({last})")


def start_server(
    argv: list[str], log_path: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.Popen:
    """Start a server in its own process group (so that stopping it stops its children too).

    The group is recorded in ``<result_path>.servers``, so that the benchmark can stop it even when this
    worker is killed before its own clean-up runs."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,
        )
    if _PARTIAL:
        with open(str(_PARTIAL[0]) + ".servers", "a") as registry:
            registry.write(f"{proc.pid}\n")
    return proc


def stop_server(proc: subprocess.Popen | None, timeout: float = 20.0) -> None:
    """SIGTERM the server's process group, then SIGKILL what is left after ``timeout``."""
    if proc is None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout)
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with suppress(subprocess.TimeoutExpired):
        proc.wait(5)


@contextmanager
def server(
    argv: list[str],
    log_path: Path,
    ready_url: str,
    timeout: float = 90.0,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    ok: tuple[int, ...] = (200,),
) -> Iterator[subprocess.Popen]:
    """A started server, stopped at the end whatever happens."""
    proc = start_server(argv, log_path, env, cwd)
    try:
        try:
            wait_http(ready_url, timeout, proc, ok)
        except RuntimeError as exc:
            tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
            raise RuntimeError(f"{exc}\n--- server output ---\n{tail}") from exc
        yield proc
    finally:
        stop_server(proc)


# -- memory and disk --------------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def tree_pids(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo and len(out) < 1000:
        p = todo.pop()
        out.append(p)
        todo.extend(_children(p))
    return out


def _pss(pid: int) -> int:
    """Proportional set size of one process (shared pages split among their users), else its RSS."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def mem_bytes(pid: int) -> int:
    """Memory of ``pid`` and all its descendants: their proportional set sizes added up (bytes).

    PSS rather than RSS, so that pages shared by a server's worker processes are counted once.
    """
    return sum(_pss(p) for p in tree_pids(pid))


class PeakMem:
    """Samples the memory (PSS) of a process tree every ``interval`` s in a thread; ``peak`` in bytes."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        self.pid, self.interval = pid, interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, mem_bytes(self.pid))
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakMem:
        self.peak = mem_bytes(self.pid)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, mem_bytes(self.pid))


def dir_bytes(path: Path) -> int:
    """Bytes allocated on disk under ``path`` (like ``du``), following no links."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            total += st.st_blocks * 512
    return total


def settled_dir_bytes(path: Path, seconds: float) -> int:
    """The smallest size of ``path`` over ``seconds`` (sampled each second): stores that merge or compact in
    the background delete what they superseded a while after a write (ClickHouse cleans up merged-away parts
    every 30-40 s), and the figure should be the data, not its passing copies."""
    smallest = dir_bytes(path)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(min(1.0, max(0.0, end - time.monotonic())))
        smallest = min(smallest, dir_bytes(path))
    return smallest


def settle_mem(pid: int, seconds: float = 2.0) -> int:
    """Memory (PSS) after ``seconds`` of rest (the minimum of samples taken over that time)."""
    end = time.monotonic() + seconds
    low = mem_bytes(pid)
    while time.monotonic() < end:
        time.sleep(0.1)
        low = min(low, mem_bytes(pid))
    return low


# -- distributions ----------------------------------------------------------------------------------


def install_bytes(*names: str) -> int:
    """Bytes on disk of the installed distributions ``names`` and everything they require, transitively."""
    import importlib.metadata as md
    import re

    seen: set[str] = set()
    todo = [n.lower() for n in names]
    total = 0
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        for f in dist.files or []:
            with suppress(OSError):
                total += os.path.getsize(dist.locate_file(f))
        for req in dist.requires or []:
            if "extra ==" in req:
                continue
            match = re.match(r"[A-Za-z0-9_.-]+", req)
            if match:
                todo.append(match.group(0).lower())
    return total


def version_of(name: str) -> str:
    import importlib.metadata as md

    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "not installed"


# -- timing and results ------------------------------------------------------------------------------


class Budget:
    """A wall-clock budget: ``left()`` seconds remain; ``over()`` once spent."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def over(self) -> bool:
        return self.left() <= 0


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


_PARTIAL: list[Path] = []  # where a worker keeps what it measured so far (set by read_config)


class Result:
    """What a worker measured: figures (lists of repeats), notes and errors by workload.

    Every change is also written to the config's ``result_path`` (when given), so that a worker stopped at
    its time limit still leaves what it had measured.
    """

    def __init__(self, system: str) -> None:
        self.data: dict[str, Any] = {
            "system": system,
            "versions": {},
            "figures": {},
            "notes": {},
            "errors": {},
        }

    def add(self, name: str, value: float, unit: str, **meta: Any) -> None:
        entry = self.data["figures"].setdefault(name, {"unit": unit, "values": []})
        entry["values"].append(value)
        entry.update(meta)
        self.save()

    def note(self, name: str, text: str) -> None:
        self.data["notes"][name] = text
        self.save()

    def save(self) -> None:
        if _PARTIAL:
            tmp = _PARTIAL[0].with_suffix(".tmp")
            tmp.write_text(json.dumps(self.data))
            tmp.replace(_PARTIAL[0])

    def error(self, name: str, exc: BaseException | str) -> None:
        text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        self.data["errors"][name] = text[-1500:]
        log(f"{self.data['system']} {name} failed: {text[-500:]}")
        self.save()

    @contextmanager
    def guard(self, name: str) -> Iterator[None]:
        """Record an exception as this workload's error and go on with the next one."""
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - a peer failing must not stop the suite
            import traceback

            self.error(name, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")

    def emit(self) -> None:
        sys.stdout.write("\n" + json.dumps(self.data) + "\n")
        sys.stdout.flush()


def read_config() -> dict[str, Any]:
    """The worker's configuration: a JSON object as the first command-line argument."""
    if len(sys.argv) < 2:
        raise SystemExit(f"usage: {sys.argv[0]} CONFIG_JSON")
    cfg = json.loads(sys.argv[1])
    if cfg.get("result_path"):
        _PARTIAL[:] = [Path(cfg["result_path"])]
    # SIGTERM (the benchmark's time limit) unwinds the worker, so its servers are stopped on the way out
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return cfg


# -- the data every system gets ------------------------------------------------------------------------

T0_MS = 1_700_000_000_000  # the first timestamp of every workload
STEP_MS = 100  # scalar steps are 100 ms apart


def scalar_value(metric: int, step: int) -> float:
    """The value of metric ``metric`` at ``step``: a decaying curve with deterministic noise."""
    return 1.0 / (1.0 + 1e-4 * step) + 0.01 * metric + ((step * 7919 + metric * 104729) % 1000) * 1e-6


def scalar_values(metric: int, start: int, stop: int) -> list[float]:
    return [scalar_value(metric, s) for s in range(start, stop)]


# workload 4's metrics, one per index ``metric`` of system_value
SYSTEM_METRICS = (
    "gpu_util",
    "gpu_mem_util",
    "gpu_mem_bytes",
    "gpu_power_w",
    "gpu_temp_c",
    "gpu_sm_clock_mhz",
    "gpu_pcie_rx_Bps",
    "gpu_pcie_tx_Bps",
    "gpu_nvlink_rx_Bps",
    "gpu_nvlink_tx_Bps",
)


def system_value(metric: int, gpu: int, second: int) -> float:
    """A system sample: a per-GPU level plus deterministic jitter."""
    return 50.0 + metric + (gpu % 8) + ((second * 31 + gpu * 17 + metric * 7) % 100) * 0.1


def log_message(worker: int, seq: int) -> str:
    """A log line; one in 1,000 carries the word the search looks for."""
    word = "NaN-detected" if seq % 1000 == 999 else "ok"
    return f"step {seq} worker {worker} loss {1.0 / (1 + seq):.6f} lr 3e-4 throughput 1234.5 img/s {word}"


def time_calls(
    call: Callable[[int], Any], max_calls: int, max_s: float, first_step: int = 0, chunk: int = 100
) -> tuple[float, int]:
    """Call ``call(step)`` in a tight loop, at most ``max_calls`` times and about ``max_s`` seconds;
    answers (microseconds per call, calls made)."""
    calls, start = 0, time.perf_counter()
    limit = start + max_s
    while calls < max_calls:
        for step in range(first_step + calls, first_step + calls + chunk):
            call(step)
        calls += chunk
        if time.perf_counter() > limit:
            break
    return (time.perf_counter() - start) / calls * 1e6, calls


FIVE = {"loss": 0.5, "acc": 0.9, "lr": 3e-4, "grad_norm": 1.5, "tokens_per_s": 12345.0}
