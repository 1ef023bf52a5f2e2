"""Every server setting in one table: name, default and help.

A setting is read from, in order: the command line (``--data-dir``), the environment
(``JOBPULSE_DATA_DIR``), then its default here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "jobpulse"


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    help: str
    type: type = str
    choices: tuple[str, ...] = ()  # the only values allowed, where the setting names one of a few
    minimum: int | None = None  # the smallest value allowed, for a number
    pattern: str = ""  # a regular expression the whole value must match, for a text


SETTINGS: tuple[Setting, ...] = (
    Setting("host", "127.0.0.1", "address to listen on; 0.0.0.0 exposes the server to the network"),
    Setting("port", 8642, "TCP port to listen on", int),
    Setting(
        "data_dir",
        None,
        "directory for the embedded store and the file store "
        "(default: $XDG_DATA_HOME/jobpulse, else ~/.local/share/jobpulse)",
        Path,
    ),
    Setting(
        "store",
        "embedded",
        "'embedded' (ClickHouse in-process through chdb, under data_dir) or a ClickHouse "
        "server URL clickhouse://user:password@host:8123/database (clickhouses:// for TLS)",
    ),
    Setting("database", "jobpulse", "database name inside the embedded store"),
    Setting(
        "cluster",
        "",
        "name of the ClickHouse cluster (remote_servers) the --store server belongs to: the schema is created ON "
        "CLUSTER, with replicated local tables and Distributed tables sharded by job (docs/deploy.md); empty for "
        "one ClickHouse server or the embedded store",
        pattern=r"[A-Za-z_][A-Za-z0-9_]{0,62}",
    ),
    Setting("log_level", "info", "server log level: debug, info, warning, error"),
    Setting("public_url", "", "URL users reach the server at, for links it prints (default: http://host:port)"),
    Setting(
        "raw_ttl_days",
        0,
        "days to keep raw system-metric samples; per-minute and hourly rollups stay; 0 keeps them forever",
        int,
    ),
    Setting(
        "recent_system_cells",
        1_000_000,
        "on the embedded store, how many minutes of system series (one minute of one worker's metric on one "
        "device: ~60 bytes) the server keeps in memory of the jobs it wrote from their first sample, so that their "
        "series at whole minutes or hours are answered without a query; the jobs written longest ago go first; 0 "
        "keeps none",
        int,
    ),
    Setting(
        "recent_chart_blocks",
        1_000_000,
        "on the embedded store, how many coarse blocks of the chart rollup (256 iterations or 65.5 s of one series "
        "and coarser: ~110 bytes each) the server keeps in memory of the jobs it wrote from their first point, so "
        "that charts of long series (millions of points, or days) are computed without a query; the jobs written "
        "longest ago go first; 0 keeps none",
        int,
    ),
    Setting("max_body_bytes", 64 << 20, "largest ingest body accepted, after decompression, in bytes", int, minimum=1),
    Setting("max_events", 1_000_000, "most events in one ingest batch", int, minimum=1),
    Setting("max_file_bytes", 256 << 20, "largest uploaded file (debug image, artifact) in bytes", int, minimum=1),
    Setting(
        "key_cache_seconds",
        5,
        "over a ClickHouse server, seconds a verified API key, a job's project or a job's worker is trusted before "
        "it is looked up again: a key revoked or a job deleted on another replica is noticed within this time (the "
        "embedded store trusts them until they change through this server)",
        int,
    ),
    Setting("session_hours", 24 * 7, "lifetime of a web UI session cookie, in hours", int),
    Setting("follow_poll_ms", 500, "how often a live log follow looks for new lines, in milliseconds", int),
    Setting("write_credentials", True, "on first start, write the admin key to the user's credentials file", bool),
    Setting(
        "metrics_access",
        "key",
        "who may read /metrics (Prometheus text): 'key' (any valid API key, e.g. a read key made for the scraper), "
        "'open' (anyone who reaches the server: for a server on an internal address), 'off' (no /metrics and no "
        "figures kept)",
        choices=("key", "open", "off"),
    ),
    Setting(
        "readiness_timeout_ms",
        2000,
        "how long /readyz waits for the store to answer a one-row query before it answers 503, in milliseconds",
        int,
        minimum=1,
    ),
    Setting(
        "insights_interval_s",
        60,
        "seconds between evaluations of the running jobs by the insight detectors (idle GPUs, hangs, stragglers...); "
        "0 evaluates only on demand; every replica may evaluate, findings and alerts still happen once",
        int,
        minimum=0,
    ),
    Setting(
        "master_key_file",
        None,
        "file holding the master key that seals the secrets of access key pairs (default: <data_dir>/master.key, "
        "created with mode 0600 on first start); every replica of a cluster must read the same key",
        Path,
    ),
)


def _default(name: str) -> Any:
    """The default the settings table gives ``name``."""
    return next(setting.default for setting in SETTINGS if setting.name == name)


@dataclass(frozen=True)
class Settings:
    """Every setting's value; what is not given takes the table's default (``data_dir``: ``default_data_dir()``)."""

    host: str = _default("host")
    port: int = _default("port")
    data_dir: Path = field(default_factory=default_data_dir)
    store: str = _default("store")
    database: str = _default("database")
    cluster: str = _default("cluster")
    log_level: str = _default("log_level")
    public_url: str = _default("public_url")
    raw_ttl_days: int = _default("raw_ttl_days")
    recent_system_cells: int = _default("recent_system_cells")
    recent_chart_blocks: int = _default("recent_chart_blocks")
    max_body_bytes: int = _default("max_body_bytes")
    max_events: int = _default("max_events")
    max_file_bytes: int = _default("max_file_bytes")
    key_cache_seconds: int = _default("key_cache_seconds")
    session_hours: int = _default("session_hours")
    follow_poll_ms: int = _default("follow_poll_ms")
    write_credentials: bool = _default("write_credentials")
    metrics_access: str = _default("metrics_access")
    readiness_timeout_ms: int = _default("readiness_timeout_ms")
    master_key_file: Path | None = _default("master_key_file")
    insights_interval_s: int = _default("insights_interval_s")

    @property
    def url(self) -> str:
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")

    @property
    def files_dir(self) -> Path:
        return Path(self.data_dir) / "files"

    @property
    def master_key_path(self) -> Path:
        return Path(self.master_key_file) if self.master_key_file else Path(self.data_dir) / "master.key"


def _convert(setting: Setting, raw: str) -> Any:
    if setting.type is bool:
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if setting.type is int:
        return int(raw)
    if setting.type is Path:
        return Path(raw).expanduser()
    return raw


def _check(setting: Setting, value: Any) -> Any:
    """``value`` if ``setting`` allows it; ValueError naming what it allows otherwise."""
    if setting.choices and value not in setting.choices:
        raise ValueError(f"must be one of {', '.join(setting.choices)}, got {value!r}")
    if setting.minimum is not None and value < setting.minimum:
        raise ValueError(f"must be at least {setting.minimum}, got {value!r}")
    if setting.pattern and value and not re.fullmatch(setting.pattern, str(value)):
        raise ValueError(f"must match {setting.pattern} (letters, digits and _), got {value!r}")
    return value


def load_settings(overrides: dict[str, Any] | None = None, environ: dict[str, str] | None = None) -> Settings:
    """Settings from ``overrides`` (command line), then ``JOBPULSE_*`` variables, then defaults."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        env = environ.get(f"JOBPULSE_{setting.name.upper()}")
        if overrides and overrides.get(setting.name) is not None:
            try:
                values[setting.name] = _check(setting, overrides[setting.name])
            except ValueError as exc:
                raise ValueError(f"--{setting.name.replace('_', '-')}: {exc}") from exc
        elif env not in (None, ""):
            try:
                values[setting.name] = _check(setting, _convert(setting, env))
            except ValueError as exc:
                raise ValueError(f"JOBPULSE_{setting.name.upper()}={env!r}: {exc}") from exc
        elif setting.default is not None:
            values[setting.name] = setting.default
    return Settings(**values)


assert {s.name for s in SETTINGS} == {f.name for f in fields(Settings)}, "settings table and Settings differ"
