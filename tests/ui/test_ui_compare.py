"""The compare page in headless Chromium: several jobs, one metric, one shared x-range."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from uitools import DEMO, SECOND, plot_data, screenshot, wait_chart

pytestmark = pytest.mark.e2e


def test_compare_overlays_two_jobs_from_one_request(page: Any) -> None:
    with page.expect_request(lambda r: "/jp/v1/scalars/chart?" in r.url and "metric=loss" in r.url) as req:
        page.goto(f"/compare?jobs={DEMO},{SECOND}")
    assert parse_qs(urlparse(req.value.url).query)["jobs"] == [f"{DEMO},{SECOND}"]
    wait_chart(page, '.chart[data-metric="loss"]')
    means = [
        t
        for t in plot_data(page, '.chart[data-metric="loss"]')
        if t["name"] and " · " in t["name"] and not t["name"].endswith((" max", " min", " raw"))
    ]
    assert {t["name"] for t in means} == {f"{DEMO} · train", f"{DEMO} · val", f"{SECOND} · train", f"{SECOND} · val"}
    trains = [t for t in means if t["name"].endswith("train")]
    assert trains[0]["x"] == trains[1]["x"]  # one shared x-range and bucket width
    rows = page.locator("table.grid tbody tr")
    assert rows.count() == 2
    screenshot(page, "compare.png")


def test_adding_a_job_through_the_picker(page: Any) -> None:
    page.goto(f"/compare?jobs={DEMO}")
    page.get_by_label("Add a job to compare").fill(SECOND)
    page.locator(f'.suggest button[data-job="{SECOND}"]').click()
    page.wait_for_url(f"**/compare?jobs={DEMO}%2C{SECOND}**")
    page.locator(f'.chip[data-job="{SECOND}"]').wait_for()


def test_a_missing_job_is_named_and_left_out(page: Any) -> None:
    page.goto(f"/compare?jobs={DEMO},ghost-job")
    notice = page.locator(".alert-warn")
    notice.wait_for()
    assert "“ghost-job” does not exist" in notice.inner_text()
    assert page.locator(".chip[data-job]").count() == 1
