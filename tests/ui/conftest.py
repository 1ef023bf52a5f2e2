"""Fixtures of the web UI's end-to-end tests: a real server with the demo job, headless Chromium, a signed-in page.

The browser tests need Debian's ``chromium`` (``/usr/bin/chromium``) and Playwright for Python; without
either they skip with the reason.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from uitools import DEMO, SECOND, call, error_checked, wait_for  # noqa: E402

from jobpulse.client import Client  # noqa: E402
from jobpulse.credentials import Credentials  # noqa: E402
from jobpulse.demo import load_demo  # noqa: E402
from jobpulse.testing import ServerProcess, running_server  # noqa: E402


def _demo_loaded(server: ServerProcess, job: str) -> bool:
    status, body = call(server, "GET", f"/jp/v1/jobs/{job}/events/image/metrics")
    if status != 200 or not body["metrics"]:
        return False
    status, body = call(server, "GET", f"/jp/v1/jobs/{job}/scalars")
    if status != 200 or not any(m["metric"] == "loss" for m in body["metrics"]):
        return False
    status, body = call(server, "GET", f"/jp/v1/jobs/{job}/insights")
    return status == 200 and bool(body["findings"])  # the demo's last call evaluates the ended job


@pytest.fixture(scope="session")
def ui_server() -> Iterator[ServerProcess]:
    """A real server holding the demo job and a second copy of it (for comparisons)."""
    with running_server(extra_args=["--demo"]) as server:
        wait_for(lambda: _demo_loaded(server, DEMO), 120, "the demo job to load")
        load_demo(Client(Credentials(server.url, server.api_key)), job=SECOND)
        yield server


@pytest.fixture(scope="session")
def signed_in(browser: Any, ui_server: ServerProcess) -> dict:
    """A browser storage state holding a UI session, opened with a one-time login link."""
    status, body = call(ui_server, "POST", "/jp/v1/login-links")
    assert status == 200, body
    context = browser.new_context()
    page = context.new_page()
    response = page.goto(body["url"])
    assert response is not None and page.url.rstrip("/") == ui_server.url, page.url
    state = context.storage_state()
    context.close()
    return state


@pytest.fixture(scope="session")
def signed_context(browser: Any, ui_server: ServerProcess, signed_in: dict) -> Iterator[Any]:
    """One signed-in browser context for the session, so its pages share the HTTP cache."""
    context = browser.new_context(
        viewport={"width": 1440, "height": 900}, storage_state=signed_in, base_url=ui_server.url, color_scheme="light"
    )
    context.set_default_timeout(20_000)
    yield context
    context.close()


@pytest.fixture
def page(signed_context: Any) -> Iterator[Any]:
    """A signed-in 1440×900 page; fails the test if the page throws an uncaught error."""
    with error_checked(signed_context.new_page()) as tab:
        yield tab
        tab.close()
