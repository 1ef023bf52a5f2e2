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
GIVEN = "given"  # the source of a value passed as an argument (``--url``, ``url=``)
DEFAULT = "default"


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "jobpulse"


def credentials_path() -> Path:
    return config_dir() / "credentials.json"


@dataclass(frozen=True)
class Credentials:
    """A server URL and API key, and where each came from (``GIVEN``, the variable's name, the file's path,
    ``DEFAULT``; empty when the caller built them itself): an error can then say what to fix."""

    url: str
    api_key: str | None
    url_from: str = ""
    key_from: str = ""


def _stored(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        stored = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return stored if isinstance(stored, dict) else {}


def load_credentials(url: str | None = None, api_key: str | None = None) -> Credentials:
    """Resolve the server URL and API key for a client."""
    path = credentials_path()
    stored = _stored(path)
    url_source = (
        (url, GIVEN),
        (os.environ.get("JOBPULSE_URL"), "JOBPULSE_URL"),
        (stored.get("url"), str(path)),
        (DEFAULT_URL, DEFAULT),
    )
    key_source = (
        (api_key, GIVEN),
        (os.environ.get("JOBPULSE_API_KEY"), "JOBPULSE_API_KEY"),
        (stored.get("api_key"), str(path)),
        (None, ""),
    )
    found_url, url_from = next((value, where) for value, where in url_source if value)
    found_key, key_from = next((value, where) for value, where in key_source if value or not where)
    return Credentials(url=str(found_url).rstrip("/"), api_key=found_key, url_from=url_from, key_from=key_from)


def save_credentials(url: str, api_key: str) -> Path:
    """Write the credentials file, readable by its owner only."""
    path = credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(orjson.dumps({"url": url, "api_key": api_key}, option=orjson.OPT_INDENT_2))
    os.chmod(tmp, 0o600)
    tmp.replace(path)
    return path
