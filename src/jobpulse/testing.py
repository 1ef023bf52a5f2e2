"""Start a real jobpulse server process for tests and benchmarks: loopback, temporary data, admin key."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import orjson

# Runs ``python -m jobpulse ...`` in a process that the kernel stops (SIGTERM) when the process that started
# it dies: a test run or benchmark that crashes leaves no server behind (Linux; elsewhere it runs untied).
_TIED_TO_STARTER = """
import ctypes, os, runpy, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass
else:
    if os.getppid() != int(sys.argv[1]):  # the starter died before the tie was made
        sys.exit(1)
del sys.argv[1]
runpy.run_module("jobpulse", run_name="__main__", alter_sys=True)
"""


# Debian's Chromium, which the browser tests and the UI benchmark drive through Playwright, and its flags.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class ServerProcess:
    """A ``jobpulse server`` child process; ``stop`` and ``start`` keep its data and port."""

    data_dir: Path
    config_dir: Path
    port: int = field(default_factory=free_port)
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen | None = None
    api_key: str = ""
    log_path: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environ(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBPULSE_")}
        env.update(XDG_CONFIG_HOME=str(self.config_dir), PYTHONUNBUFFERED="1", **self.env)
        return env

    def start(self, timeout: float = 60.0) -> None:
        """Start the process; returns once it is ready (``/readyz``: its store answers)."""
        self.log_path = self.data_dir / "server.log"
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child process writes it until stopped
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _TIED_TO_STARTER,
                str(os.getpid()),
                "server",
                "--port",
                str(self.port),
                "--data-dir",
                str(self.data_dir),
                *self.extra_args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.environ(),
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"jobpulse server exited with {self.process.returncode}:\n{self.output()}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.1)
        else:
            self.stop()
            raise RuntimeError(f"jobpulse server did not start within {timeout} s:\n{self.output()}")
        creds = self.config_dir / "jobpulse" / "credentials.json"
        if creds.is_file():
            self.api_key = orjson.loads(creds.read_bytes())["api_key"]

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""

    def stop(self, timeout: float = 20.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@contextmanager
def running_server(
    data_dir: Path | None = None, *, extra_args: list[str] | None = None, env: dict[str, str] | None = None
) -> Iterator[ServerProcess]:
    """A started server; stopped at the end. Its admin key is ``.api_key``, its address ``.url``."""
    with tempfile.TemporaryDirectory(prefix="jobpulse-") as tmp:
        root = Path(data_dir or tmp)
        (root / "config").mkdir(parents=True, exist_ok=True)
        server = ServerProcess(
            data_dir=root / "data", config_dir=root / "config", extra_args=extra_args or [], env=env or {}
        )
        server.data_dir.mkdir(parents=True, exist_ok=True)
        server.start()
        try:
            yield server
        finally:
            server.stop()
