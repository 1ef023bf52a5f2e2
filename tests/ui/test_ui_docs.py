"""The API documentation works offline: /docs and /redoc render in Chromium with every other host unreachable."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from uitools import error_checked

from jobpulse.server.docs_pages import assets_built
from jobpulse.testing import ServerProcess, running_server

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not assets_built(), reason="Swagger UI and ReDoc are not built: run python web-assets/build.py"),
]

REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
WATCH_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(`${event.violatedDirective} blocked ${event.blockedURI || "inline"}`);
});
"""


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with running_server() as running:
        yield running


@pytest.fixture
def offline(browser: Any, server: ServerProcess) -> Iterator[tuple[Any, list[str], list[str]]]:
    """A page that can reach only the loopback server: (page, URLs it tried elsewhere, console errors)."""
    context = browser.new_context(base_url=server.url, viewport={"width": 1280, "height": 900})
    blocked: list[str] = []

    def only_loopback(route: Any) -> None:
        if urlsplit(route.request.url).hostname in ("127.0.0.1", "localhost", "::1"):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort("internetdisconnected")

    context.route("**/*", only_loopback)
    console: list[str] = []
    with error_checked(context.new_page()) as tab:
        tab.add_init_script(WATCH_VIOLATIONS)
        tab.on("console", lambda message: console.append(message.text) if message.type == "error" else None)
        yield tab, blocked, console
    context.close()


def test_swagger_ui_lists_the_operations_offline(offline: tuple[Any, list[str], list[str]]) -> None:
    tab, blocked, console = offline
    tab.goto("/docs")
    tab.locator(".opblock-summary-path", has_text="/jp/v1/jobs").first.wait_for()
    assert tab.locator(".opblock-tag").count() >= 3 and tab.locator(".opblock").count() >= 10
    assert tab.evaluate("window.__cspViolations") == [] and console == []
    assert blocked == []


def test_redoc_lists_the_operations_offline(offline: tuple[Any, list[str], list[str]]) -> None:
    tab, blocked, console = offline
    tab.goto("/redoc")
    tab.locator("[data-section-id^='tag/']").first.wait_for()
    assert tab.locator("h2", has_text="Readiness").count() >= 1
    # ReDoc's sidebar credit shows a logo from its CDN; the policy stops that request and ReDoc drops the image.
    violations = [v for v in tab.evaluate("window.__cspViolations") if v != f"img-src blocked {REDOC_LOGO}"]
    assert violations == [] and [line for line in console if REDOC_LOGO not in line] == []
    assert blocked == []
