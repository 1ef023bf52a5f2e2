"""Helpers of the web UI's end-to-end tests: the native API with the admin key, waiting, screenshots, chart data."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from helpers import CHROMIUM, CHROMIUM_ARGS  # noqa: E402,F401 - the browser tests' binary and flags
from jobpulse.testing import ServerProcess

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "ui"
DEMO = "demo-resnet50"
SECOND = "demo-2"


def call(
    server: ServerProcess,
    method: str,
    path: str,
    body: Any = None,
    raw: bytes | None = None,
    content_type: str = "application/json",
) -> tuple[int, Any]:
    """One request to the native API with the admin key: (status, JSON body or None)."""
    data = raw if raw is not None else (orjson.dumps(body) if body is not None else None)
    request = urllib.request.Request(
        server.url + path,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {server.api_key}", "Content-Type": content_type},
    )
    try:
        with urllib.request.urlopen(
            request, timeout=float(__import__("os").environ.get("UI_CALL_TIMEOUT", "30"))
        ) as response:
            payload = response.read()
            return response.status, orjson.loads(payload) if payload else None
    except urllib.error.HTTPError as exc:
        payload = exc.read()
        return exc.code, orjson.loads(payload) if payload.startswith(b"{") else None


def element(selector: str) -> str:
    """JavaScript for the element ``selector`` names, or an empty object while the page has none (between two
    drawings): for the predicates of ``wait_for_function``, which fail on the first error they throw."""
    return f"(document.querySelector({orjson.dumps(selector).decode()}) || {{}})"


@contextmanager
def error_checked(tab: Any) -> Iterator[Any]:
    """``tab`` for the block; fails the test after it if the page threw an uncaught error."""
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    yield tab
    assert not errors, f"uncaught errors in the page: {errors}"


def wait_for(predicate: Any, timeout: float = 60.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path))
    return path


def plot_data(page: Any, selector: str) -> list[dict]:
    """The series the chart at ``selector`` draws: its element's ``data`` (see static/chart.js; for a plot the job
    reported, the traces Plotly holds)."""
    return page.eval_on_selector(
        selector,
        "el => (el.data || []).map(t => ({name: t.name, type: t.type, "
        "x: Array.from(t.x || []), y: Array.from(t.y || []), "
        "z: t.z ? t.z.map(r => Array.from(r)) : null, "
        "labels: t.y && t.type === 'heatmap' ? Array.from(t.y) : null}))",
    )


def wait_chart(page: Any, selector: str) -> None:
    """Wait until the chart at ``selector`` has drawn its series."""
    page.wait_for_function(
        "s => { const el = document.querySelector(s); return !!(el && el.data && el.data.length); }", arg=selector
    )
