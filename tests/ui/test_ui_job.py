"""The job page in headless Chromium: charts, zoom, heat map, plots and images, description, missing jobs."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from uitools import DEMO, call, element, plot_data, screenshot, wait_chart

from jobpulse.testing import ServerProcess

pytestmark = pytest.mark.e2e
LOSS = '.chart[data-metric="loss"]'


def open_job(page: Any, suffix: str = "") -> None:
    page.goto(f"/jobs/{DEMO}{suffix}")
    wait_chart(page, LOSS)


def test_a_chart_draws_the_downsampled_series_with_its_band(page: Any, ui_server: ServerProcess) -> None:
    open_job(page)
    traces = plot_data(page, LOSS)
    train = next(t for t in traces if t["name"] == "train")
    band = next(t for t in traces if t["name"] == "train max")
    assert 100 <= len(train["x"]) <= 1200
    assert min(train["x"]) < 10 and max(train["x"]) > 2990
    status, chart = call(ui_server, "GET", f"/jp/v1/jobs/{DEMO}/scalars/chart?metric=loss&variant=train&buckets=1")
    assert max(band["y"]) == pytest.approx(chart["series"][0]["max"][0])  # the spike survives downsampling
    assert max(train["y"]) < max(band["y"])
    assert {t["name"] for t in traces} >= {"train", "val"}
    page.wait_for_function("() => document.querySelectorAll('.chart.drawn').length >= 4")
    screenshot(page, "job.png")


def test_each_first_chart_is_requested_once(page: Any) -> None:
    urls: list[str] = []
    page.on("request", lambda r: urls.append(r.url) if "/scalars/chart" in r.url else None)
    open_job(page)
    page.wait_for_function("() => document.querySelectorAll('.chart.drawn').length >= 4")
    assert urls and len(urls) == len(set(urls)), urls


def test_zooming_fetches_a_finer_series_for_the_range(page: Any) -> None:
    open_job(page)
    box = page.locator(f"{LOSS} .u-over").bounding_box()
    y = box["y"] + box["height"] / 2
    with page.expect_request(
        lambda r: "/scalars/chart" in r.url and "metric=loss" in r.url and "x_min=" in r.url
    ) as req:
        page.mouse.move(box["x"] + box["width"] * 0.50, y)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.55, y, steps=5)
        page.mouse.up()
    query = parse_qs(urlparse(req.value.url).query)
    lo, hi = int(query["x_min"][0]), int(query["x_max"][0])
    assert 1000 < lo < hi < 2000
    page.wait_for_function(f"""() => {{
        const t = ({element(LOSS)}.data || []).find(t => t.name === 'train');
        return t && Math.min(...t.x) >= {lo} && Math.max(...t.x) <= {hi};
    }}""")
    train = next(t for t in plot_data(page, LOSS) if t["name"] == "train")
    assert len(train["x"]) == hi - lo + 1  # one point per step: full resolution inside the zoom
    assert page.get_by_role("button", name="Reset zoom").is_visible()
    with page.expect_request(lambda r: "/scalars/chart" in r.url and "metric=loss" in r.url and "x_min=" not in r.url):
        page.locator(f"{LOSS} .u-over").dblclick()  # the whole series again
    page.wait_for_function(f"""() => {{
        const t = ({element(LOSS)}.data || []).find(t => t.name === 'train');
        return t && Math.max(...t.x) > 2990;
    }}""")
    assert not page.get_by_role("button", name="Reset zoom").is_visible()


# The loss chart's legend: per entry its label, the value it shows and whether it is shown.
LEGEND = """rows => rows.map(r => ({label: r.querySelector('.u-label').textContent,
    value: r.querySelector('.u-value').textContent, shown: r.style.display !== 'none'}))"""


def test_the_legend_shows_the_values_under_the_cursor(page: Any) -> None:
    open_job(page)
    legend = f"{LOSS} .u-legend .u-series"
    entries = {e["label"]: e for e in page.eval_on_selector_all(legend, LEGEND)}
    assert entries["train"]["value"] == "–" and entries["train"]["shown"]
    assert not entries["train max"]["shown"] and not entries["train min"]["shown"]  # the band has no entry
    box = page.locator(f"{LOSS} .u-over").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5, steps=3)
    entries = {e["label"]: e for e in page.eval_on_selector_all(legend, LEGEND)}
    assert 1000 < float(entries["Step"]["value"].replace(",", "")) < 2000  # the step under the cursor, mid-chart
    assert "min" in entries["train"]["value"] and "max" in entries["train"]["value"]  # with the bucket's min and max


def test_plotly_is_loaded_only_for_the_plots_the_job_reported(page: Any) -> None:
    scripts: list[str] = []
    page.on("request", lambda r: scripts.append(r.url) if r.resource_type == "script" else None)
    open_job(page)
    page.wait_for_load_state("networkidle")
    assert scripts and not any("plotly" in url for url in scripts)
    page.get_by_role("tab", name="Plots & images").click()
    page.locator('.media-card[data-kind="plot"] .plot .main-svg').first.wait_for()
    assert any(url.endswith("/third-party/plotly.min.js") for url in scripts)


def test_the_time_axis_and_smoothing(page: Any) -> None:
    open_job(page)
    with page.expect_request(lambda r: "/scalars/chart" in r.url and "axis=time" in r.url):
        page.get_by_role("button", name="Time").click()
    page.wait_for_function(f"() => ({element(LOSS)}.dataset || {{}}).axis === 'time'")
    page.get_by_label("Smoothing").fill("0.9")
    page.wait_for_function(f"() => ({element(LOSS)}.data || []).some(t => t.name === 'train raw')")
    traces = plot_data(page, LOSS)
    raw = next(t for t in traces if t["name"] == "train raw")
    smooth = next(t for t in traces if t["name"] == "train")
    spread = lambda ys: max(abs(a - b) for a, b in zip(ys, ys[1:], strict=False))  # noqa: E731
    assert spread(smooth["y"][100:]) < spread(raw["y"][100:])


def test_the_heat_map_has_a_row_per_gpu_and_names_the_slow_one(page: Any) -> None:
    page.goto(f"/jobs/{DEMO}#system")
    heat = page.locator(".heatmap[data-rows]")
    heat.wait_for()
    [trace] = plot_data(page, ".heatmap")
    assert trace["type"] == "heatmap"
    assert len(trace["z"]) == 32 == len(set(trace["y"]))
    assert "worker-1 · GPU 5" in trace["y"]
    slow = trace["z"][trace["y"].index("worker-1 · GPU 5")]
    fast = trace["z"][trace["y"].index("worker-0 · GPU 0")]
    mean = lambda row: sum(v for v in row if v is not None) / len([v for v in row if v is not None])  # noqa: E731
    assert mean(slow) < 0.7 * mean(fast)
    outlier = page.locator('.outlier[data-worker="worker-1"][data-device="5"]')
    outlier.wait_for()
    outlier.click()
    assert page.get_by_label("Worker").input_value() == "worker-1"
    page.wait_for_function("""() => {
        const el = document.querySelector('.system-chart .chart[data-metric="gpu_util"]');
        return el && el.data && el.data.length === 8;
    }""")
    page.evaluate("window.scrollTo(0, 0)")
    page.mouse.move(0, 0)
    screenshot(page, "job-system.png")


# Where, in the page, the middle of the heat map's row ``label`` is (a third of the way along its time).
ROW = """(el, label) => {
    const u = el.chart, over = u.over.getBoundingClientRect(), rows = el.data[0].y;
    const y = u.valToPos(rows.length - rows.indexOf(label) - 0.5, 'y');
    return {x: over.left + over.width / 3, y: over.top + y};
}"""


def test_the_heat_map_names_a_cell_under_the_mouse_and_a_click_picks_its_worker(page: Any) -> None:
    page.goto(f"/jobs/{DEMO}#system")
    page.locator(".heatmap[data-rows]").wait_for()
    point = page.eval_on_selector(".heatmap", ROW, "worker-2 · GPU 3")
    page.mouse.move(point["x"], point["y"], steps=3)
    tip = page.locator(".heatmap > .chart-tip")
    tip.wait_for()
    assert tip.inner_text().startswith("worker-2 · GPU 3\n") and tip.inner_text().endswith("%")
    page.mouse.click(point["x"], point["y"])
    page.wait_for_function(f"() => {element('select[aria-label=Worker]')}.value === 'worker-2'")
    with page.expect_request(lambda r: "/system/series" in r.url):
        box = page.locator(".heatmap .u-over").bounding_box()  # a drag across a third of it: that time range
        page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + 20)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 20, steps=5)
        page.mouse.up()
    assert page.locator(".system .toolbar").get_by_role("button", name="Reset zoom").is_visible()


def test_plots_and_images_with_step_navigation(page: Any) -> None:
    page.goto(f"/jobs/{DEMO}#media")
    plot = page.locator('.media-card[data-kind="plot"]')
    plot.locator(".plot .main-svg").first.wait_for()
    [heatmap] = plot_data(page, '.media-card[data-kind="plot"] .plot')
    assert heatmap["type"] == "heatmap" and len(heatmap["z"]) == 4
    image = page.locator('.media-card[data-kind="image"] img')
    image.wait_for()
    assert image.get_attribute("src") == f"/jp/v1/jobs/{DEMO}/files/samples/batch-3000.png"
    shown = element('.media-card[data-kind="image"] img')
    page.wait_for_function(f"() => {shown}.naturalWidth === 64")
    assert page.locator('.media-card[data-kind="image"]').get_attribute("data-iter") == "3000"
    assert page.locator('.media-card[data-kind="image"]').get_by_label("Next step").is_disabled()


def test_the_description_and_storage_usage(page: Any, ui_server: ServerProcess) -> None:
    page.goto(f"/jobs/{DEMO}#details")
    page.locator("table.usage").wait_for()
    facts = page.locator(".facts").inner_text()
    assert "8x H100 80GB" in facts and "8× H100" in facts
    status, usage = call(ui_server, "GET", f"/jp/v1/jobs/{DEMO}/usage")
    usage_text = page.locator("table.usage").inner_text()
    assert f"{usage['kinds']['system']['rows']:,}" in usage_text
    assert page.locator("table.workers tbody tr").count() == 4
    assert "gpu-node-01" in page.locator("table.workers").inner_text()


def test_the_insights_tab_counts_the_findings_and_names_what_showed_each_cause(page: Any) -> None:
    open_job(page)
    assert page.wait_for_selector("[data-tab=insights] .count").text_content() == "2"  # resolved ones count too
    page.click("[data-tab=insights]")
    page.wait_for_selector(".insights-panel table.findings tbody tr")
    rows = page.locator(".insights-panel table.findings tbody tr").all_text_contents()
    underused = next(row for row in rows if "Underused GPUs" in row)
    assert "causes: input_bound" in underused and "[object Object]" not in underused
    assert "cause_evidence: input_bound (metric cpu_util, median_pct" in underused


def test_a_failed_job_shows_its_error_message(page: Any, ui_server: ServerProcess) -> None:
    call(ui_server, "POST", "/jp/v1/jobs", {"project": "demo", "job": "ui-failed", "status": "running"})
    call(
        ui_server, "PATCH", "/jp/v1/jobs/ui-failed", {"status": "failed", "error_message": "CUDA error: out of memory"}
    )
    page.goto("/jobs/ui-failed")
    alert = page.locator(".alert-bad")
    alert.wait_for()
    assert "Job failed" in alert.inner_text() and "CUDA error: out of memory" in alert.inner_text()
    assert page.get_by_text("No scalars yet").is_visible()


def test_a_missing_or_deleted_job_is_named_plainly(page: Any, ui_server: ServerProcess) -> None:
    response = page.goto("/jobs/no-such-job")
    assert response.status == 404
    assert "job 'no-such-job' does not exist" in page.locator("main").inner_text()
    call(ui_server, "POST", "/jp/v1/jobs", {"project": "demo", "job": "ui-deleted"})
    assert call(ui_server, "DELETE", "/jp/v1/jobs/ui-deleted")[0] == 200
    for path in ("/jobs/ui-deleted", "/jobs/ui-deleted/logs"):
        response = page.goto(path)
        assert response.status == 404
        text = page.locator("main").inner_text()
        assert "job 'ui-deleted' does not exist" in text and "Traceback" not in text
