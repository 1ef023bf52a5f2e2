"""A signed-in headless Chromium page on a real server, for the UI tests of insights (skips without Chromium or
Playwright)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

CHROMIUM = "/usr/bin/chromium"


@contextmanager
def signed_in_page(server: Any) -> Iterator[Any]:  # noqa: ANN401 - a ServerProcess, a Playwright page
    """A page signed in with the server's key; fails on leaving if the page raised an uncaught error."""
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.skip("Chromium is not installed")
    sync_api = pytest.importorskip("playwright.sync_api")
    link = httpx.post(f"{server.url}/jp/v1/login-links", headers={"Authorization": f"Bearer {server.api_key}"})
    playwright = sync_api.sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
    context = browser.new_context(base_url=server.url, viewport={"width": 1440, "height": 900})
    context.set_default_timeout(20_000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.goto(link.json()["url"])
    try:
        yield tab
    finally:
        context.close()
        browser.close()
        playwright.stop()
    assert not errors, f"uncaught errors in the page: {errors}"
