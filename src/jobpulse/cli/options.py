"""What the commands share: the options that reach a server, and the client they make."""

from __future__ import annotations

import argparse
import sys
import urllib.parse

from ..client import Client
from ..credentials import load_credentials


def client_options(p: argparse.ArgumentParser) -> None:
    """``--url`` and ``--api-key``, found as the SDK finds them when not given."""
    p.add_argument("--url", help="server URL (default: JOBPULSE_URL, then the credentials file)")
    p.add_argument("--api-key", help="API key (default: JOBPULSE_API_KEY, then the credentials file)")


def read_options(p: argparse.ArgumentParser) -> None:
    """The options of a command that reads: the server's, and ``--json``."""
    p.add_argument("--json", action="store_true", help="print JSON (numbers as the API gives them) instead of text")
    client_options(p)


def connect(args: argparse.Namespace) -> Client:
    """The client of the server and key that the command line, the environment or the credentials file name."""
    return Client(load_credentials(args.url, args.api_key))


def color(text: str, code: str, stream: object = None) -> str:
    """``text`` in an ANSI color when it goes to a terminal and NO_COLOR is not set."""
    import os

    out = stream if stream is not None else sys.stdout
    if os.environ.get("NO_COLOR") or not getattr(out, "isatty", lambda: False)():
        return text
    return f"\033[{code}m{text}\033[0m"


def job_path(job: str) -> str:
    """The API path of ``job``."""
    return f"/jp/v1/jobs/{urllib.parse.quote(job, safe='')}"
