"""Where the local CLI, SDK and agent find the server URL and API key.

Order: explicit arguments, then ``JOBPULSE_URL`` / ``JOBPULSE_API_KEY``, then the
credentials file that ``jobpulse server`` writes on its first start
(``$XDG_CONFIG_HOME/jobpulse/credentials.json``, by default under ``~/.config``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import orjson

DEFAULT_URL = "http://127.0.0.1:8642"


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "jobpulse"


def credentials_path() -> Path:
    return config_dir() / "credentials.json"


@dataclass(frozen=True)
class Credentials:
    url: str
    api_key: str | None


def load_credentials(url: str | None = None, api_key: str | None = None) -> Credentials:
    """Resolve the server URL and API key for a client."""
    stored: dict = {}
    path = credentials_path()
    if path.is_file():
        try:
            stored = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            stored = {}
    url = url or os.environ.get("JOBPULSE_URL") or stored.get("url") or DEFAULT_URL
    api_key = api_key or os.environ.get("JOBPULSE_API_KEY") or stored.get("api_key")
    return Credentials(url=url.rstrip("/"), api_key=api_key)


def save_credentials(url: str, api_key: str) -> Path:
    """Write the credentials file, readable by its owner only."""
    path = credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(orjson.dumps({"url": url, "api_key": api_key}, option=orjson.OPT_INDENT_2))
    os.chmod(tmp, 0o600)
    tmp.replace(path)
    return path
