"""A signed-in Chromium page on a real server, for the UI tests of insights (in the session's browser:
``browser`` in tests/conftest.py, which skips without Chromium or Playwright)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx


@contextmanager
def signed_in_page(browser: Any, server: Any) -> Iterator[Any]:  # noqa: ANN401 - Playwright's browser and page
    """A page signed in with the server's key; fails on leaving if the page raised an uncaught error."""
    link = httpx.post(f"{server.url}/jp/v1/login-links", headers={"Authorization": f"Bearer {server.api_key}"})
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
    assert not errors, f"uncaught errors in the page: {errors}"
