"""The logs page in headless Chromium: tail, live follow, paging back, filters, search, jumps, download."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qs, urlparse

import orjson
import pytest
from uitools import DEMO, call, element, screenshot, wait_chart

from jobpulse.testing import ServerProcess

pytestmark = pytest.mark.e2e
ROWS = ".logrow"


def open_logs(page: Any, query: str = "") -> None:
    page.goto(f"/jobs/{DEMO}/logs{query}")
    page.locator(ROWS).first.wait_for()


def test_the_tail_is_shown_and_only_visible_rows_are_drawn(page: Any, ui_server: ServerProcess) -> None:
    open_logs(page)
    status, tail = call(ui_server, "GET", f"/jp/v1/jobs/{DEMO}/logs?limit=1")
    last = tail["lines"][-1]["msg"]
    page.wait_for_function(
        f"() => [...document.querySelectorAll('.logrow .m')].some(m => m.textContent === {orjson.dumps(last).decode()})"
    )
    assert page.locator(ROWS).count() < 120  # 500 lines loaded, a screenful (and some) drawn
    assert page.get_by_text("Not following").is_visible()  # the demo job has ended: follow starts off
    screenshot(page, "logs.png")


def test_follow_shows_a_line_ingested_after_the_page_loaded(page: Any, ui_server: ServerProcess) -> None:
    open_logs(page)
    page.locator("#follow").check()
    page.get_by_text("Following new lines").wait_for()
    message = f"checkpoint saved to /ckpt/step-{time.time_ns()}.pt"
    event = {
        "kind": "log",
        "project": "demo",
        "job": DEMO,
        "worker": "worker-3",
        "seq": time.time_ns() // 1000,
        "level": "info",
        "msg": message,
        "ts": int(time.time() * 1000),
    }
    status, body = call(
        ui_server, "POST", "/jp/v1/ingest", raw=orjson.dumps(event), content_type="application/x-ndjson"
    )
    assert status == 200 and body["accepted"] == 1, body
    row = page.locator(ROWS).filter(has_text=message)
    row.wait_for(timeout=15_000)
    assert "worker-3" in row.inner_text()


def test_scrolling_up_pages_back_to_the_start_with_cursors(page: Any) -> None:
    open_logs(page)
    befores = []
    page.on("request", lambda r: befores.append(r.url) if "/logs?" in r.url and "before=" in r.url else None)
    for _ in range(10):
        if page.get_by_text("Start of the log").is_visible():
            break
        page.locator(".logview").evaluate("el => { el.scrollTop = 0; el.dispatchEvent(new Event('scroll')); }")
        page.wait_for_timeout(300)
    page.get_by_text("Start of the log").wait_for()
    page.locator(".logview").evaluate("el => { el.scrollTop = 0; el.dispatchEvent(new Event('scroll')); }")
    first = page.locator(f'{ROWS}[data-index="0"] .m').inner_text()
    assert "initializing process group" in first
    assert len(befores) >= 2  # 1,341 lines came in pages of 500, never all at once
    assert all("limit=500" in url for url in befores)


def test_filters_by_worker_and_level(page: Any, ui_server: ServerProcess) -> None:
    open_logs(page)
    page.get_by_label("Worker").select_option("worker-2")
    page.get_by_role("button", name="error", exact=True).click()
    page.wait_for_function("""() => {
        const rows = [...document.querySelectorAll('.logrow')];
        return rows.length > 0 && rows.every(r => r.querySelector('.w').textContent === 'worker-2'
            && r.querySelector('.l').textContent === 'error');
    }""")
    status, count = call(ui_server, "GET", f"/jp/v1/jobs/{DEMO}/logs/count?worker=worker-2&level=error")
    page.wait_for_function(f"() => ({element('.logs-count')}.dataset || {{}}).matches === '{count['lines']}'")
    assert page.locator(ROWS).count() == count["lines"]
    assert "worker=worker-2" in page.url and "level=error" in page.url


def test_search_across_workers_highlights_matches(page: Any, ui_server: ServerProcess) -> None:
    open_logs(page)
    with page.expect_request(lambda r: "/logs?" in r.url and "q=dataloader" in r.url):
        page.get_by_label("Search logs").fill("dataloader")
    marks = page.locator(".logrow mark")
    marks.first.wait_for()
    assert {m.lower() for m in marks.all_inner_texts()} == {"dataloader"}
    status, count = call(ui_server, "GET", f"/jp/v1/jobs/{DEMO}/logs/count?q=dataloader")
    assert page.locator(ROWS).count() == count["lines"] > 0
    page.get_by_text(f"{count['lines']} lines match").wait_for()
    page.locator(ROWS).first.hover()
    page.locator(ROWS).first.get_by_text("show in context").click()
    page.wait_for_function("() => document.querySelectorAll('.logrow').length > 20")
    assert page.locator(".logrow.flash").inner_text().count("dataloader") == 1


def test_a_line_time_opens_the_charts_at_that_time_and_back(page: Any) -> None:
    open_logs(page, "?q=RuntimeError")
    link = page.locator(f"{ROWS} .t a").first
    at = int(parse_qs(urlparse(link.get_attribute("href")).query)["at"][0])
    link.click()
    page.wait_for_url(f"**/jobs/{DEMO}?at={at}**")
    chart = '.chart[data-metric="loss"]'
    page.wait_for_function(f"() => ({element(chart)}.marks || {{}}).line === {at}")  # the marker
    shown = page.eval_on_selector(
        chart, "el => ({axis: el.dataset.axis, range: [el.chart.scales.x.min, el.chart.scales.x.max]})"
    )
    assert shown["axis"] == "time" and shown["range"][0] < at < shown["range"][1]
    wait_chart(page, chart)  # the points around that time, not an empty chart
    assert page.locator(".range-text").inner_text()
    page.get_by_role("link", name="← Back to the logs at this time").click()
    page.wait_for_url(f"**/logs?at={at}")
    page.locator(".logrow.flash").wait_for()
    assert "RuntimeError" in page.locator(".logrow.flash").inner_text()


def test_download_takes_the_filters(page: Any) -> None:
    open_logs(page, "?level=warning")
    href = page.get_by_role("link", name="Download").get_attribute("href")
    assert href == f"/jp/v1/jobs/{DEMO}/logs/download?level=warning"
    response = page.request.get(href)
    assert response.status == 200
    lines = response.text().splitlines()
    assert lines and all(" WARNING " in line for line in lines)
