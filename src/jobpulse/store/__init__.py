"""The store: one query layer over ClickHouse SQL, on the embedded engine or a ClickHouse server."""

from __future__ import annotations

from pathlib import Path

from .catalogue import Catalogue
from .changes import Changes
from .chart_recent import RecentCharts
from .cluster_schema import sharded_tables
from .engine import EmbeddedEngine, Engine, HttpEngine
from .events import Events
from .files import Files
from .findings import Findings
from .insight_config import InsightConfig
from .insight_data import InsightData
from .job_rows import Job
from .jobs import Jobs
from .keys import ApiKey, Keys
from .logs import LogFilter, Logs
from .progress import Progress, WorkerProgress
from .scalar_stats import ScalarStats
from .scalars import Scalars
from .schema import SCHEMA_VERSION, migrate, set_raw_ttl
from .sessions import Session, Sessions
from .state import ServerState
from .system import SeriesWindow, System
from .system_recent import RecentSystem
from .usage import Usage
from .workers import Worker
from .writer import Writer

__all__ = ["ApiKey", "Engine", "Job", "LogFilter", "SeriesWindow", "Session", "Store", "Worker", "open_store"]


class Store:
    """Everything the APIs read and write, grouped by concept; all SQL lives below this object."""

    def __init__(
        self,
        engine: Engine,
        database: str = "jobpulse",
        *,
        raw_ttl_days: int = 0,
        sees_every_write: bool | None = None,
        recent_system_cells: int = 1_000_000,
        recent_chart_blocks: int = 1_000_000,
    ) -> None:
        """``sees_every_write``: whether every write to ``database`` passes through this object, so that
        answers can be remembered until its own writes change them; by default true for the embedded
        engine (its process alone owns the data directory) and false for a ClickHouse server. Such a store
        keeps up to ``recent_system_cells`` minutes of the system series it wrote in memory
        (``system_recent.py``), and up to ``recent_chart_blocks`` coarse blocks of the chart rollup of the
        scalar series it wrote (``chart_recent.py``)."""
        self.engine = engine
        self.database = database
        cluster = getattr(engine, "cluster", "")
        self.previous_version = migrate(engine, database, cluster)
        set_raw_ttl(engine, database, raw_ttl_days, cluster)
        if cluster:
            engine.sharded = sharded_tables(engine, database)
        if sees_every_write is None:
            sees_every_write = isinstance(engine, EmbeddedEngine)
        self.changes = Changes(sees_every_write=sees_every_write)
        self.jobs = Jobs(engine, database, self.changes)
        catalogue = Catalogue(engine, database, self.changes)
        keeps_charts = sees_every_write and recent_chart_blocks > 0
        charts = RecentCharts(recent_chart_blocks, self.changes.deletions) if keeps_charts else None
        self.scalars = Scalars(engine, database, self.changes, catalogue, recent=charts, job_leaders=self._job_leaders)
        self.events = Events(engine, database)
        self.files = Files(engine, database)
        self.scalar_stats = ScalarStats(engine, database, self.scalars.leaders)
        self._progress = Progress(engine, database)
        self.logs = Logs(engine, database, self.changes)
        keeps_recent = sees_every_write and recent_system_cells > 0
        recent = RecentSystem(recent_system_cells, self.changes.deletions) if keeps_recent else None
        self.system = System(engine, database, self.changes, recent=recent)
        self.sessions = Sessions(engine, database)
        self.keys = Keys(engine, database, self.sessions)
        self.state = ServerState(engine, database)
        self.usage = Usage(engine, database)
        self.writer = Writer(engine, database, self.changes, catalogue, recent, charts)
        self.findings = Findings(engine, database)
        self.insight_config = InsightConfig(engine, database)
        self.insight_data = InsightData(engine, database)

    def progress(self, job: str, since_ms: int | None = None) -> list[WorkerProgress]:
        """Step progress of each worker (rank) of ``job`` that reported scalars, by worker name: first and last
        iteration and time (epoch ms), points, and the recent step rate in iterations per second over the points
        from ``since_ms`` (default: the minute before the job's last reported time) up to the job's last reported
        time (None where the worker reported nothing since). See ``store/progress.py``; ``progress.ranking``
        summarises it (min / median / max, the slowest workers)."""
        return self._progress.of(job, since_ms)

    def _job_leaders(self, jobs: list[str]) -> dict[str, str]:
        """The ``leader`` field of each of ``jobs`` ("" where unset): the worker whose scalar series charts show."""
        return {name: job.leader for name, job in self.jobs.get_many(jobs).items()}

    @property
    def schema_version(self) -> int:
        return SCHEMA_VERSION

    def close(self) -> None:
        self.writer.close()
        self.engine.close()


def open_store(
    url: str | None,
    data_dir: Path,
    *,
    database: str = "jobpulse",
    raw_ttl_days: int = 0,
    recent_system_cells: int = 1_000_000,
    recent_chart_blocks: int = 1_000_000,
    cluster: str = "",
) -> Store:
    """``url`` None or ``embedded``: chdb under ``data_dir``; ``clickhouse://user:pass@host:8123/db``: a server, or
    with ``cluster`` the ClickHouse cluster of that name the server belongs to (docs/deploy.md)."""
    if url in (None, "", "embedded"):
        if cluster:
            raise ValueError("--cluster needs a ClickHouse server: --store clickhouse://user:password@host:8123/db")
        path = data_dir / "clickhouse"
        path.mkdir(parents=True, exist_ok=True)
        return Store(
            EmbeddedEngine(str(path)),
            database,
            raw_ttl_days=raw_ttl_days,
            recent_system_cells=recent_system_cells,
            recent_chart_blocks=recent_chart_blocks,
        )
    engine = HttpEngine(url, cluster=cluster)
    return Store(engine, engine.database, raw_ttl_days=raw_ttl_days)
