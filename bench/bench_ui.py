"""Web UI benchmark: cold and warm load times of the UI's pages in headless Chromium, and what they transfer.

    .venv/bin/python bench/bench_ui.py               # 1,000,000 points per metric, 64 GPUs
    .venv/bin/python bench/bench_ui.py --quick       # 100,000 points per metric

It starts a real ``jobpulse server``, loads one job through the ingest API (four scalar metrics of
``--points`` points each, system metrics of 8 workers x 8 GPUs every 10 s over ``--hours`` hours, and
log lines) and a second job of the same scalars to compare it with, then opens the pages in Debian's headless
Chromium. Every time is from navigation start; a cold run starts with an empty browser cache (a new browser
context), a warm run is a reload in the same context (a returning user). The figures:

- jobs list: the list's row of the benchmark job shown.
- job page, first interactive chart: the first scalar chart drawn with its data by uPlot, zoom and hover working
  (the page's ``jp-chart-interactive`` performance mark); ``jp-first-data`` tells when its response was parsed.
- system tab, heat map: the heat map of every GPU drawn (``jp-heatmap``).
- compare: the first chart of the two jobs drawn.
- logs page: the first log lines shown.

For each it sums the bytes the page transferred (resource timing ``transferSize``: compressed bodies plus
headers, counted once the page's network is idle) and the page's JavaScript as sent (``encodedBodySize`` of its
scripts, gzipped). Plotly.js is loaded only where the job's Plotly figures are shown (its plots tab), so no
page measured here loads it. Targets: 1 s cold for each page, the job page's JavaScript at most 300 KB gzipped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from machine import describe

from jobpulse.client import Client
from jobpulse.credentials import Credentials
from jobpulse.testing import CHROMIUM, CHROMIUM_ARGS, ServerProcess, running_server

JOB = "bench-ui"
PROJECT = "bench"
WORKERS = 8
GPUS = 8
CHUNK = 250_000


SECOND = "bench-ui-2"
TARGET_MS = 1000
TARGET_JS_KB = 300


def machine() -> str:
    try:
        chromium = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True, timeout=20).stdout.strip()
    except OSError:
        chromium = "chromium missing"
    return f"{describe()}; {chromium}"


def load_job(client: Client, points: int, hours: int, log_lines: int) -> dict[str, int]:
    """Send the benchmark job and the job to compare it with: returns what was stored, by kind."""
    rng = np.random.default_rng(1)
    now = int(time.time() * 1000)
    span = hours * 3_600_000
    t0 = now - span
    for job in (JOB, SECOND):
        client.request(
            "POST",
            "/jp/v1/jobs",
            json={
                "project": PROJECT,
                "job": job,
                "name": f"UI benchmark: {points:,} points per metric, {WORKERS * GPUS} GPUs",
                "status": "running",
                "instance_type": {"name": "8x H100 80GB", "gpu_count": GPUS, "gpu_type": "H100"},
            },
        )
    sizes = {"scalars": load_scalars(client, rng, points, t0, span)}
    sizes["scalars"] += load_scalars(client, rng, points, t0, span, job=SECOND)
    sizes["system"] = load_system(client, rng, t0, now)
    sizes["logs"] = load_logs(client, rng, t0, now, log_lines)
    return sizes


def load_scalars(client: Client, rng: np.random.Generator, points: int, t0: int, span: int, job: str = JOB) -> int:
    """Four scalar metrics of ``points`` points each for ``job``: returns the points stored."""
    stored = 0
    steps = np.arange(points)
    ts = t0 + steps * (span // points)
    progress = steps / points
    metrics = {
        ("loss", "train"): 6.9 * np.exp(-4 * progress) + 0.9 + rng.normal(0, 0.08, points),
        ("accuracy", "top1"): 76 * (1 - np.exp(-4.5 * progress)) + rng.normal(0, 0.6, points),
        ("lr", "lr"): 0.2 * (1 + np.cos(np.pi * progress)),
        ("throughput", "images_per_sec"): 2900 + rng.normal(0, 60, points),
    }
    for (metric, variant), values in metrics.items():
        for lo in range(0, points, CHUNK):
            hi = min(points, lo + CHUNK)
            body = {
                "project": PROJECT,
                "job": job,
                "series": [
                    {
                        "kind": "scalar",
                        "metric": metric,
                        "variant": variant,
                        "iter": steps[lo:hi].tolist(),
                        "ts": ts[lo:hi].tolist(),
                        "value": np.round(values[lo:hi], 5).tolist(),
                    }
                ],
            }
            stored += client.ingest(body)["accepted"]
    return stored


def load_system(client: Client, rng: np.random.Generator, t0: int, now: int) -> int:
    """GPU, CPU and memory samples of every worker every 10 s: returns the samples stored."""
    stored = 0
    sample_ts = np.arange(t0, now, 10_000)
    n = len(sample_ts)
    for worker in range(WORKERS):
        series = []
        for gpu in range(GPUS):
            util = np.clip(95 + rng.normal(0, 3, n), 0, 100)
            if worker == 5 and gpu == 3:
                util = np.clip(40 + rng.normal(0, 8, n), 0, 100)
            for metric, values in (("gpu_util", util), ("gpu_mem_util", np.clip(util * 0.8, 0, 100))):
                series.append(
                    {
                        "kind": "system",
                        "worker": f"worker-{worker}",
                        "metric": metric,
                        "device": str(gpu),
                        "ts": sample_ts.tolist(),
                        "value": np.round(values, 2).tolist(),
                    }
                )
        for metric in ("cpu_util", "mem_util"):
            series.append(
                {
                    "kind": "system",
                    "worker": f"worker-{worker}",
                    "metric": metric,
                    "device": "",
                    "ts": sample_ts.tolist(),
                    "value": np.round(30 + rng.normal(0, 5, n), 2).tolist(),
                }
            )
        stored += client.ingest({"project": PROJECT, "job": JOB, "series": series})["accepted"]
    return stored


def load_logs(client: Client, rng: np.random.Generator, t0: int, now: int, log_lines: int) -> int:
    """``log_lines`` log lines across the workers: returns the lines stored."""
    stored = 0
    per_worker = log_lines // WORKERS
    for worker in range(WORKERS):
        line_ts = np.sort(rng.integers(t0, now, per_worker))
        body = {
            "project": PROJECT,
            "job": JOB,
            "series": [
                {
                    "kind": "log",
                    "worker": f"worker-{worker}",
                    "seq": list(range(per_worker)),
                    "ts": line_ts.tolist(),
                    "level": "info",
                    "msg": [f"step {i} loss={1 + 1 / (i + 1):.4f} lr=0.2" for i in range(per_worker)],
                }
            ],
        }
        stored += client.ingest(body)["accepted"]
    return stored


_SIZES_JS = """() => {
  const entries = [performance.getEntriesByType('navigation')[0], ...performance.getEntriesByType('resource')];
  const scripts = entries.filter(e => /\\.m?js(\\?|$)/.test(new URL(e.name).pathname));
  return { transfer: entries.reduce((s, e) => s + (e.transferSize || 0), 0),
           js: scripts.reduce((s, e) => s + (e.encodedBodySize || 0), 0),
           requests: entries.length,
           api: entries.filter(e => e.name.includes('/jp/v1/')).reduce((s, e) => s + (e.transferSize || 0), 0),
           plotly: entries.some(e => e.name.includes('/third-party/plotly.min.js')) };
}"""

_DATA_JS = "() => (performance.getEntriesByName('jp-first-data')[0] || {}).startTime ?? null"


def wait_drawn(page: Any, url: str, ready_js: str) -> None:
    try:
        page.wait_for_function(ready_js, timeout=60_000)
    except Exception as exc:
        shot = Path(os.environ.get("TMPDIR", "/tmp")) / "bench_ui_failure.png"
        page.screenshot(path=str(shot))
        raise RuntimeError(f"{url} did not draw within 60 s; screenshot at {shot}") from exc


def measure(page: Any, url: str, ready_js: str, mark_js: str) -> dict[str, Any]:
    """Open ``url`` and time it: ``ms`` when ``ready_js`` holds (``mark_js`` answers the time), when the first
    chart's data had arrived, and the bytes the page transferred."""
    page.goto(url, wait_until="commit")
    wait_drawn(page, url, ready_js)
    out = {"ms": page.evaluate(mark_js), "data": page.evaluate(_DATA_JS)}
    page.wait_for_load_state("networkidle")
    return {**out, **page.evaluate(_SIZES_JS)}


