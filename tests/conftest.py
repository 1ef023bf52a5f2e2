"""Shared fixtures: one embedded engine per test session, a fresh database per test, the real app."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from helpers import CHROMIUM, CHROMIUM_ARGS, fresh_database
from jobpulse.server import create_app
from jobpulse.settings import Settings
from jobpulse.store import Store
from jobpulse.store.engine import EmbeddedEngine, Engine, HttpEngine
from jobpulse.testing import ServerProcess, running_server
from jobpulse.testing_clickhouse import running_standin

CLICKHOUSE_URL = os.environ.get("JOBPULSE_TEST_CLICKHOUSE_URL", "")
# the cluster of that server, if the schema is to be laid out on it (docs/deploy.md)
CLICKHOUSE_CLUSTER = os.environ.get("JOBPULSE_TEST_CLICKHOUSE_CLUSTER", "")


@pytest.fixture(scope="session")
def engine_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="jobpulse-tests-") as tmp:
        yield Path(tmp)


@pytest.fixture(scope="session")
def embedded_engine(engine_dir: Path) -> Iterator[EmbeddedEngine]:
    engine = EmbeddedEngine(str(engine_dir / "clickhouse"))
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def clickhouse_url(engine_dir: Path) -> Iterator[str]:
    """The store URL of the HTTP transport: JOBPULSE_TEST_CLICKHOUSE_URL when set (a real ClickHouse server or
    cluster), else one ClickHouse stand-in process for the whole test session (chdb behind ClickHouse's HTTP
    interface)."""
    if CLICKHOUSE_URL:
        yield CLICKHOUSE_URL
        return
    with running_standin(engine_dir / "standin") as url:
        yield url


@pytest.fixture(scope="session", params=["embedded", "clickhouse"])
def any_engine(request: pytest.FixtureRequest, embedded_engine: EmbeddedEngine) -> Iterator[Engine]:
    """Every transport: the embedded engine, and HTTP (to the stand-in, or to JOBPULSE_TEST_CLICKHOUSE_URL)."""
    if request.param == "embedded":
        yield embedded_engine
        return
    engine = HttpEngine(request.getfixturevalue("clickhouse_url"), cluster=CLICKHOUSE_CLUSTER)
    yield engine
    engine.close()


@pytest.fixture
def store(embedded_engine: EmbeddedEngine) -> Store:
    """A Store over a database of its own on the session's embedded engine."""
    return Store(embedded_engine, fresh_database())


@pytest.fixture
def any_store(any_engine: Engine) -> Iterator[Store]:
    """A Store on each transport, in a database of its own."""
    database = fresh_database()
    yield Store(any_engine, database)
    cluster = getattr(any_engine, "cluster", "")
    any_engine.command(f"DROP DATABASE IF EXISTS {database}" + (f" ON CLUSTER {cluster} SYNC" if cluster else ""))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path, write_credentials=False, follow_poll_ms=50, insights_interval_s=0)


@pytest.fixture
def admin_token(store: Store) -> str:
    return store.keys.create("test admin", ["*"], "admin")[1]


@pytest.fixture
def app(store: Store, settings: Settings):  # noqa: ANN201 - FastAPI
    return create_app(store, settings)


@pytest.fixture
def client(app, admin_token: str) -> Iterator[TestClient]:  # noqa: ANN001
    """The in-process client of the real app, authenticated as an admin of every project."""
    with TestClient(app, headers={"Authorization": f"Bearer {admin_token}"}) as test_client:
        yield test_client


@pytest.fixture
def anonymous(app) -> Iterator[TestClient]:  # noqa: ANN001
    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture
def make_key(store: Store) -> Callable[[list[str], str], str]:
    """Create a key of ``role`` on ``projects``; answers its token."""

    def make(projects: list[str], role: str) -> str:
        return store.keys.create(f"{role} on {','.join(projects)}", projects, role)[1]

    return make


@pytest.fixture(scope="session")
def server() -> Iterator[ServerProcess]:
    """One real ``jobpulse server`` process for the end-to-end tests of the session."""
    with running_server() as process:
        yield process


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for every browser test of the session (tests/ui, tests/insights)."""
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright for Python is not installed (pip install playwright)")
    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    except Exception as exc:  # a broken or missing browser binary
        playwright.stop()
        pytest.skip(f"Chromium does not start: {exc}")
    yield chromium
    chromium.close()
    playwright.stop()
