"""VictoriaMetrics (Debian's ``victoria-metrics`` package), the specialised time-series store, for system
metrics: its JSON-lines import API (``/api/v1/import``, one line per series with arrays of values and
timestamps) and its Prometheus query API (``/api/v1/query_range`` with ``avg_over_time(...[1m])`` at a
60 s step, the rollup cache off so every repeat computes).

Standard library only: it runs under any Python.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    LOOPBACK,
    SYSTEM_METRICS,
    Http,
    PeakMem,
    Result,
    dir_bytes,
    free_port,
    log,
    read_config,
    server,
    settle_mem,
    system_value,
)

BINARY = shutil.which("victoria-metrics") or "/usr/bin/victoria-metrics"


def version() -> str:
    """The Debian package's version (this build's ``-version`` flag prints an empty string)."""
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", "victoria-metrics"], capture_output=True, text=True, timeout=20
        )
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip() + " (Debian package)"
        out = subprocess.run([BINARY, "-version"], capture_output=True, text=True, timeout=20)
        return (out.stdout or out.stderr).strip() or "unknown"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"not available ({exc})"


def import_body(job: str, worker: int, per_worker: int, metrics: int, seconds: int, t0_ms: int) -> bytes:
    timestamps = [t0_ms + s * 1000 for s in range(seconds)]
    lines = []
    for g in range(worker * per_worker, (worker + 1) * per_worker):
        for m in range(metrics):
            lines.append(
                json.dumps(
                    {
                        "metric": {
                            "__name__": SYSTEM_METRICS[m],
                            "job": job,
                            "worker": f"worker-{worker}",
                            "gpu": str(g % per_worker),
                        },
                        "values": [system_value(m, g, s) for s in range(seconds)],
                        "timestamps": timestamps,
                    }
                )
            )
    return ("\n".join(lines) + "\n").encode()


def main() -> None:
    cfg = read_config()
    res = Result("victoriametrics")
    res.data["versions"] = {"victoria-metrics": version()}
    work = Path(cfg["work_dir"]) / "victoria"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if not Path(BINARY).exists():
        res.error("server", f"{BINARY} not found: install Debian's victoria-metrics (bench/setup_peers.sh)")
        res.emit()
        return
    port = free_port()
    url = f"http://{LOOPBACK}:{port}"
    data = work / "data"
    argv = [
        BINARY,
        f"-storageDataPath={data}",
        f"-httpListenAddr={LOOPBACK}:{port}",
        "-retentionPeriod=100y",
        "-search.latencyOffset=0s",
        "-loggerLevel=WARN",
    ]
    try:
        with server(argv, work / "server.log", url + "/health", timeout=60) as proc:
            res.add("w7.mem_rest", settle_mem(proc.pid), "bytes")
            run_w4(cfg, res, url, proc.pid, data)
    except Exception as exc:  # noqa: BLE001
        res.error("server", exc)
    res.add("w7.install_server", Path(BINARY).stat().st_size if Path(BINARY).exists() else 0, "bytes")
    res.emit()


def run_w4(cfg: dict, res: Result, url: str, pid: int, data: Path) -> None:
    c = cfg["w4"]
    gpus, per_worker, metrics, seconds = c["gpus"], c["gpus_per_worker"], c["metrics"], c["seconds"]
    t0 = cfg["sys_t0_ms"]
    samples = gpus * metrics * seconds
    http = Http(url)
    before = dir_bytes(data)
    with PeakMem(pid) as peak:
        for r in range(cfg["repeats"]):
            with res.guard("w4.ingest"):
                job = f"w4-sys-{r}"
                start = time.perf_counter()
                for w in range(gpus // per_worker):
                    http.post(
                        "/api/v1/import", import_body(job, w, per_worker, metrics, seconds, t0), "application/json"
                    )
                http.request("GET", "/internal/force_flush")
                res.add("w4.ingest", samples / (time.perf_counter() - start), "samples/s", samples=samples)
                log(f"victoriametrics w4 #{r}: {samples / (time.perf_counter() - start):,.0f} samples/s")
    res.add("w7.mem_peak_w4", peak.peak, "bytes")
    time.sleep(1)
    stored = samples * len(res.data["figures"].get("w4.ingest", {}).get("values", []))
    if stored:
        res.add("w7.disk_per_million_system", (dir_bytes(data) - before) / stored * 1e6, "bytes", samples=stored)
    for r in range(cfg["repeats"]):
        # each repeat's own job; computed with the rollup result cache off, then asked again with it on
        # (the first of these fills the cache, the second is timed): jobpulse's first and repeated answers
        with res.guard("w4.query"):
            selector = f'avg_over_time(gpu_util{{job="w4-sys-{r}"}}[1m])'
            computed = "/api/v1/query_range?" + urllib.parse.urlencode(
                {
                    "query": selector,
                    "start": f"{(t0 + 59_999) / 1000:.3f}",
                    "end": f"{(t0 + seconds * 1000 - 1) / 1000:.3f}",
                    "step": "60s",
                    "nocache": "1",
                }
            )
            # the cache keeps answers whose start and end are multiples of the step (it aligns others to
            # them), so this one asks for windows (t0, t0+1m], ... (t0+59m, t0+60m]: seconds 1-60 first
            cached = "/api/v1/query_range?" + urllib.parse.urlencode(
                {
                    "query": selector,
                    "start": f"{(t0 + 60_000) // 1000}",
                    "end": f"{(t0 + seconds * 1000) // 1000}",
                    "step": "60s",
                }
            )
            deadline = time.monotonic() + 30
            while True:  # the import is searchable after a short delay; wait for all series, bounded
                answer = http.get_json(computed)
                if len(answer["data"]["result"]) == gpus or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            http.get_json(cached)
            for figure, path, first_second in (("w4.query_first", computed, 0), ("w4.query", cached, 1)):
                start = time.perf_counter()
                answer = http.get_json(path)
                res.add(figure, time.perf_counter() - start, "s", series=len(answer["data"]["result"]))
                check_series(answer["data"]["result"], gpus, per_worker, seconds, first_second)
    res.note(
        "w4.query",
        "a window (t-1m, t] is labelled by its end, so the query starts at t0+59.999 s: "
        "each point then averages the same whole minute as jobpulse's",
    )


def check_series(series: list, gpus: int, per_worker: int, seconds: int, first_second: int) -> None:
    if len(series) != gpus:
        raise RuntimeError(f"{len(series)} GPU series, expected {gpus}")
    points = series[0]["values"]
    if len(points) != seconds // 60:
        raise RuntimeError(f"{len(points)} one-minute points, expected {seconds // 60}")
    labels = series[0]["metric"]
    gpu = int(labels["worker"].split("-")[1]) * per_worker + int(labels["gpu"])
    want = sum(system_value(0, gpu, s) for s in range(first_second, first_second + 60)) / 60
    if abs(float(points[0][1]) - want) > 1e-6:
        raise RuntimeError(f"first minute is {points[0][1]}, expected {want}")


if __name__ == "__main__":
    main()
