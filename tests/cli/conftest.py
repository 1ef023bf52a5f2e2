"""Fixtures of the CLI tests: the session's real server holding the demo job, and the ``jobpulse`` command run
against it as a user would, finding the server and key in the credentials file the server wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from cli_support import DEMO_JOB, DEMO_PROJECT

from jobpulse.cli import main
from jobpulse.client import Client
from jobpulse.credentials import Credentials
from jobpulse.demo import load_demo


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture(scope="session")
def demo(server) -> str:  # noqa: ANN001 - jobpulse.testing.ServerProcess
    """The demo job, loaded once into the session's server under a project of its own."""
    load_demo(Client(Credentials(server.url, server.api_key)), job=DEMO_JOB, project=DEMO_PROJECT)
    return DEMO_JOB


@pytest.fixture
def user_env(server, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """The environment of a user on the server's machine: no JOBPULSE_ variables, the server's credentials file."""
    for name in [n for n in os.environ if n.startswith("JOBPULSE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(server.config_dir))
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.fixture
def jobpulse(user_env: None, capsys: pytest.CaptureFixture) -> Callable[..., Result]:
    """Run ``jobpulse ARGS`` in this process (its ``main``); answers its exit code and what it printed."""

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def jobpulse_process(user_env: None) -> Iterator[Callable[..., subprocess.Popen]]:
    """Start ``python -m jobpulse ARGS`` as a process of its own; every process is ended at the end of the test."""
    started: list[subprocess.Popen] = []

    def start(*args: str) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jobpulse", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
