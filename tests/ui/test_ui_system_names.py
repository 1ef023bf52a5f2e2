"""The System tab speaks people's words: every metric the agent sends has a title and a unit in the page's one
name table, and a job of a few seconds draws its samples on a readable time axis instead of blank charts."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
from uitools import call, plot_data, screenshot

from jobpulse.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2] / "src" / "jobpulse"
TABLE_JS = ROOT / "ui" / "static" / "system-metrics.js"
UNITS = {"percent", "fraction", "bytes", "bytes_per_s", "cores", "seconds", "watts", "celsius", "mhz", "count", "code"}
# the two storage paths DESIGN.md names; the agent builds their metric names from the configured path's name
DESIGN_PATHS = {"ephemeral_bytes", "ephemeral_util", "cache_bytes", "cache_util"}
METRIC = re.compile(r"^(?:cpu|mem|gpu|npu|net|disk|agent)_[A-Za-z_]+$")


def _table() -> dict[str, dict[str, str]]:
    """The name table of ``system-metrics.js``, read as the JSON it is written in."""
    text = TABLE_JS.read_text()
    block = text.split("/* metric-table:begin */", 1)[1].split("/* metric-table:end */", 1)[0]
    return json.loads(block.split("=", 1)[1].strip().rstrip(";"))


def _agent_metrics() -> set[str]:
    """Every metric name the agent's collectors put in a ``Sample``: a literal first argument, or (where the name
    is a variable) each metric-like string of the function that builds it."""
    names: set[str] = set()
    for path in (ROOT / "agent").glob("*.py"):
        tree = ast.parse(path.read_text())
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Sample" and node.args):
                    continue
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    names.add(first.value)
                elif isinstance(first, ast.Name):
                    names.update(
                        c.value
                        for c in ast.walk(func)
                        if isinstance(c, ast.Constant) and isinstance(c.value, str) and METRIC.match(c.value)
                    )
    return names


def test_every_metric_the_agent_sends_has_a_title_and_a_unit() -> None:
    table = _table()
    sent = _agent_metrics()
    assert {"cpu_cores", "gpu_util", "npu_aicpu_util", "gpu_ecc_corrected", "agent_cpu_seconds"} <= sent
    missing = sorted((sent | DESIGN_PATHS) - table.keys())
    assert not missing, f"system metrics without a title and unit in {TABLE_JS.name}: {missing}"
    for name, entry in table.items():
        assert entry["unit"] in UNITS, name
        assert entry["title"] and entry["title"] != name and "_" not in entry["title"], name


SHORT = "short-run"
# the x-range a chart shows, in epoch milliseconds (its uPlot instance's x scale)
X_RANGE = "el => [el.chart.scales.x.min, el.chart.scales.x.max]"
T0 = 1_790_000_040_000


@pytest.fixture(scope="module")
def short_job(ui_server: ServerProcess) -> str:
    """A job that lived six seconds: three samples 3 s apart, and a metric with a single sample."""
    ts = [T0, T0 + 3000, T0 + 6000]

    def series(metric: str, device: str, values: list[float], times: list[int] = ts) -> dict[str, Any]:
        return {
            "kind": "system",
            "worker": "worker-0",
            "metric": metric,
            "device": device,
            "ts": times,
            "value": values,
        }

    body = {
        "project": "short",
        "job": SHORT,
        "series": [
            series("gpu_util", "0", [40.0, 85.0, 90.0]),
            series("gpu_mem_bytes", "0", [2.0 * 2**30, 6.5 * 2**30, 7.0 * 2**30]),
            series("mem_bytes", "", [300.0 * 2**20, 320.0 * 2**20, 310.0 * 2**20]),
            series("cpu_limit_cores", "", [4.0, 4.0, 4.0]),
            series("agent_cpu_seconds", "", [0.2, 0.25, 0.31]),
            series("net_rx_Bps", "", [5.0 * 2**20], [T0 + 3000]),
        ],
    }
    status, answer = call(ui_server, "POST", "/jp/v1/ingest", body)
    assert status == 200 and answer["accepted"] == 16, answer
    return SHORT


def _chart(page: Any, metric: str) -> str:
    selector = f'.system-chart .chart[data-metric="{metric}"]'
    page.locator(f'.system-chart[data-metric="{metric}"]').scroll_into_view_if_needed()
    page.wait_for_function(
        "s => { const el = document.querySelector(s); return !!(el && el.data && el.data.length); }", arg=selector
    )
    return selector


@pytest.mark.e2e
def test_system_charts_have_human_titles_with_units(page: Any, short_job: str) -> None:
    page.goto(f"/jobs/{short_job}#system")
    expected = {
        "gpu_mem_bytes": ("GPU memory used (GiB)", "GiB"),
        "mem_bytes": ("Memory used (MiB)", "MiB"),
        "cpu_limit_cores": ("CPU limit (cores)", "cores"),
        "agent_cpu_seconds": ("Agent CPU time (s)", "s"),
        "net_rx_Bps": ("Network received (MiB/s)", "MiB/s"),
        "gpu_util": ("GPU utilization (%)", "%"),
    }
    for metric, (title, unit) in expected.items():
        selector = _chart(page, metric)
        assert page.locator(f'.system-chart[data-metric="{metric}"] h2').inner_text() == title
        assert page.eval_on_selector(selector, "el => el.chart.axes[1].label") == unit
    [mem] = plot_data(page, _chart(page, "mem_bytes"))
    assert mem["y"] == pytest.approx([300.0, 320.0, 310.0])  # plotted in the unit the axis names
    heat_title = page.locator(".heat-card h2").inner_text()
    assert heat_title == "GPU utilization by worker and GPU (%)"


@pytest.mark.e2e
def test_a_short_job_draws_its_points_on_a_seconds_axis(page: Any, short_job: str) -> None:
    page.goto(f"/jobs/{short_job}#system")
    for metric in ("gpu_util", "mem_bytes", "net_rx_Bps"):
        selector = _chart(page, metric)
        traces = plot_data(page, selector)
        assert traces and all(len(t["x"]) >= 1 for t in traces)
        assert page.eval_on_selector(selector, "el => el.data.every(s => s.points)")  # few samples: drawn as points
        low, high = page.eval_on_selector(selector, X_RANGE)
        assert high - low >= 6000  # the whole job, not a sliver around one bucket
        ticks = [label.split("\n")[0] for label in json.loads(page.get_attribute(selector, "data-x-ticks"))]
        assert ticks and all(re.fullmatch(r"\d\d:\d\d:\d\d", t) for t in ticks), ticks
    [single] = plot_data(page, '.system-chart .chart[data-metric="net_rx_Bps"]')
    assert len(single["x"]) == 1 and single["y"] == pytest.approx([5.0])
    page.locator(".heatmap[data-rows]").wait_for()
    [heat] = plot_data(page, ".heatmap")
    assert any(v is not None for row in heat["z"] for v in row)
    page.evaluate("() => window.scrollTo(0, 0)")
    screenshot(page, "job-system-short.png")
