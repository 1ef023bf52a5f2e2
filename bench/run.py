"""The comparative benchmark: one command installs the peers in their own environment, runs every workload
on jobpulse and on each peer, and writes bench/RESULTS.md.

    python bench/run.py                  # full: the issue's sizes, 3 repeats (under 30 minutes on 2 cores)
    python bench/run.py --quick          # smaller sizes, 1 repeat (under 5 minutes)
    python bench/run.py --jobpulse-only  # no peers, nothing installed

Every system runs alone, one after the other, as a subprocess worker (peers under bench/.peers/venv, so their
dependencies never meet jobpulse's); every server listens on 127.0.0.1 only and is stopped at the end of its
worker, also on failure. Scratch data goes to bench/.work/.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
PEERS_PY = HERE / ".peers" / "venv" / "bin" / "python"

from report import machine, render  # noqa: E402 - beside this file

# system -> (worker script, workloads it takes part in)
SYSTEMS: dict[str, tuple[Path, list[str]]] = {
    "jobpulse": (HERE / "jobpulse_side.py", ["w1", "w2", "w3", "w4", "w5", "w6", "w7"]),
    "victoriametrics": (HERE / "peers" / "victoria_peer.py", ["w4", "w7"]),
    "mlflow": (HERE / "peers" / "mlflow_peer.py", ["w1", "w2", "w3", "w6", "w7"]),
    "aim": (HERE / "peers" / "aim_peer.py", ["w1", "w2", "w3", "w6", "w7"]),
    "tensorboard": (HERE / "peers" / "tensorboard_peer.py", ["w1", "w2", "w3", "w6", "w7"]),
    "clearml": (HERE / "peers" / "clearml_peer.py", ["w6", "w7"]),
    "wandb": (HERE / "peers" / "wandb_peer.py", ["w6", "w7"]),
}

SIZES: dict[str, dict[str, Any]] = {
    "full": {
        "repeats": 3,
        "w1": {"metrics": 10, "steps": 100_000, "batch_steps": 10_000, "peer_time_s": 30},
        "w2": {"chart_buckets": 1000, "big_points": 10_000_000, "big_batch": 500_000},
        "w3": {"runs": 200, "metrics": 5, "steps": 1000, "points_per_request": 100_000, "peer_time_s": 40},
        "w4": {"gpus": 64, "gpus_per_worker": 8, "metrics": 10, "seconds": 3600},
        "w5": {"lines": 1_000_000, "workers": 8, "batch": 80_000, "tail": 1000},
        "w6": {"calls": 200_000, "time_s": 5, "mlflow_calls": 1000},
        "settle_s": 45,
        "worker_timeout_s": 900,
    },
    "quick": {
        "repeats": 1,
        "w1": {"metrics": 10, "steps": 10_000, "batch_steps": 5_000, "peer_time_s": 5},
        "w2": {"chart_buckets": 1000, "big_points": 1_000_000, "big_batch": 500_000},
        "w3": {"runs": 200, "metrics": 5, "steps": 100, "points_per_request": 100_000, "peer_time_s": 5},
        "w4": {"gpus": 64, "gpus_per_worker": 8, "metrics": 10, "seconds": 600},
        "w5": {"lines": 200_000, "workers": 8, "batch": 80_000, "tail": 1000},
        "w6": {"calls": 50_000, "time_s": 1.5, "mlflow_calls": 300},
        "settle_s": 5,
        "worker_timeout_s": 180,
    },
    "tiny": {
        "repeats": 1,
        "w1": {"metrics": 10, "steps": 2000, "batch_steps": 1000, "peer_time_s": 2},
        "w2": {"chart_buckets": 1000, "big_points": 20_000, "big_batch": 10_000},
        "w3": {"runs": 20, "metrics": 5, "steps": 50, "points_per_request": 5_000, "peer_time_s": 2},
        "w4": {"gpus": 16, "gpus_per_worker": 8, "metrics": 10, "seconds": 600},
        "w5": {"lines": 16_000, "workers": 8, "batch": 8_000, "tail": 1000},
        "w6": {"calls": 2000, "time_s": 0.5, "mlflow_calls": 100},
        "worker_timeout_s": 120,
    },
}


def config_for(mode: str, work: Path) -> dict[str, Any]:
    """The workload sizes of ``mode`` plus what every worker needs (work folder, system-metric start)."""
    cfg = json.loads(json.dumps(SIZES[mode]))
    cfg["mode"] = mode
    cfg["work_dir"] = str(work)
    # system metrics end two hours ago, on a whole hour: recent enough for any retention, whole minutes
    cfg["sys_t0_ms"] = (int(time.time() * 1000) // 3_600_000 - 3) * 3_600_000
    cfg["budget_s"] = cfg["worker_timeout_s"] - 30
    return cfg


def _forward(stream, log_file, echo: bool) -> None:
    for raw in iter(stream.readline, b""):
        log_file.write(raw)
        log_file.flush()
        if echo:
            sys.stderr.write(raw.decode(errors="replace"))
            sys.stderr.flush()


def run_worker(system: str, python: str, cfg: dict[str, Any], logs: Path, echo: bool) -> dict[str, Any]:
    """Run one system's worker to the end or to its time limit; answers its result (or the failure)."""
    script, workloads = SYSTEMS[system]
    logs.mkdir(parents=True, exist_ok=True)
    partial = logs / f"{system}.partial.json"
    partial.unlink(missing_ok=True)
    Path(str(partial) + ".servers").unlink(missing_ok=True)
    cfg = {**cfg, "workloads": workloads, "result_path": str(partial)}
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(logs / f"{system}.log", "wb") as log_file:
        proc = subprocess.Popen(
            [python, str(script), json.dumps(cfg)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        chunks: list[bytes] = []
        readers = [
            threading.Thread(target=_forward, args=(proc.stderr, log_file, echo), daemon=True),
            threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True),
        ]
        for reader in readers:
            reader.start()
        try:
            proc.wait(timeout=cfg["worker_timeout_s"])
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
        _kill_group(proc)  # anything the worker left behind in its process group
        _stop_servers(Path(str(partial) + ".servers"))  # and the servers it started in their own groups
        for reader in readers:
            reader.join(10)
        out = b"".join(chunks)
    seconds = time.monotonic() - started
    text = out.decode(errors="replace").strip()
    result: dict[str, Any]
    try:
        result = json.loads(text.splitlines()[-1]) if text else {}
    except (json.JSONDecodeError, IndexError):
        result = {}
    if not result:
        tail = (logs / f"{system}.log").read_text(errors="replace")[-1500:]
        why = "did not finish within its time limit" if timed_out else f"exited with {proc.returncode}"
        result = {"system": system, "versions": {}, "figures": {}, "notes": {}, "errors": {}}
        if partial.exists():  # what the worker had measured before it was stopped
            result = json.loads(partial.read_text())
        result["errors"]["worker"] = f"{why}; last output:\n{tail}"
    result["seconds"] = seconds
    # the 1-minute load average before and after: other work on the machine shows up here
    result["load"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return result


def _stop_servers(registry: Path) -> None:
    """Stop the process groups of the servers a worker recorded (they run in sessions of their own)."""
    if not registry.exists():
        return
    groups = [int(line) for line in registry.read_text().split() if line.strip().isdigit()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
        if sig == signal.SIGTERM:
            time.sleep(2)


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(10)
            return
        except subprocess.TimeoutExpired:
            continue


def setup_peers(logs: Path) -> str | None:
    """Run setup_peers.sh; answers None when the peers are ready, else why not."""
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / "setup_peers.log", "wb") as out:
        try:
            done = subprocess.run(
                ["bash", str(HERE / "setup_peers.sh")], stdout=out, stderr=subprocess.STDOUT, timeout=1800
            )
        except subprocess.TimeoutExpired:
            return "setup_peers.sh did not finish within 30 minutes"
    if done.returncode != 0 or not PEERS_PY.exists():
        tail = (logs / "setup_peers.log").read_text(errors="replace")[-1500:]
        return f"setup_peers.sh exited with {done.returncode}:\n{tail}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes and one repeat (under 5 minutes)")
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # the test suite's size
    parser.add_argument("--jobpulse-only", action="store_true", help="measure jobpulse alone; install nothing")
    parser.add_argument("--systems", help="comma-separated systems to run (default: all)")
    parser.add_argument("--no-setup", action="store_true", help="do not run setup_peers.sh")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--work", type=Path, default=HERE / ".work")
    parser.add_argument("--quiet", action="store_true", help="do not echo the workers' progress")
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="measure nothing: write the results page again from the last run's results.json (after editing "
        "PROFILES.md, say)",
    )
    args = parser.parse_args(argv)
    if args.render_only:
        saved = args.work / "results.json"
        report = json.loads(saved.read_text())
        # the page says when the measuring run ended, not when it was written again
        report.setdefault("when", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(saved.stat().st_mtime)))
        args.out.write_text(render(report))
        return 0

    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    systems = ["jobpulse"] if args.jobpulse_only else list(SYSTEMS)
    if args.systems:
        systems = [s.strip() for s in args.systems.split(",") if s.strip()]
        unknown = [s for s in systems if s not in SYSTEMS]
        if unknown:
            parser.error(f"unknown systems {unknown}; choose from {', '.join(SYSTEMS)}")
    args.work.mkdir(parents=True, exist_ok=True)
    logs = args.work / "logs"
    started = time.monotonic()
    setup_error = None
    if any(s != "jobpulse" for s in systems) and not args.no_setup:
        print("installing the peers (bench/setup_peers.sh) ...", file=sys.stderr, flush=True)
        setup_error = setup_peers(logs)
    cfg = config_for(mode, args.work)
    results: dict[str, Any] = {}
    for system in systems:
        python = sys.executable if system == "jobpulse" else str(PEERS_PY)
        if system != "jobpulse" and (setup_error or not PEERS_PY.exists()):
            results[system] = {
                "system": system,
                "versions": {},
                "figures": {},
                "notes": {},
                "errors": {"setup": setup_error or f"{PEERS_PY} is missing: run setup_peers.sh"},
            }
            continue
        print(f"== {system}", file=sys.stderr, flush=True)
        results[system] = run_worker(system, python, cfg, logs, echo=not args.quiet)
        print(f"== {system} took {results[system]['seconds']:.0f} s", file=sys.stderr, flush=True)
    total = time.monotonic() - started
    report = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "mode": mode,
        "config": cfg,
        "machine": machine(),
        "seconds": total,
        "results": results,
        "command": "python bench/run.py"
        + (" --quick" if mode == "quick" else "")
        + (" --jobpulse-only" if args.jobpulse_only else ""),
    }
    (args.work / "results.json").write_text(json.dumps(report, indent=1))
    args.out.write_text(render(report))
    print(f"wrote {args.out} ({total:.0f} s)", file=sys.stderr)
    failed = [s for s, r in results.items() if s == "jobpulse" and r.get("errors")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
