"""The ``jobpulse`` command.

Each group of commands lives in a module of its own that adds them to the parser (``register``):
``server`` (server, demo, login), ``jobs`` (jobs, show), ``insights``, ``logs``, ``metrics`` (metrics, export),
``keys``, ``master-key``, ``sync``, and the agent's ``agent`` and ``run``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ..client import ApiError
from ..errors import JobpulseError
from ..version import __version__
from . import insights, jobs, keys, logs, master_key, metrics, server, sync

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jobpulse",
        description="Telemetry for ML training jobs: run the server, read jobs, logs and metrics back, "
        "wrap a training command.",
        epilog="Commands that talk to a server find it as the SDK does: --url/--api-key, then JOBPULSE_URL/"
        "JOBPULSE_API_KEY, then the credentials file the server writes on its first start. "
        "'jobpulse COMMAND --help' tells more.",
    )
    parser.add_argument("--version", action="version", version=f"jobpulse {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    server.register(sub)
    jobs.register(sub)
    insights.register(sub)
    logs.register(sub)
    metrics.register(sub)
    keys.register(sub)
    master_key.register(sub)
    sync.register(sub)
    try:
        from ..agent.commands import register
    except ImportError:
        pass
    else:
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ApiError, LookupError) as exc:  # the server, or what it holds, said no
        print(f"jobpulse {args.command}: {_text(exc)}", file=sys.stderr)
        return 1
    except (JobpulseError, ValueError) as exc:
        print(f"jobpulse {args.command}: {exc}", file=sys.stderr)  # what was asked cannot be
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (``jobpulse logs JOB | head``): say nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


def _text(exc: Exception) -> str:
    return str(exc.args[0]) if isinstance(exc, LookupError) and exc.args else str(exc)
