"""The benchmark's jobpulse side, at a tiny size, so that the benchmark code cannot rot unnoticed.

It runs ``bench/run.py`` as a person would (jobpulse only, no peers), against a real server process; every
workload checks what it reads back, so a wrong answer fails here as well as a crash.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = [
    "w1.ingest.columnar",
    "w1.ingest.arrow",
    "w1.ingest.jsonl",
    "w1.ingest.jsonl_python",
    "w1.ingest.sdk",
    "w2.read_full",
    "w2.chart_first",
    "w2.chart",
    "w2.chart_big_first",
    "w2.chart_big",
    "w3.ingest",
    "w3.latest",
    "w4.ingest",
    "w4.query_first",
    "w4.query",
    "w5.ingest",
    "w5.tail",
    "w5.search",
    "w6.log_call",
    "w7.mem_rest",
    "w7.mem_peak_w1",
    "w7.disk_per_million",
    "w7.install_server",
]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    tmp = tmp_path_factory.mktemp("bench")
    out = tmp / "RESULTS.md"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "run.py"),
            "--tiny",
            "--jobpulse-only",
            "--quiet",
            "--out",
            str(out),
            "--work",
            str(tmp / "work"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((tmp / "work" / "results.json").read_text()), out.read_text()


@pytest.mark.e2e
def test_every_jobpulse_workload_is_measured_without_error(tiny_run: tuple[dict, str]) -> None:
    report, _ = tiny_run
    result = report["results"]["jobpulse"]
    assert result["errors"] == {}
    missing = [k for k in EXPECTED if not result["figures"].get(k, {}).get("values")]
    assert missing == []
    assert all(v > 0 for k in EXPECTED for v in result["figures"][k]["values"])


@pytest.mark.e2e
def test_results_page_shows_machine_table_and_targets(tiny_run: tuple[dict, str]) -> None:
    report, page = tiny_run
    assert f"- cores: {report['machine']['cores']}" in page
    row = next(line for line in page.splitlines() if line.startswith("| 1. scalar ingest, HTTP columnar |"))
    assert row.split("|")[3].strip().replace(",", "").isdigit()  # the jobpulse cell holds a measured rate
    assert "| SDK log(): 20x cheaper than the cheapest peer |" in page
