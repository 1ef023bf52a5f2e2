"""The jobs list and signing in, in headless Chromium against a real server."""

from __future__ import annotations

from typing import Any

import pytest
from uitools import DEMO, SECOND, call, element, screenshot

from jobpulse.testing import ServerProcess

pytestmark = pytest.mark.e2e


def test_the_jobs_list_shows_the_demo_job_with_its_latest_loss(page: Any, ui_server: ServerProcess) -> None:
    page.goto("/")
    row = page.locator(f'tr[data-job="{DEMO}"]')
    row.wait_for()
    assert "ResNet-50 on ImageNet (demo)" in row.inner_text()
    assert row.locator(".badge").inner_text().lower() == "failed"  # one demo worker fails with a traceback
    status, body = call(ui_server, "POST", "/jp/v1/scalars/latest", {"jobs": [DEMO]})
    loss = next(r for r in body["jobs"][DEMO] if (r["metric"], r["variant"]) == ("loss", "train"))
    headers = page.locator("table.jobs-table thead th").all_inner_texts()
    assert "loss · train" in headers  # a ClearML-shaped title and series: metric · variant
    cells = row.locator("td").all_inner_texts()
    assert cells[headers.index("loss · train")] == f"{loss['value']:.4g}"
    workers = element(f'tr[data-job="{DEMO}"] .workers-cell')
    page.wait_for_function(f"() => {workers}.textContent === '4'")
    screenshot(page, "jobs.png")


def test_searching_the_list_keeps_only_matching_jobs(page: Any) -> None:
    page.goto("/")
    page.locator(f'tr[data-job="{DEMO}"]').wait_for()
    with page.expect_response(lambda r: "/jp/v1/jobs?" in r.url and "q=demo-2" in r.url):
        page.get_by_label("Search jobs").fill(SECOND)
    page.wait_for_function("() => document.querySelectorAll('tr[data-job]').length === 1")
    assert page.locator("tr[data-job]").get_attribute("data-job") == SECOND
    assert "q=demo-2" in page.url


def test_filtering_by_status_and_project(page: Any) -> None:
    page.goto("/?status=completed")
    page.get_by_text("No jobs match").wait_for()
    page.goto("/?project=demo")
    page.locator(f'tr[data-job="{DEMO}"]').wait_for()
    assert page.locator('.projects button[aria-pressed="true"]').inner_text().startswith("demo")


def test_ticking_two_jobs_leads_to_their_comparison(page: Any) -> None:
    page.goto("/")
    for job in (DEMO, SECOND):
        page.get_by_label(f"Select {job} to compare").check()
    compare = page.get_by_role("link", name="Compare 2")
    assert compare.get_attribute("href") == f"/compare?jobs={DEMO},{SECOND}"


def test_without_a_session_the_sign_in_form_takes_an_api_key(browser: Any, ui_server: ServerProcess) -> None:
    context = browser.new_context(base_url=ui_server.url)
    try:
        tab = context.new_page()
        response = tab.goto(f"/jobs/{DEMO}")
        assert response.status == 401
        tab.get_by_label("API key").fill("jp_nothing_wrong")
        tab.get_by_role("button", name="Sign in").click()
        tab.get_by_text("not valid").wait_for()
        tab.get_by_label("API key").fill(ui_server.api_key)
        tab.get_by_role("button", name="Sign in").click()
        tab.wait_for_url(f"**/jobs/{DEMO}")
        tab.locator(".page-head h1").get_by_text("ResNet-50 on ImageNet (demo)").wait_for()
    finally:
        context.close()


def test_the_list_picks_up_a_new_job_while_open(page: Any, ui_server: ServerProcess) -> None:
    page.goto("/")
    page.locator(f'tr[data-job="{DEMO}"]').wait_for()
    status, body = call(ui_server, "POST", "/jp/v1/jobs", {"project": "demo", "job": "ui-live", "name": "Live one"})
    assert status in (200, 201), body
    row = page.locator('tr[data-job="ui-live"]')
    row.wait_for(timeout=15_000)  # the list refreshes itself every few seconds
    assert "Live one" in row.inner_text() and row.locator(".badge").inner_text().lower() == "created"
