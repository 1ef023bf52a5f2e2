"""Every finding of a job shows on its time charts: a shaded span from its start to its end (or now) and a
triangle at its start whose hover names it, on the metrics charts (time axis), the system charts and the heat map.

Runs headless Chromium (Debian's ``chromium``) through Playwright against a real server; skips without them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from browser import signed_in_page
from synth import constant, healthy, piecewise, recent

pytestmark = pytest.mark.e2e
PROJECT = "ui-markers"
JOB = "ui-marked"
HEAT = ".heatmap[data-rows]"
LOSS = '.chart[data-metric="loss"].drawn'

# The marks the chart ``el`` draws (see static/chart.js): each finding's span (epoch ms) and text, the time marker.
MARKS = "el => el.marks"

# Where, in the page, the first finding's triangle is drawn on the chart ``el``: at its start, at the plot's top.
TRIANGLE = """el => {
  const u = el.chart, over = u.over.getBoundingClientRect();
  return { x: over.left + u.valToPos(el.marks.spans[0][0], 'x'), y: over.top + 4 };
}"""


@pytest.fixture(scope="module")
def marked(server) -> dict[str, Any]:  # noqa: ANN001
    """A finished job (on the session's server) whose worker-0 GPU 1 was idle from minute 10 to 20 of 30, evaluated
    with only idle GPUs looked for: one resolved idle-GPU finding, from minute 10 to 20."""
    headers = {"Authorization": f"Bearer {server.api_key}"}
    thresholds = {"disabled": ["underused", "straggler", "hang", "divergence", "hardware", "lost_worker"]}
    answer = httpx.put(f"{server.url}/jp/v1/projects/{PROJECT}/insights/thresholds", json=thresholds, headers=headers)
    assert answer.status_code == 200

    class Remote:
        def post(self, path: str, **kwargs):  # noqa: ANN003, ANN201
            return httpx.post(server.url + path, headers={**headers, **kwargs.pop("headers", {})}, **kwargs)

    util = lambda w, d: piecewise(90.0, (10, 20, 0.0)) if (w, d) == ("worker-0", "1") else constant(90.0)  # noqa: E731
    builder = healthy(JOB, (0, 30), workers=2, util=util, origin=recent(30))
    builder.project = PROJECT
    builder.send(Remote())
    # finished, so that the server's periodic evaluation leaves it as this evaluation found it
    ended = httpx.patch(
        f"{server.url}/jp/v1/jobs/{JOB}", json={"status": "completed", "at": builder.at(30)}, headers=headers
    )
    assert ended.status_code == 200
    assert Remote().post(f"/jp/v1/jobs/{JOB}/insights/evaluate").status_code == 200
    [finding] = httpx.get(f"{server.url}/jp/v1/jobs/{JOB}/insights", headers=headers).json()["findings"]
    assert (finding["kind"], finding["worker"], finding["device"]) == ("idle_gpu", "worker-0", "1")
    assert finding["ended"] is not None
    return finding


@pytest.fixture(scope="module")
def page(browser, server, marked) -> Iterator[Any]:  # noqa: ANN001
    with signed_in_page(browser, server) as tab:
        yield tab


def wait_marked(page: Any, selector: str) -> dict[str, Any]:
    """The marks of the chart at ``selector`` once it has drawn them."""
    page.wait_for_function(
        f"() => {{ const el = document.querySelector({selector!r});"
        " return el && el.marks && el.marks.text.length > 0; }"
    )
    return page.eval_on_selector(selector, MARKS)


def hover_text(page: Any, selector: str) -> str:
    """The hover label shown with the mouse on the first finding's triangle of the chart at ``selector``."""
    page.locator(selector).scroll_into_view_if_needed()
    point = page.eval_on_selector(selector, TRIANGLE)
    page.mouse.move(0, 0)
    page.mouse.move(point["x"], point["y"], steps=3)
    page.wait_for_function(f"() => !document.querySelector({selector!r} + ' > .chart-tip').hidden")
    return page.locator(f"{selector} > .chart-tip").text_content()


def test_a_finding_is_a_span_over_its_time_on_the_metric_charts_on_a_time_axis(page, marked):
    page.goto(f"/jobs/{JOB}?axis=time")
    marks = wait_marked(page, LOSS)
    assert marks["spans"] == [[marked["started"], marked["ended"]]]
    assert marks["text"][0].startswith("Idle GPU · worker-0 · GPU 1 — ")


def test_hovering_the_marker_of_a_metric_chart_names_the_finding(page):
    page.goto(f"/jobs/{JOB}?axis=time")
    wait_marked(page, LOSS)
    text = hover_text(page, LOSS)
    assert "Idle GPU · worker-0 · GPU 1" in text and "resolved" in text


def test_a_metric_chart_on_the_iteration_axis_has_no_marks(page):
    page.goto(f"/jobs/{JOB}")
    page.wait_for_selector(LOSS)
    page.wait_for_function("() => window.__jpChartInteractive")
    marks = page.eval_on_selector(LOSS, MARKS)
    assert marks == {"spans": [], "text": [], "line": None}


def test_the_heat_map_and_the_system_charts_show_the_finding(page, marked):
    page.goto(f"/jobs/{JOB}#system")
    marks = wait_marked(page, HEAT)
    assert marks["spans"] == [[marked["started"], marked["ended"]]]
    assert "Idle GPU · worker-0 · GPU 1" in hover_text(page, HEAT)
    chart = '.system-chart .chart[data-metric="gpu_util"]'
    page.locator(chart).scroll_into_view_if_needed()
    assert wait_marked(page, chart)["spans"] == [[marked["started"], marked["ended"]]]
    assert "Idle GPU · worker-0 · GPU 1" in hover_text(page, chart)


def test_choosing_a_finding_keeps_every_mark_and_adds_the_time_marker(page, marked):
    page.goto(f"/jobs/{JOB}?axis=time#insights")
    page.click(".insights-panel table.findings tbody tr")
    page.click("[data-tab=metrics]")
    wait_marked(page, LOSS)
    line = page.eval_on_selector(LOSS, "el => el.marks.line")
    assert line == marked["started"] and wait_marked(page, LOSS)["spans"] == [[marked["started"], marked["ended"]]]


def test_an_open_finding_spans_to_now(page, server):
    headers = {"Authorization": f"Bearer {server.api_key}"}

    class Remote:
        def post(self, path: str, **kwargs):  # noqa: ANN003, ANN201
            return httpx.post(server.url + path, headers={**headers, **kwargs.pop("headers", {})}, **kwargs)

    util = lambda w, d: piecewise(90.0, (10, 30, 0.0)) if (w, d) == ("worker-1", "0") else constant(90.0)  # noqa: E731
    builder = healthy("ui-open-marked", (0, 30), workers=2, util=util, origin=recent(30))
    builder.project = PROJECT
    builder.send(Remote())
    assert Remote().post("/jp/v1/jobs/ui-open-marked/insights/evaluate", params={"at": builder.at(29.5)}).is_success
    page.goto("/jobs/ui-open-marked#system")
    marks = wait_marked(page, HEAT)
    [[start, end]] = marks["spans"]
    now = page.evaluate("Date.now()")
    assert start == builder.at(10) and now - 60_000 < end <= now
    assert marks["text"][0].startswith("Idle GPU · worker-1 · GPU 0 — warning · open for")
