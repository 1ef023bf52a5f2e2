"""Helpers of the SDK tests: HTTP reads of the native API, client processes, polling."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson


def api_get(srv, path: str, **params) -> dict:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    req = urllib.request.Request(srv.url + path + query, headers={"Authorization": f"Bearer {srv.api_key}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return orjson.loads(resp.read())


def api_bytes(srv, path: str) -> bytes:
    req = urllib.request.Request(srv.url + path, headers={"Authorization": f"Bearer {srv.api_key}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.read()


def client_env(srv, spool_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBPULSE_")}
    env.update(
        JOBPULSE_URL=srv.url,
        JOBPULSE_API_KEY=srv.api_key,
        JOBPULSE_SPOOL_DIR=str(spool_dir),
        XDG_CONFIG_HOME=str(spool_dir.parent / "client-config"),
        PYTHONUNBUFFERED="1",
        **extra,
    )
    return env


def run_options(srv, tmp_path: Path, **extra: object) -> dict:
    """Options of an in-process run against ``srv``: no console capture, no signal handler, a spool of
    its own that is not replayed."""
    return dict(
        url=srv.url,
        api_key=srv.api_key,
        capture_console=False,
        handle_sigterm=False,
        spool_dir=tmp_path / "spool",
        replay_spool=False,
        **extra,
    )


def start_client(code: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def own_server(tmp_path: Path):  # noqa: ANN201 - jobpulse.testing.ServerProcess
    """A started server with its data and configuration under ``tmp_path``, for a test that stops it."""
    from jobpulse.testing import ServerProcess

    srv = ServerProcess(data_dir=tmp_path / "data", config_dir=tmp_path / "config")
    srv.data_dir.mkdir()
    srv.config_dir.mkdir()
    srv.start()
    return srv


@contextmanager
def client_beside_server(tmp_path: Path, code: str) -> Iterator[tuple]:
    """A server of its own and a client process running ``code`` against it; both stopped at the end."""
    srv = own_server(tmp_path)
    proc = None
    try:
        proc = start_client(code, client_env(srv, tmp_path / "spool"))
        yield srv, proc
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate()
        srv.stop()


def outlast_outage(srv, proc: subprocess.Popen, stop: Callable[[], None], running: str, timeout: float) -> None:
    """Take the server down with ``stop`` while the client runs (``running``: why it must still be running),
    start it again, and check that the client then finished well, having said it could not reach it."""
    stop()
    time.sleep(0.5)
    assert proc.poll() is None, running
    srv.start()
    _out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    assert "cannot reach" in err


def wait_for(check: Callable[[], object], timeout: float, what: str, interval: float = 0.05) -> object:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def all_points(srv, job: str, metric: str, variant: str) -> dict:
    return api_get(srv, f"/jp/v1/jobs/{job}/scalars/points", metric=metric, variant=variant, limit=100_000)


def all_lines(srv, job: str) -> list[dict]:
    return api_get(srv, f"/jp/v1/jobs/{job}/logs", start="head", limit=100_000)["lines"]