def mark(name: str) -> tuple[str, str]:
    """Waiting for, and the time of, the page's performance mark ``name``."""
    return (
        f"() => performance.getEntriesByName('{name}').length > 0",
        f"() => performance.getEntriesByName('{name}')[0].startTime",
    )


def shown(selector: str) -> tuple[str, str]:
    """Waiting for ``selector`` to be on the page, and the time it is seen there."""
    return f"() => !!document.querySelector({selector!r})", "() => performance.now()"


PAGES = {
    "jobs list": ("/", shown(f'tr[data-job="{JOB}"]')),
    "job page, first interactive chart": (f"/jobs/{JOB}", mark("jp-chart-interactive")),
    "system tab, heat map": (f"/jobs/{JOB}#system", mark("jp-heatmap")),
    "compare, first chart": (f"/compare?jobs={JOB},{SECOND}", mark("jp-chart-interactive")),
    "logs page, first lines": (
        f"/jobs/{JOB}/logs",
        ("() => document.querySelectorAll('.logrow').length > 10", "() => performance.now()"),
    ),
}


def browse(server: ServerProcess, runs: int) -> dict[str, list[dict[str, Any]]]:
    from playwright.sync_api import sync_playwright

    client = Client(Credentials(server.url, server.api_key))
    out: dict[str, list[dict[str, Any]]] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for name, (path, (ready, at)) in PAGES.items():
            for run in range(runs):
                context = browser.new_context(viewport={"width": 1440, "height": 900})
                page = context.new_page()
                page.goto(client.request("POST", "/jp/v1/login-links")["url"])  # one-time links
                page.goto("about:blank")
                cold = measure(page, server.url + path, ready, at)
                page.goto("about:blank")
                warm = measure(page, server.url + path, ready, at)
                out.setdefault(f"{name} (cold)", []).append(cold)
                out.setdefault(f"{name} (warm)", []).append(warm)
                context.close()
                print(f"  run {run + 1}: {name}: cold {cold['ms']:.0f} ms, warm {warm['ms']:.0f} ms", flush=True)
        browser.close()
    return out


