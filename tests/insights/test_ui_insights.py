"""The UI shows findings: a badge in the job header and in the jobs list, and the job's Insights tab.

Runs headless Chromium (Debian's ``chromium``) through Playwright against a real server; skips without them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from browser import signed_in_page
from synth import constant, healthy, piecewise, recent

pytestmark = pytest.mark.e2e
PROJECT = "ui-insights"
JOB = "ui-idle"


class Remote:
    def __init__(self, server) -> None:  # noqa: ANN001
        self.base, self.headers = server.url, {"Authorization": f"Bearer {server.api_key}"}

    def post(self, path: str, **kwargs):  # noqa: ANN003, ANN201
        return httpx.post(self.base + path, headers={**self.headers, **kwargs.pop("headers", {})}, **kwargs)


@pytest.fixture(scope="module")
def page(browser, server) -> Iterator[Any]:  # noqa: ANN001
    """A signed-in page on the session's server, with a job whose GPU has been idle for 20 minutes, evaluated."""
    remote = Remote(server)
    util = lambda w, d: piecewise(90.0, (10, 30, 0.0)) if (w, d) == ("worker-0", "1") else constant(90.0)  # noqa: E731
    origin = recent(30)  # the server's own periodic evaluation sees what the test's evaluation saw
    builder = healthy(JOB, (0, 30), workers=4, util=util, origin=origin)
    builder.project = PROJECT
    builder.send(remote)
    assert remote.post(f"/jp/v1/jobs/{JOB}/insights/evaluate", params={"at": builder.at(29.5)}).status_code == 200
    with signed_in_page(browser, server) as tab:
        yield tab


def test_the_job_page_shows_a_badge_and_the_findings(page):
    page.goto(f"/jobs/{JOB}")
    page.wait_for_selector("h1 .insight-badge:not([hidden])")
    assert page.text_content("h1 .insight-badge") == "2 findings"  # the idle GPU, and its worker straggling
    page.click("[data-tab=insights]")
    page.wait_for_selector(".insights-panel table.findings tbody tr")
    rows = page.locator(".insights-panel table.findings tbody tr").all_text_contents()
    assert any("Idle GPU" in row and "worker-0 · GPU 1" in row and "open" in row for row in rows)
    assert "GPU-h idle" in page.text_content(".insights-panel .card-head")


def test_the_jobs_list_shows_the_badge(page):
    page.goto(f"/?project={PROJECT}")
    badge = page.wait_for_selector(f"tr[data-job={JOB}] .insight-badge")
    assert badge.text_content() == "2 findings" and "insight-warning" in badge.get_attribute("class")


def test_the_jobs_list_of_a_project_shows_its_gpu_waste_and_open_findings(page):
    page.goto(f"/?project={PROJECT}")
    strip = page.wait_for_selector(".insight-strip:not([hidden])")
    text = strip.text_content()
    assert "GPU-h idle" in text and f"{JOB}: Idle GPU" in text


def test_the_projects_thresholds_are_changed_from_the_insights_tab(page, server):
    page.goto(f"/jobs/{JOB}#insights")
    page.click(".thresholds summary")
    field = page.wait_for_selector("input[name=idle_min_s]")
    assert field.input_value() == "300"
    field.fill("five")
    page.click(".thresholds button[type=submit]")
    page.wait_for_selector(".thresholds .error-message")
    assert "idle_min_s" in page.text_content(".thresholds .error-message")
    field.fill("600")
    page.click(".thresholds button[type=submit]")
    page.wait_for_selector(".thresholds .toolbar >> text=Saved.")
    answer = httpx.get(
        f"{server.url}/jp/v1/projects/{PROJECT}/insights/thresholds",
        headers={"Authorization": f"Bearer {server.api_key}"},
    )
    assert answer.json()["changed"] == {"idle_min_s": 600}
