"""The job → nodes → ranks hierarchy in headless Chromium: the workers card, the shape in the summary, the logs
filtered by node and by rank, and the system tab's node choice."""

from __future__ import annotations

import time
from typing import Any

import pytest
from uitools import call, plot_data, screenshot

from jobpulse.testing import ServerProcess

pytestmark = pytest.mark.e2e
JOB = "hierarchy-ui"
ALONE = "hierarchy-ui-alone"  # ranks of a node that never registered (a launcher run without the wrapper)
ROWS = ".logrow"
# node -> (host, its ranks)
NODES = {"node-0": ("host-a", [0, 1]), "node-1": ("host-b", [2, 3])}
LINES = 5


def _register(server: ServerProcess, worker: str, place: dict, job: str = JOB) -> None:
    status, body = call(server, "PUT", f"/jp/v1/jobs/{job}/workers/{worker}", place)
    assert status == 200, body


@pytest.fixture(scope="module")
def two_nodes(ui_server: ServerProcess) -> str:
    """Two node workers (their launcher's lines and system samples) of two ranks each (their console lines)."""
    t0 = int(time.time() * 1000) - 600_000
    series: list[dict] = []
    for node, (_, ranks) in NODES.items():
        for worker in [node, *(f"worker-{r}" for r in ranks)]:
            series.append(
                {
                    "kind": "log",
                    "worker": worker,
                    "seq": list(range(LINES)),
                    "ts": [t0 + i * 1000 + len(series) for i in range(LINES)],
                    "msg": [f"line {i} of {worker}" for i in range(LINES)],
                }
            )
        for metric, device, value in [("cpu_util", "", 40.0), ("gpu_util", "0", 90.0), ("gpu_util", "1", 80.0)]:
            series.append(
                {
                    "kind": "system",
                    "worker": node,
                    "metric": metric,
                    "device": device,
                    "ts": [t0 + i * 10_000 for i in range(30)],
                    "value": [value] * 30,
                }
            )
    status, body = call(ui_server, "POST", "/jp/v1/ingest", {"project": "demo", "job": JOB, "series": series})
    assert status == 200 and not body.get("rejected"), body
    for node, (host, ranks) in NODES.items():
        _register(ui_server, node, {"kind": "node", "host": host})
        for local, rank in enumerate(ranks):
            place = {"kind": "rank", "node": node, "rank": rank, "local_rank": local, "host": host}
            _register(ui_server, f"worker-{rank}", place)
    return JOB


@pytest.fixture(scope="module")
def alone(ui_server: ServerProcess) -> str:
    """Three ranks of ``node-0``, which never registered a node worker, each logging and sampling its CPU."""
    t0 = int(time.time() * 1000) - 600_000
    series: list[dict] = []
    for rank in range(3):
        worker = f"worker-{rank}"
        ts = [t0 + i * 1000 + rank for i in range(LINES)]
        series.append({"kind": "log", "worker": worker, "seq": list(range(LINES)), "ts": ts, "msg": worker})
        series.append({"kind": "system", "worker": worker, "metric": "cpu_util", "ts": ts, "value": 10.0 + rank})
    status, body = call(ui_server, "POST", "/jp/v1/ingest", {"project": "demo", "job": ALONE, "series": series})
    assert status == 200 and not body.get("rejected"), body
    for rank in range(3):
        place = {"kind": "rank", "node": "node-0", "rank": rank, "local_rank": rank, "host": "host-c"}
        _register(ui_server, f"worker-{rank}", place, ALONE)
    return ALONE


def _shown_workers(page: Any) -> set[str]:
    return set(page.locator(f"{ROWS} .w").all_inner_texts())


def test_the_workers_card_nests_each_nodes_ranks(page: Any, two_nodes: str) -> None:
    page.goto(f"/jobs/{two_nodes}#details")
    rows = page.locator("table.workers tbody tr")
    rows.first.wait_for()
    order = [rows.nth(i).get_attribute("data-worker") for i in range(rows.count())]
    assert order == ["node-0", "worker-0", "worker-1", "node-1", "worker-2", "worker-3"]
    rank = page.locator('table.workers tr.rank-row[data-worker="worker-3"]').inner_text()
    assert "rank" in rank and "host-b" in rank and "\t1\t" in rank  # kind, host, local rank
    node = page.locator('table.workers tr.node-row[data-worker="node-1"]')
    assert "node" in node.inner_text() and "host-b" in node.inner_text()
    assert node.get_by_role("link", name="logs").get_attribute("href") == f"/jobs/{two_nodes}/logs?node=node-1"
    page.locator("table.workers").scroll_into_view_if_needed()
    screenshot(page, "job-hierarchy.png")


