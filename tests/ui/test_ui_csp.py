"""Every page of the UI works in headless Chromium under its Content-Security-Policy: no violation, no console error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from uitools import DEMO, SECOND, error_checked, wait_chart

from jobpulse.testing import ServerProcess

pytestmark = pytest.mark.e2e

# Records every violation the page's policy reports, from before the page's first script runs.
WATCH_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(`${event.violatedDirective} blocked ${event.blockedURI || "inline"}`
    + ` at ${event.sourceFile || "?"}:${event.lineNumber}`);
});
"""


class Watched:
    """A tab whose policy violations and console errors are collected while it is open."""

    def __init__(self, tab: Any) -> None:
        self.tab = tab
        self.console: list[str] = []
        tab.add_init_script(WATCH_VIOLATIONS)
        tab.on("console", lambda message: self.console.append(message.text) if message.type == "error" else None)

    def problems(self) -> list[str]:
        return self.tab.evaluate("window.__cspViolations") + self.console


@pytest.fixture
def watched(signed_context: Any) -> Iterator[Watched]:
    with error_checked(signed_context.new_page()) as tab:
        yield Watched(tab)
        tab.close()


def page_is_ready(tab: Any, selector: str) -> None:
    tab.locator(selector).first.wait_for()
    tab.wait_for_function("() => !document.querySelector('#app[aria-busy]')")


PAGES = [
    ("/", f'tr[data-job="{DEMO}"]'),
    (f"/jobs/{DEMO}", '.chart[data-metric="loss"].drawn'),
    (f"/jobs/{DEMO}#system", ".heatmap[data-rows]"),
    (f"/jobs/{DEMO}#media", '.media-card[data-kind="plot"] .plot .main-svg'),
    (f"/jobs/{DEMO}#details", "table.usage"),
    (f"/jobs/{DEMO}/logs", ".logrow"),
    (f"/compare?jobs={DEMO},{SECOND}", '.chart[data-metric="loss"].drawn'),
]


@pytest.mark.parametrize(("path", "ready"), PAGES, ids=[path for path, _ in PAGES])
def test_a_signed_in_page_runs_under_its_policy(watched: Watched, path: str, ready: str) -> None:
    response = watched.tab.goto(path)
    assert response is not None and response.status == 200
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page_is_ready(watched.tab, ready)
    if ".chart" in ready:
        wait_chart(watched.tab, ready.split(".drawn")[0])
    watched.tab.wait_for_load_state("networkidle")
    assert watched.problems() == []


def test_the_theme_switch_and_its_saved_choice_work_under_the_policy(watched: Watched) -> None:
    watched.tab.goto("/")
    page_is_ready(watched.tab, f'tr[data-job="{DEMO}"]')
    before = watched.tab.evaluate("document.documentElement.dataset.theme || ''")
    watched.tab.locator("#theme-toggle").click()
    chosen = watched.tab.evaluate("document.documentElement.dataset.theme")
    assert chosen in ("dark", "light") and chosen != before
    watched.tab.reload()
    page_is_ready(watched.tab, f'tr[data-job="{DEMO}"]')
    assert watched.tab.evaluate("document.documentElement.dataset.theme") == chosen  # applied by head.js
    watched.tab.locator("#theme-toggle").click()  # leave the shared context as it was
    assert watched.problems() == []


def test_the_sign_in_and_error_pages_run_under_the_policy(browser: Any, ui_server: ServerProcess) -> None:
    context = browser.new_context(base_url=ui_server.url)
    try:
        with error_checked(context.new_page()) as tab:
            watched = Watched(tab)
            response = tab.goto(f"/jobs/{DEMO}")
            assert response.status == 401 and "frame-ancestors 'none'" in response.headers["content-security-policy"]
            tab.get_by_label("API key").fill("jp_nothing_wrong")
            tab.get_by_role("button", name="Sign in").click()
            tab.get_by_text("not valid").wait_for()
            tab.get_by_label("API key").fill(ui_server.api_key)
            tab.get_by_role("button", name="Sign in").click()
            tab.wait_for_url(f"**/jobs/{DEMO}")
            wait_chart(tab, '.chart[data-metric="loss"]')
            response = tab.goto("/jobs/no-such-job")
            assert response.status == 404
            tab.get_by_text("does not exist").wait_for()
            problems = [p for p in watched.problems() if "status of 40" not in p]  # the 401, 403 and 404 answers
            assert problems == []
    finally:
        context.close()