def report(results: dict[str, list[dict[str, Any]]]) -> None:
    print(
        f"\n{'page':<42} {'median ms':>10} {'range ms':>15} {'transfer':>11} {'of it API':>10} "
        f"{'JS gzipped':>11} {'requests':>9}"
    )
    for name in PAGES:
        for kind in ("cold", "warm"):
            rows = results[f"{name} ({kind})"]
            ms = [r["ms"] for r in rows]
            row = rows[len(rows) // 2]
            print(
                f"{name + f' ({kind})':<42} {statistics.median(ms):>10.0f} {min(ms):>7.0f}-{max(ms):<7.0f} "
                f"{row['transfer'] / 1024:>8.0f} KB {row['api'] / 1024:>7.0f} KB {row['js'] / 1024:>8.0f} KB "
                f"{row['requests']:>9.0f}"
            )
    print()
    cold = {name: statistics.median(r["ms"] for r in results[f"{name} (cold)"]) for name in PAGES}
    job = results["job page, first interactive chart (cold)"]
    js_kb = statistics.median(r["js"] for r in job) / 1024
    data = statistics.median(r["data"] for r in job if r.get("data") is not None)
    loads_plotly = sorted({name for name in PAGES for r in results[f"{name} (cold)"] if r["plotly"]})
    chart = cold["job page, first interactive chart"]
    print(f"job page cold: first chart data at {data:.0f} ms, first interactive chart at {chart:.0f} ms (medians)")
    print(f"Plotly.js loaded by: {', '.join(loads_plotly) or 'none of these pages'}")
    for name, ms in cold.items():
        print(f"cold {name}: {ms:.0f} ms ({'within' if ms <= TARGET_MS else 'OVER'} the {TARGET_MS} ms target)")
    verdict = "within" if js_kb <= TARGET_JS_KB else "OVER"
    print(f"job page JavaScript: {js_kb:.0f} KB gzipped ({verdict} the {TARGET_JS_KB} KB target)")
    print(f"load average now {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000, help="points per scalar metric")
    parser.add_argument("--hours", type=int, default=24, help="hours of system metrics at 10 s")
    parser.add_argument("--logs", type=int, default=200_000, help="log lines across the 8 workers")
    parser.add_argument("--runs", type=int, default=3, help="repeats; the median is reported")
    parser.add_argument("--quick", action="store_true", help="100,000 points, 6 hours, 20,000 log lines, 1 run")
    args = parser.parse_args()
    if args.quick:
        args.points, args.hours, args.logs, args.runs = 100_000, 6, 20_000, 1
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing: apt-get install -y chromium", file=sys.stderr)
        return 2
    print(f"machine: {machine()}")
    with running_server() as server:
        client = Client(Credentials(server.url, server.api_key))
        started = time.monotonic()
        sizes = load_job(client, args.points, args.hours, args.logs)
        print(
            f"jobs {JOB} and {SECOND}: {sizes['scalars']:,} scalar points (2 jobs x 4 metrics x {args.points:,}), "
            f"{sizes['system']:,} system samples ({WORKERS} workers x {GPUS} GPUs, {args.hours} h at 10 s), "
            f"{sizes['logs']:,} log lines; loaded in {time.monotonic() - started:.1f} s"
        )
        results = browse(server, args.runs)
    report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
