"""Fixtures of the ClearML API tests: one app and database per test module (the tests use tasks of their own,
so they do not see each other's data), and a started task per test."""

from __future__ import annotations

import os
import uuid

import pytest
from clearml_support import new_task

from jobpulse.server import create_app
from jobpulse.settings import Settings
from jobpulse.store import Store


@pytest.fixture(scope="module")
def store(embedded_engine) -> Store:  # noqa: ANN001 - the session's EmbeddedEngine
    return Store(embedded_engine, f"clearml{os.getpid()}_{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def settings(tmp_path_factory) -> Settings:  # noqa: ANN001
    return Settings(
        data_dir=tmp_path_factory.mktemp("clearml"), write_credentials=False, follow_poll_ms=50, insights_interval_s=0
    )


@pytest.fixture(scope="module")
def app(store: Store, settings: Settings):  # noqa: ANN201 - FastAPI
    return create_app(store, settings)


@pytest.fixture
def task(client) -> str:  # noqa: ANN001 - the shared TestClient
    return new_task(client, f"task {uuid.uuid4().hex[:6]}")
