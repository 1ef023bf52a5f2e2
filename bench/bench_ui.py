"""Web UI benchmark: time to first chart of the job page in headless Chromium, and what the page transfers.

    .venv/bin/python bench/bench_ui.py               # 1,000,000 points per metric, 64 GPUs
    .venv/bin/python bench/bench_ui.py --quick       # 100,000 points per metric

It starts a real ``jobpulse server``, loads one job through the ingest API (four scalar metrics of
``--points`` points each, system metrics of 8 workers x 8 GPUs every 10 s over ``--hours`` hours, and
log lines), then opens the job page in Debian's headless Chromium. Every time is from navigation start;
a cold run starts with an empty browser cache, a warm run is a reload in the same browser (a returning
user). The figures:

- time to first chart: the first scalar chart drawn with its data (the page's ``jp-first-chart``
  performance mark). The page draws a chart's first data with its own canvas renderer (``preview.js``)
  as soon as the data has arrived, without waiting for Plotly.js (about 4.8 MB of script, 1.5 MB
  gzipped, which the browser must fetch, compile and run first).
- time to interactive chart: the first Plotly chart drawn (``jp-chart-interactive``), zoom and hover
  working; the Plotly chart takes the preview's place with the same data, without asking for it again.
- first chart data (``jp-first-data``) and Plotly.js ready (``jp-plotly-ready``): when the first chart's
  response was parsed and when the Plotly.js script had run, to tell which of the two a chart waited for.

It also times the heat map of the system tab and the first log lines of the logs page, and sums the bytes
each page transferred (resource timing ``transferSize``: compressed bodies plus headers, counted once the
page's network is idle, so Plotly.js is in the job page's figures) and their decoded size.
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
from jobpulse.testing import ServerProcess, running_server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
JOB = "bench-ui"
PROJECT = "bench"
WORKERS = 8
GPUS = 8
CHUNK = 250_000


def machine() -> str:
    try:
        chromium = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True, timeout=20).stdout.strip()
    except OSError:
        chromium = "chromium missing"
    import plotly

    return f"{describe()}; {chromium}; plotly {plotly.__version__}"


def load_job(client: Client, points: int, hours: int, log_lines: int) -> dict[str, int]:
    """Send the benchmark job: returns what was stored, by kind."""
    rng = np.random.default_rng(1)
    now = int(time.time() * 1000)
    span = hours * 3_600_000
    t0 = now - span
    client.request(
        "POST",
        "/jp/v1/jobs",
        json={
            "project": PROJECT,
            "job": JOB,
            "name": f"UI benchmark: {points:,} points per metric, {WORKERS * GPUS} GPUs",
            "status": "running",
            "instance_type": {"name": "8x H100 80GB", "gpu_count": GPUS, "gpu_type": "H100"},
        },
    )
    sizes = {"scalars": 0, "system": 0, "logs": 0}
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
                "job": JOB,
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
            sizes["scalars"] += client.ingest(body)["accepted"]
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
        sizes["system"] += client.ingest({"project": PROJECT, "job": JOB, "series": series})["accepted"]
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
        sizes["logs"] += client.ingest(body)["accepted"]
    return sizes


_SIZES_JS = """() => {
  const entries = [performance.getEntriesByType('navigation')[0], ...performance.getEntriesByType('resource')];
  return { transfer: entries.reduce((s, e) => s + (e.transferSize || 0), 0),
           decoded: entries.reduce((s, e) => s + (e.decodedBodySize || 0), 0),
           requests: entries.length,
           api: entries.filter(e => e.name.includes('/jp/v1/')).reduce((s, e) => s + (e.transferSize || 0), 0) };
}"""


_MARKS_JS = """() => {
  const at = (name) => (performance.getEntriesByName(name)[0] || {}).startTime ?? null;
  return { plotly: at('jp-plotly-ready'), data: at('jp-first-data') };
}"""


_INTERACTIVE = ("() => window.__jpChartInteractive !== undefined", "() => window.__jpChartInteractive")


def wait_drawn(page: Any, url: str, ready_js: str) -> None:
    try:
        page.wait_for_function(ready_js, timeout=60_000)
    except Exception as exc:
        shot = Path(os.environ.get("TMPDIR", "/tmp")) / "bench_ui_failure.png"
        page.screenshot(path=str(shot))
        raise RuntimeError(f"{url} did not draw within 60 s; screenshot at {shot}") from exc


def measure(page: Any, url: str, ready_js: str, mark_js: str, interactive: bool) -> dict[str, float]:
    """Open ``url`` and time it: ``ms`` when ``ready_js`` holds, ``interactive`` for the job page's first
    Plotly chart, the page's marks, and the bytes it transferred."""
    page.goto(url, wait_until="commit")
    wait_drawn(page, url, ready_js)
    at = page.evaluate(mark_js)
    out = {"ms": at}
    if interactive:
        wait_drawn(page, url, _INTERACTIVE[0])
        out["interactive"] = page.evaluate(_INTERACTIVE[1])
    marks = page.evaluate(_MARKS_JS)
    page.wait_for_load_state("networkidle")
    return {**out, **marks, **page.evaluate(_SIZES_JS)}