def test_ranks_of_a_node_that_never_registered_sit_under_its_name(page: Any, alone: str) -> None:
    page.goto(f"/jobs/{alone}#details")
    rows = page.locator("table.workers tbody tr")
    rows.first.wait_for()
    order = [rows.nth(i).get_attribute("data-worker") for i in range(rows.count())]
    assert order == ["node-0", "worker-0", "worker-1", "worker-2"]
    assert "host-c" in rows.first.inner_text()  # the node's host, from its ranks
    assert "1 node × 3 ranks" in page.locator(".facts").inner_text()
    page.goto(f"/jobs/{alone}/logs?node=node-0")
    page.wait_for_function(f"() => document.querySelectorAll('{ROWS}').length === {3 * LINES}")
    assert _shown_workers(page) == {"worker-0", "worker-1", "worker-2"}


def test_the_summary_says_nodes_times_ranks(page: Any, two_nodes: str) -> None:
    page.goto(f"/jobs/{two_nodes}")
    page.locator(".facts").wait_for()
    assert "2 nodes × 2 ranks" in page.locator(".facts").inner_text()


def test_the_logs_filter_by_node_shows_the_node_and_its_ranks(page: Any, two_nodes: str) -> None:
    page.goto(f"/jobs/{two_nodes}/logs?node=node-0")
    page.locator(ROWS).first.wait_for()
    page.wait_for_function(f"() => document.querySelectorAll('{ROWS}').length === {3 * LINES}")
    assert _shown_workers(page) == {"node-0", "worker-0", "worker-1"}
    assert page.get_by_label("Worker").input_value() == "node:node-0"


def test_the_logs_filter_by_rank_shows_that_rank_only(page: Any, two_nodes: str) -> None:
    page.goto(f"/jobs/{two_nodes}/logs")
    page.locator(ROWS).first.wait_for()
    with page.expect_request(lambda r: "/logs?" in r.url and "worker=worker-2" in r.url):
        page.get_by_label("Worker").select_option("worker-2")
    page.wait_for_function(f"() => document.querySelectorAll('{ROWS}').length === {LINES}")
    assert _shown_workers(page) == {"worker-2"}
    assert "worker=worker-2" in page.url
    page.get_by_label("Worker").select_option("node:node-1")
    page.wait_for_function(f"() => document.querySelectorAll('{ROWS}').length === {3 * LINES}")
    assert _shown_workers(page) == {"node-1", "worker-2", "worker-3"}
    assert "node=node-1" in page.url
    screenshot(page, "logs-node.png")


def test_the_system_tab_picks_a_node(page: Any, two_nodes: str) -> None:
    page.goto(f"/jobs/{two_nodes}#system")
    choice = page.get_by_label("Node")
    choice.wait_for()
    options = choice.locator("option").all_inner_texts()
    assert options == ["All nodes (2)", "node-0 · 2 ranks", "node-1 · 2 ranks"]
    cpu = '.system-chart .chart[data-metric="cpu_util"]'
    page.wait_for_function(f"() => (document.querySelector('{cpu}') || {{}}).data?.length === 2")
    choice.select_option("node-1")
    page.wait_for_function(f"() => (document.querySelector('{cpu}') || {{}}).data?.length === 1")
    assert [t["name"] for t in plot_data(page, cpu)] == ["node-1"]


def test_the_system_tab_picks_a_node_whose_ranks_sample_themselves(page: Any, alone: str) -> None:
    page.goto(f"/jobs/{alone}#system")
    choice = page.get_by_label("Node")
    choice.wait_for()
    cpu = '.system-chart .chart[data-metric="cpu_util"]'
    page.wait_for_function(f"() => (document.querySelector('{cpu}') || {{}}).data?.length === 3")
    choice.select_option(label="node-0 · 3 ranks")
    assert choice.input_value() == "worker-0,worker-1,worker-2"
    choice.select_option("worker-1")
    page.wait_for_function(f"() => (document.querySelector('{cpu}') || {{}}).data?.length === 1")
    assert [t["name"] for t in plot_data(page, cpu)] == ["worker-1"]
