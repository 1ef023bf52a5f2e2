"""Metric names in headless Chromium: keys logged through the SDK are shown as written, in sections by prefix."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from uitools import element, plot_data, screenshot, wait_chart

from helpers import quiet_run
from jobpulse.testing import ServerProcess

pytestmark = pytest.mark.e2e

PROJECT = "names"
JOBS = ("names-a", "names-b")
OLD = "names-old"
KEYS = ("train/loss", "train/lr", "val/acc", "loss")


@pytest.fixture(scope="module")
def logged(ui_server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ...]]:
    """Two jobs that logged the same keys through the SDK, and one stored as the previous SDK split its keys."""
    spool = tmp_path_factory.mktemp("names-spool")
    for n, job in enumerate(JOBS):
        run = quiet_run(ui_server, PROJECT, job, spool / job)
        for step in range(20):
            run.log(
                {"train/loss": 1 / (step + 1 + n), "train/lr": 0.1, "val/acc": 0.5 + step / 100, "loss": 2.0}, step=step
            )
        delivery = run.finish("stopped")  # not "completed": the jobs list's status filter stays as the demo has it
        assert delivery is not None and delivery.dropped_events == 0
    old = quiet_run(ui_server, PROJECT, OLD, spool / OLD)
    for step in range(20):
        old.scalar("train", "loss", 1 / (step + 1), iter=step)  # ("train", "loss"): a "train/loss" logged before
    old.finish("stopped")
    yield JOBS


def _sections(page: Any) -> list[str]:
    return page.locator(".chart-section > summary .section-name").all_inner_texts()


def _titles(page: Any, section: str) -> list[str]:
    return page.locator(f'.chart-section[data-section="{section}"] .chart-card h2').all_inner_texts()


def test_the_job_page_titles_each_chart_as_logged_in_sections_by_prefix(page: Any, logged: tuple[str, ...]) -> None:
    page.goto(f"/jobs/{logged[0]}")
    page.locator('.chart-section[data-section="val"]').wait_for()
    assert _sections(page) == ["Charts", "train", "val"]  # the metrics without a prefix first
    assert (_titles(page, ""), _titles(page, "train"), _titles(page, "val")) == (
        ["loss"],
        ["train/loss", "train/lr"],
        ["val/acc"],
    )
    selector = '.chart[data-metric="train/loss"]'
    wait_chart(page, selector)
    assert {t["name"] for t in plot_data(page, selector)} == {"train/loss"}  # its one series, named by the key
    screenshot(page, "job-names.png")


def test_a_section_collapses_and_opens_again(page: Any, logged: tuple[str, ...]) -> None:
    page.goto(f"/jobs/{logged[0]}")
    train = page.locator('.chart-section[data-section="train"]')
    wait_chart(page, '.chart[data-metric="train/loss"]')
    train.locator("summary").click()
    assert not page.locator('.chart[data-metric="train/loss"]').is_visible()
    assert page.locator('.chart[data-metric="val/acc"]').is_visible()
    train.locator("summary").click()
    assert page.locator('.chart[data-metric="train/loss"]').is_visible()


def test_filtering_hides_the_sections_without_a_match(page: Any, logged: tuple[str, ...]) -> None:
    page.goto(f"/jobs/{logged[0]}")
    page.locator('.chart-section[data-section="val"]').wait_for()
    page.get_by_label("Filter metrics").fill("acc")
    train = element('.chart-section[data-section="train"]')
    page.wait_for_function(f"() => {train}.hidden")
    visible = page.locator(".chart-section:not([hidden]) > summary .section-name").all_inner_texts()
    assert visible == ["val"]


def test_a_key_split_by_the_previous_sdk_stays_a_chart_of_its_metric(page: Any, logged: tuple[str, ...]) -> None:
    page.goto(f"/jobs/{OLD}")
    selector = '.chart[data-metric="train"]'
    wait_chart(page, selector)
    assert _sections(page) == ["Charts"] and _titles(page, "") == ["train"]
    assert {t["name"] for t in plot_data(page, selector)} == {"loss"}


def test_the_jobs_list_names_its_metric_columns_as_logged(page: Any, logged: tuple[str, ...]) -> None:
    page.goto(f"/?project={PROJECT}")
    page.locator(f'tr[data-job="{logged[0]}"]').wait_for()
    headers = page.locator("table.jobs-table thead th.metric-head").all_inner_texts()
    assert headers == ["train/loss", "loss", "val/acc"]  # loss-like first, then accuracy-like
    row = page.locator(f'tr[data-job="{logged[0]}"] td').all_inner_texts()
    all_headers = page.locator("table.jobs-table thead th").all_inner_texts()
    assert row[all_headers.index("val/acc")] == "0.69"


def test_compare_names_the_table_and_charts_as_logged(page: Any, logged: tuple[str, ...]) -> None:
    page.goto(f"/compare?jobs={','.join(logged)}")
    wait_chart(page, '.chart[data-metric="val/acc"]')
    headers = page.locator("table.grid thead th.metric-head").all_inner_texts()
    assert headers == ["loss", "train/loss", "train/lr", "val/acc"]
    assert _sections(page) == ["Charts", "train", "val"]
    assert _titles(page, "val") == ["val/acc"]
    names = {t["name"] for t in plot_data(page, '.chart[data-metric="val/acc"]')}
    assert set(logged) <= names  # a series per job, named by the job