def browse(server: ServerProcess, runs: int) -> dict[str, list[dict[str, float]]]:
    from playwright.sync_api import sync_playwright

    client = Client(Credentials(server.url, server.api_key))
    first_chart = ("() => window.__jpFirstChart !== undefined", "() => window.__jpFirstChart", True)
    heat = ("() => !!document.querySelector('.heatmap[data-rows]')", "() => performance.now()", False)
    logs = ("() => document.querySelectorAll('.logrow').length > 10", "() => performance.now()", False)
    pages = {
        "job page, first chart": (f"{server.url}/jobs/{JOB}", *first_chart),
        "system tab, heat map": (f"{server.url}/jobs/{JOB}#system", *heat),
        "logs page, first lines": (f"{server.url}/jobs/{JOB}/logs", *logs),
    }
    out: dict[str, list[dict[str, float]]] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for name, (url, ready, mark, interactive) in pages.items():
            for run in range(runs):
                context = browser.new_context(viewport={"width": 1440, "height": 900})
                page = context.new_page()
                page.goto(client.request("POST", "/jp/v1/login-links")["url"])  # one-time links
                page.goto("about:blank")
                cold = measure(page, url, ready, mark, interactive)
                page.goto("about:blank")
                warm = measure(page, url, ready, mark, interactive)
                out.setdefault(f"{name} (cold)", []).append(cold)
                out.setdefault(f"{name} (warm)", []).append(warm)
                context.close()
                then = (
                    f" (interactive chart: cold {cold['interactive']:.0f} ms, warm {warm['interactive']:.0f} ms)"
                    if interactive
                    else ""
                )
                print(f"  run {run + 1}: {name}: cold {cold['ms']:.0f} ms, warm {warm['ms']:.0f} ms{then}", flush=True)
        browser.close()
    return out


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
            f"job {JOB}: {sizes['scalars']:,} scalar points (4 metrics x {args.points:,}), "
            f"{sizes['system']:,} system samples ({WORKERS} workers x {GPUS} GPUs, {args.hours} h at 10 s), "
            f"{sizes['logs']:,} log lines; loaded in {time.monotonic() - started:.1f} s"
        )
        results = browse(server, args.runs)
    for kind in ("cold", "warm"):  # the job page's interactive chart, from the same loads
        rows = results[f"job page, first chart ({kind})"]
        results[f"job page, interactive chart ({kind})"] = [{**r, "ms": r["interactive"]} for r in rows]
    order = ["job page, first chart", "job page, interactive chart", "system tab, heat map", "logs page, first lines"]
    results = {f"{name} ({kind})": results[f"{name} ({kind})"] for name in order for kind in ("cold", "warm")}
    print(
        f"\n{'page':<34} {'median ms':>10} {'range ms':>15} {'transfer':>11} {'of it API':>10} "
        f"{'decoded':>11} {'requests':>9}"
    )
    for name, rows in results.items():
        ms = [r["ms"] for r in rows]
        row = rows[len(rows) // 2]
        print(
            f"{name:<34} {statistics.median(ms):>10.0f} {min(ms):>7.0f}-{max(ms):<7.0f} "
            f"{row['transfer'] / 1024:>8.0f} KB {row['api'] / 1024:>7.0f} KB {row['decoded'] / 1024:>8.0f} KB "
            f"{row['requests']:>9.0f}"
        )
    print()
    for kind in ("cold", "warm"):
        rows = results[f"job page, first chart ({kind})"]
        parts = {
            key: statistics.median(r[key] for r in rows if r.get(key) is not None)
            for key in ("data", "ms", "plotly", "interactive")
        }
        print(
            f"job page {kind}: first chart data at {parts['data']:.0f} ms, first chart drawn at {parts['ms']:.0f} ms, "
            f"Plotly.js ready at {parts['plotly']:.0f} ms, interactive chart at {parts['interactive']:.0f} ms (medians)"
        )
    median = {
        key: statistics.median(r["ms"] for r in results[f"job page, {key}"])
        for key in ("first chart (cold)", "first chart (warm)", "interactive chart (cold)", "interactive chart (warm)")
    }
    print(
        f"time to first chart: {median['first chart (cold)']:.0f} ms cold, {median['first chart (warm)']:.0f} ms warm "
        f"(target under 1000 ms); time to interactive chart: {median['interactive chart (cold)']:.0f} ms cold, "
        f"{median['interactive chart (warm)']:.0f} ms warm; "
        f"load average now {', '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
