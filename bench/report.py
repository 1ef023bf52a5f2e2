"""Turn the workers' results into bench/RESULTS.md: machine, versions, every figure as median (min-max) over
the repeats, the ratio of jobpulse to each peer, and the targets of the benchmark with whether they are met.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from figures import COLUMNS, ROWS, W6

HERE = Path(__file__).resolve().parent


def machine() -> dict[str, str]:
    info = {"cpu": platform.processor() or platform.machine()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info["cores"] = str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
    try:
        kib = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal:")
        )
        info["memory"] = f"{kib / 1024 / 1024:.1f} GiB"
    except (OSError, StopIteration):
        info["memory"] = "unknown"
    try:
        release = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
        info["os"] = release.get("PRETTY_NAME", "").strip('"')
    except OSError:
        info["os"] = platform.system()
    info["kernel"] = platform.release()
    info["python"] = platform.python_version()
    try:
        commit = subprocess.run(
            ["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(HERE), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        info["jobpulse commit"] = commit + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def fmt(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value * 1000:.3g} ms" if value < 1 else f"{value:.3g} s"
    if unit == "bytes":
        for scale, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if value >= scale:
                return f"{value / scale:.3g} {name}"
        return f"{value:.0f} B"
    if unit == "us/call":
        return f"{value:.3g} µs"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def summary(entry: dict[str, Any] | None, unit: str) -> str:
    if not entry or not entry.get("values"):
        return "—"
    vals = entry["values"]
    med = statistics.median(vals)
    if len(vals) == 1:
        return fmt(med, unit)
    return f"{fmt(med, unit)} ({fmt(min(vals), unit)}–{fmt(max(vals), unit)})"


def median(results: dict[str, Any], system: str, key: str) -> float | None:
    entry = results.get(system, {}).get("figures", {}).get(key)
    if not entry or not entry.get("values"):
        return None
    return statistics.median(entry["values"])


def ratio(jp: float | None, peer: float | None, higher: bool) -> float | None:
    if jp is None or peer is None or jp <= 0 or peer <= 0:
        return None
    return jp / peer if higher else peer / jp


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return ""
    return f" · **×{r:,.0f}**" if r >= 10 else f" · **×{r:.2g}**"


def table(results: dict[str, Any]) -> list[str]:
    cols = [c for c in COLUMNS if c[1] in results]
    out = ["| workload | unit | " + " | ".join(c[2] for c in cols) + " |", "|---|---|" + "---|" * len(cols)]
    for label, unit, higher, jp_key, peers in ROWS:
        jp_entry = results.get("jobpulse", {}).get("figures", {}).get(jp_key)
        jp = median(results, "jobpulse", jp_key)
        cells = []
        for col_id, system, _ in cols:
            if col_id == "jobpulse":
                cells.append(summary(jp_entry, unit))
                continue
            key = peers.get(col_id)
            if key is None:
                cells.append("")
                continue
            entry = results.get(system, {}).get("figures", {}).get(key)
            if entry is None and results.get(system, {}).get("errors"):
                cells.append("failed (see notes)")
                continue
            cells.append(summary(entry, unit) + fmt_ratio(ratio(jp, median(results, system, key), higher)))
        shown = {"points/s": "points/s", "samples/s": "samples/s", "lines/s": "lines/s"}.get(unit, "")
        out.append(
            f"| {label} | {shown or {'s': 'time', 'bytes': 'size', 'us/call': 'time'}[unit]} | "
            + " | ".join(cells)
            + " |"
        )
    return out


def _best(results: dict[str, Any], pairs: list[tuple[str, str]], higher: bool) -> tuple[float | None, str]:
    found = [(median(results, s, k), s + (" " + k.split(".")[-1] if k.count(".") > 1 else "")) for s, k in pairs]
    found = [(v, name) for v, name in found if v is not None]
    if not found:
        return None, "none measured"
    return (max if higher else min)(found)


def targets(results: dict[str, Any]) -> list[str]:
    rows = ["| target | jobpulse | best peer | achieved | required | met |", "|---|---|---|---|---|---|"]

    def add(
        name: str,
        jp_key: str,
        unit: str,
        pairs: list[tuple[str, str]],
        higher: bool,
        need: float,
        jp_system: str = "jobpulse",
    ) -> None:
        jp = median(results, jp_system, jp_key)
        best, who = _best(results, pairs, higher)
        r = ratio(jp, best, higher)
        met = "—" if r is None else ("yes" if r >= need else "**no**")
        shown_r = "—" if r is None else f"×{r:,.2f}" if r < 10 else f"×{r:,.0f}"
        rows.append(
            f"| {name} | {fmt(jp, unit) if jp is not None else '—'} | "
            f"{fmt(best, unit) + ' (' + who + ')' if best is not None else who} | {shown_r} | "
            f"×{need:g} | {met} |"
        )

    ingest_peers = [("mlflow", "w1.ingest"), ("aim", "w1.ingest.local"), ("aim", "w1.ingest.remote")]
    add(
        "scalar ingest, HTTP columnar: 100x the best of MLflow and Aim",
        "w1.ingest.columnar",
        "points/s",
        ingest_peers,
        True,
        100,
    )
    add(
        "scalar ingest, HTTP Arrow: 100x the best of MLflow and Aim",
        "w1.ingest.arrow",
        "points/s",
        ingest_peers,
        True,
        100,
    )
    add(
        "scalar ingest, HTTP JSON lines: 100x the best of MLflow and Aim",
        "w1.ingest.jsonl",
        "points/s",
        ingest_peers,
        True,
        100,
    )
    add(
        "scalar ingest, SDK end to end: 100x the best of MLflow and Aim",
        "w1.ingest.sdk",
        "points/s",
        ingest_peers,
        True,
        100,
    )
    add(
        "full-history read: 20x faster than the best peer",
        "w2.read_full",
        "s",
        [("mlflow", "w2.read_full"), ("aim", "w2.read_full"), ("tensorboard", "w2.read_full")],
        False,
        20,
    )
    add(
        "1,000-point chart of the big series no slower than the fastest peer's chart of its series "
        "(first request, computed)",
        "w2.chart_big_first",
        "s",
        [("mlflow", "w2.chart"), ("aim", "w2.chart"), ("tensorboard", "w2.chart")],
        False,
        1,
    )
    add(
        "the same, asked again (answered from jobpulse's memory of recent answers)",
        "w2.chart_big",
        "s",
        [("mlflow", "w2.chart"), ("aim", "w2.chart"), ("tensorboard", "w2.chart")],
        False,
        1,
    )
    add(
        "SDK log(): 20x cheaper than the cheapest peer",
        "w6.log_call",
        "us/call",
        [(c.split("_")[0], k) for c, k in W6.items()],
        False,
        20,
    )
    add(
        "disk per million points: at most a tenth of MLflow's",
        "w7.disk_per_million",
        "bytes",
        [("mlflow", "w7.disk_per_million")],
        False,
        10,
    )
    add(
        "system-metric ingest: at least half of VictoriaMetrics' rate",
        "w4.ingest",
        "samples/s",
        [("victoriametrics", "w4.ingest")],
        True,
        0.5,
    )
    add(
        "1-minute series query: no slower than VictoriaMetrics (first request, computed by both)",
        "w4.query_first",
        "s",
        [("victoriametrics", "w4.query_first")],
        False,
        1,
    )
    add(
        "the same, asked again (both answer from a memory of results)",
        "w4.query",
        "s",
        [("victoriametrics", "w4.query")],
        False,
        1,
    )
    return rows


def sizes(cfg: dict[str, Any]) -> list[str]:
    c1, c2, c3, c4, c5, c6 = (cfg[k] for k in ("w1", "w2", "w3", "w4", "w5", "w6"))
    return [
        f"- repeats: {cfg['repeats']} (figures are the median, with the range in brackets)",
        f"- 1: one run, {c1['metrics']} metrics x {c1['steps']:,} steps ({c1['metrics'] * c1['steps']:,} points). "
        f"jobpulse sends all of them (columnar JSON, Arrow IPC and JSON-lines requests of {c1['batch_steps']:,} "
        f"steps of every metric, one request at a time; the SDK: one `log()` of {c1['metrics']} values per step, "
        f"then `finish()`, timed until delivered). Each peer gets the same stream through its own fastest "
        f"official path, stopped after {c1['peer_time_s']} s per repeat: its rate is the points it stored in that time "
        f"(MLflow in metric-major `log_batch` requests of 1,000 points; Aim one `track()` of a dict of "
        f"{c1['metrics']} per step; TensorBoard one `add_scalar` per point). Peers' ingest is timed until the data "
        f"is durable and readable (MLflow: acknowledged; Aim: run closed and indexed, and through `aim server` "
        f"the client's queue drained every 100 steps; TensorBoard: writer closed).",
        f"- 2: metric m0 of that run ({c1['steps']:,} points; each repeat reads its own repeat's run of workload "
        f"1) read back in full (jobpulse: iterations and values as numpy arrays, what Aim's read answers, "
        f"from pages of `fields=iter,value` as Arrow IPC streams, `Accept: application/vnd.apache.arrow.stream`; "
        f"MLflow and TensorBoard answer timestamps too), and as a chart of {c2['chart_buckets']:,} buckets. Peers "
        f"read a {c1['steps']:,}-point series of their own (loaded once, its rate shown as 'loading'). jobpulse "
        f"also charts a series of {c2['big_points']:,} points (one loaded per repeat). Each jobpulse chart is "
        f"asked for twice: the first answer is computed (by one query of its buckets from the points for the "
        f"{c1['steps']:,}-point series; for the big one from the chart rollup's blocks: the coarse ones, of 512 "
        f"iterations and more, which a chart of over 2,000,000 points reads, from the embedded store's memory of "
        f"the jobs it wrote, without a query, finer ones by one query; the series' extent comes from the store's "
        f"catalogue of the series it wrote; each repeat charts a job of its own, so no chart of it is in the "
        f"server's memory), the "
        f"second comes from the server's memory of recent answers, which on the embedded store holds until the "
        f"server itself writes to the job (no query).",
        f"- 3: {c3['runs']} runs x {c3['metrics']} metrics x {c3['steps']:,} steps, then the latest value of every "
        f"metric of all runs. Peers: rounds of 100 (MLflow 40) steps over all runs until {c3['peer_time_s']} s "
        f"have passed (at least one round).",
        f"- 4: {c4['gpus']} GPUs ({c4['gpus'] // c4['gpus_per_worker']} workers x {c4['gpus_per_worker']}) x "
        f"{c4['metrics']} metrics, one sample a second for {c4['seconds']:,} s "
        f"({c4['gpus'] * c4['metrics'] * c4['seconds']:,} samples, one request per worker), then one metric as a "
        f"per-GPU series of 1-minute means over the whole span, asked twice per repeat, each repeat of its own "
        f"job: jobpulse's first answer is computed from the per-minute rollup that the server keeps in memory of "
        f"the jobs it wrote (no query; `recent_system_cells`), the second comes from its memory of answers "
        f"(both asked with `fields=avg`: the means alone, what VictoriaMetrics' `avg_over_time` answers); "
        f"VictoriaMetrics computes with `nocache=1`, then answers the same query from its rollup result cache "
        f"(asked once before timing, to fill it).",
        f"- 5: {c5['lines']:,} log lines from {c5['workers']} workers, then the last {c5['tail']:,} lines of one "
        "worker and a search for a word in 1 line out of 1,000 across all workers.",
        f"- 6: one call reporting 5 scalars, in a tight loop of up to {c6['calls']:,} calls or about "
        f"{c6['time_s']} s per repeat (MLflow and Aim through `aim server`: {c6['mlflow_calls']:,} calls), with "
        "each SDK's background sender "
        "running; the time to drain the queue afterwards is not in the figure.",
        f"- 7: disk per million points is the growth of each store's folder over workload 1, taken as its "
        f"smallest size in the {cfg.get('settle_s', 2)} s after the ingest (jobpulse's engine deletes the parts "
        f"its merges replaced every 30-40 s, Aim's RocksDB compacts; TensorBoard's files are measured once closed).",
    ]


def render(report: dict[str, Any]) -> str:
    results, cfg = report["results"], report["config"]
    when = report.get("when") or datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# jobpulse benchmark results",
        "",
        f"Written by `{report['command']}` on {when}; the whole command took "
        f"{report['seconds'] / 60:.1f} minutes (mode: {report['mode']}). Every figure below was measured by "
        "that run on this machine; nothing is estimated. Every server listened on 127.0.0.1 only.",
        "",
        "## Machine",
        "",
    ]
    lines += [f"- {k}: {v}" for k, v in report["machine"].items()]
    lines += [
        "",
        "The systems ran one after the other; the load average next to each version below shows how "
        "busy the machine was (2 cores: a load above 2 means other work competed with the benchmark).",
    ]
    lines += ["", "## Versions", ""]
    for system, result in results.items():
        versions = ", ".join(f"{k} {v}" for k, v in result.get("versions", {}).items()) or "not measured"
        took = f" — worker ran {result['seconds']:.0f} s" if "seconds" in result else ""
        if "load" in result:
            took += f", load average {result['load'][0]:.2f} before and {result['load'][1]:.2f} after"
        lines.append(f"- {system}: {versions}{took}")
    lines += ["", "## Workloads", ""] + sizes(cfg)
    lines += [
        "",
        "## Results",
        "",
        "Median (min–max) over the repeats. In a peer's cell, **×N** is jobpulse's advantage: the peer's "
        "time over jobpulse's, or jobpulse's rate over the peer's (below 1: jobpulse is behind). An empty "
        "cell: the system has no such path (see the notes).",
        "",
    ]
    lines += table(results)
    lines += ["", "## Targets", ""] + targets(results)
    lines += [
        "",
        "## Notes",
        "",
        "- Logs (workload 5): jobpulse alone. MLflow has no log store (only artifacts); Aim captures "
        "terminal output into a run but offers no tail or search query over it; TensorBoard has none; "
        "VictoriaMetrics stores metrics only (VictoriaLogs is a separate product, not packaged by Debian).",
        "- Downsampling: jobpulse's chart aggregates each bucket (mean, min, max, last, count) on the server. "
        "MLflow's sampled history and Aim's `sample()` pick stored points; TensorBoard keeps a reservoir "
        "sample while it loads the whole event file. None of the peers aggregates.",
        "- Memory is the proportional set size (PSS) of the server's process tree: MLflow's server runs "
        "4 worker processes by default; jobpulse's server is one process with the embedded ClickHouse "
        "engine (chdb). TensorBoard, ClearML and W&B are measured without a server.",
        "- Disk per million points: the growth of the data folder (jobpulse: the server's data directory, "
        "including its metadata and logs; MLflow: the SQLite file; Aim: the repository; TensorBoard: the "
        "event files) divided by the points stored by workload 1.",
    ]
    for system, result in results.items():
        for name, text in result.get("notes", {}).items():
            lines.append(f"- {system} {name}: {text}")
    errors = [(s, n, t) for s, r in results.items() for n, t in r.get("errors", {}).items()]
    if errors:
        lines += ["", "## What did not run", ""]
        for system, name, text in errors:
            first = text.strip().splitlines()
            lines.append(f"- {system} {name}: {' '.join(first[:1])}")
            if len(first) > 1:
                lines += ["", "  ```", *("  " + t for t in first[-8:]), "  ```", ""]
    extra = HERE / "PROFILES.md"
    if extra.exists():
        lines += ["", extra.read_text().strip()]
    return "\n".join(lines) + "\n"
