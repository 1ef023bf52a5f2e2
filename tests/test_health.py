"""/healthz (alive, without the store) and /readyz (the store answers in time, 503 naming the failure otherwise)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from helpers import fresh_database
from jobpulse.errors import StoreUnavailable
from jobpulse.server import create_app
from jobpulse.settings import Settings, load_settings
from jobpulse.store import Store


class UnsteadyEngine:
    """The real engine, except that while ``failing`` every query fails, and while ``stalled`` is clear every query
    waits for it (a store that does not answer)."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self.failing = False
        self.stalled = threading.Event()
        self.stalled.set()
        self.queries = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def query(self, sql: str, params: dict[str, Any] | None = None) -> Any:
        self.queries += 1
        self.stalled.wait(30)
        if self.failing:
            raise StoreUnavailable("storage engine error: Connection refused (127.0.0.1:8123)")
        return self._engine.query(sql, params)


@pytest.fixture
def unsteady(embedded_engine) -> UnsteadyEngine:  # noqa: ANN001
    return UnsteadyEngine(embedded_engine)


@pytest.fixture
def unsteady_client(unsteady: UnsteadyEngine, tmp_path: Path) -> Any:
    store = Store(unsteady, fresh_database())
    settings = Settings(data_dir=tmp_path, write_credentials=False, readiness_timeout_ms=200)
    with TestClient(create_app(store, settings)) as client:
        yield client
    unsteady.stalled.set()


def test_healthz_answers_without_a_key(anonymous):
    answer = anonymous.get("/healthz")
    assert answer.status_code == 200 and answer.json() == {"status": "ok"}


def test_healthz_does_not_ask_the_store(unsteady_client, unsteady):
    unsteady.failing = True
    before = unsteady.queries
    assert unsteady_client.get("/healthz").status_code == 200
    assert unsteady.queries == before


def test_readyz_answers_200_when_the_store_answers(anonymous):
    answer = anonymous.get("/readyz")
    assert answer.status_code == 200 and answer.json() == {"status": "ready", "store": "embedded"}


def test_readyz_answers_503_naming_the_store_failure(unsteady_client, unsteady):
    unsteady.failing = True
    answer = unsteady_client.get("/readyz")
    assert answer.status_code == 503
    body = answer.json()
    assert body["status"] == "unavailable" and body["store"] == "embedded"
    assert body["error"]["code"] == "store_unavailable"
    assert "Connection refused" in body["error"]["message"]


def test_readyz_answers_503_when_the_store_does_not_answer_in_time(unsteady_client, unsteady):
    unsteady.stalled.clear()
    answer = unsteady_client.get("/readyz")
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "store_timeout"
    assert "200 ms" in answer.json()["error"]["message"]


def test_readyz_is_ready_again_once_the_store_answers(unsteady_client, unsteady):
    unsteady.failing = True
    assert unsteady_client.get("/readyz").status_code == 503
    unsteady.failing = False
    assert unsteady_client.get("/readyz").status_code == 200


def test_probes_of_a_stalled_store_share_one_query(unsteady_client, unsteady):
    unsteady.stalled.clear()
    before = unsteady.queries
    for _ in range(3):
        assert unsteady_client.get("/readyz").status_code == 503
    assert unsteady.queries == before + 1  # one thread waits on the store, not one per probe
    unsteady.stalled.set()


@pytest.mark.parametrize(
    "environ",
    [
        {"JOBPULSE_READINESS_TIMEOUT_MS": "0"},
        {"JOBPULSE_READINESS_TIMEOUT_MS": "soon"},
        {"JOBPULSE_METRICS_ACCESS": "everyone"},
    ],
)
def test_a_bad_operations_setting_is_refused_naming_it(environ):
    (name,) = environ
    with pytest.raises(ValueError, match=name):
        load_settings(environ=environ)


def test_a_bad_metrics_access_on_the_command_line_is_refused():
    with pytest.raises(ValueError, match="--metrics-access: must be one of key, open, off"):
        load_settings({"metrics_access": "public"}, environ={})
