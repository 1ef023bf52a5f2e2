"""A metric reported by several ranks, in headless Chromium: the leader's series, every rank's, their envelope."""

from __future__ import annotations

import time
from typing import Any

import pytest
from uitools import DEMO, call, element, plot_data, screenshot, wait_chart

from jobpulse.testing import ServerProcess

pytestmark = pytest.mark.e2e
JOB = "ranks-ui"
LOSS = '.chart[data-metric="loss"]'


def _names(page: Any) -> set[str]:
    return {t["name"] for t in plot_data(page, LOSS)}


@pytest.fixture(scope="module")
def ranked_job(ui_server: ServerProcess) -> str:
    """A job whose three ranks report the same steps of ``loss`` (rank r: values around r)."""
    t0 = int(time.time() * 1000) - 3_600_000
    series = [
        {
            "kind": "scalar",
            "worker": f"worker-{rank}",
            "metric": "loss",
            "variant": "train",
            "iter": list(range(200)),
            "ts": [t0 + i * 1000 for i in range(200)],
            "value": [rank + (i % 5) / 10 for i in range(200)],
        }
        for rank in range(3)
    ]
    status, body = call(ui_server, "POST", "/jp/v1/ingest", {"project": "demo", "job": JOB, "series": series})
    assert status == 200 and not body.get("rejected"), body
    return JOB


def test_a_chart_switches_between_the_leader_every_rank_and_the_envelope(page: Any, ranked_job: str) -> None:
    page.goto(f"/jobs/{ranked_job}")
    wait_chart(page, LOSS)
    assert _names(page) == {"train", "train max", "train min"} or _names(page) == {"train"}
    leader = next(t for t in plot_data(page, LOSS) if t["name"] == "train")
    assert max(leader["y"]) < 1  # worker-0's values
    switch = page.get_by_role("group", name="Ranks of loss")
    with page.expect_request(lambda r: "/scalars/chart" in r.url and "workers=all" in r.url):
        switch.get_by_role("button", name="Every rank").click()
    page.wait_for_function(f"() => ({element(LOSS)}.data || []).some(t => t.name === 'train · worker-2')")
    assert {"train · worker-0", "train · worker-1", "train · worker-2"} <= _names(page)
    with page.expect_request(lambda r: "/scalars/chart" in r.url and "workers=envelope" in r.url):
        switch.get_by_role("button", name="Envelope").click()
    page.wait_for_function(f"() => ({element(LOSS)}.data || []).some(t => t.name === 'train max')")
    traces = {t["name"]: t for t in plot_data(page, LOSS)}
    assert set(traces) == {"train", "train max", "train min"}
    assert min(traces["train min"]["y"]) < 1 and max(traces["train max"]["y"]) > 2  # from rank 0 to rank 2
    assert min(traces["train"]["y"]) >= 1 and max(traces["train"]["y"]) < 2  # the median: rank 1
    assert "3 ranks" in page.locator('section.chart-card[data-metric="loss"] .meta').inner_text()
    screenshot(page, "job-ranks.png")


def test_a_job_of_one_rank_has_no_switch(page: Any) -> None:
    page.goto(f"/jobs/{DEMO}")
    wait_chart(page, LOSS)
    assert page.get_by_role("group", name="Ranks of loss").count() == 0
