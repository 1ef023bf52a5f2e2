"""Profile the jobpulse server while it runs one workload: py-spy samples the server process.

    python bench/profile_jobpulse.py w1.jsonl [--quick] [--client] [--out bench/.work/profiles]

Prints the functions with the largest inclusive and own share of the samples, and leaves the collapsed
stacks (``NAME.txt``, for flame-graph tools) and the summary (``NAME.summary.txt``) in the output folder.
Query workloads (``w2.read_full``, ``w2.chart_big``, ``w4.query``) load their data first, unprofiled, then
repeat the query for ``--seconds``. ``--client`` samples this process instead (the SDK's own cost).
py-spy comes from the peers' virtual environment (bench/setup_peers.sh), so jobpulse's stays as it is.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "peers"))

import jobpulse_client as client  # noqa: E402
import jobpulse_side as side  # noqa: E402
from common import log  # noqa: E402
from run import config_for  # noqa: E402

Step = Callable[[client.Jobpulse, dict[str, Any], Path], Any]


def _w1(path: str) -> Step:
    def run(jp: client.Jobpulse, cfg: dict[str, Any], spool: Path) -> Any:
        c = cfg["w1"]
        if path == "sdk":
            return client.ingest_sdk(jp, "p-sdk", c["metrics"], c["steps"], spool)
        if path == "jsonl":
            return client.ingest_jsonl(jp, "p-jsonl", c["metrics"], c["steps"], c["batch_steps"], prepared=True)
        return client.ingest_columnar(jp, f"p-{path}", c["metrics"], c["steps"], c["batch_steps"])

    return run


def _load_w1(jp: client.Jobpulse, cfg: dict[str, Any], _spool: Path) -> None:
    client.ingest_columnar(jp, "p-read", 1, cfg["w1"]["steps"], cfg["w1"]["batch_steps"])


def _load_big(jp: client.Jobpulse, cfg: dict[str, Any], _spool: Path) -> None:
    for body, _n in client.columnar_bodies("p-big", 1, cfg["w2"]["big_points"], cfg["w2"]["big_batch"]):
        jp.ingest(body)


def _load_w4(jp: client.Jobpulse, cfg: dict[str, Any], _spool: Path) -> None:
    side.w4(jp, {**cfg, "repeats": 1}, side.Result("jobpulse"))


_asked = itertools.count()


def _w4_query(jp: client.Jobpulse, cfg: dict[str, Any], _spool: Path) -> Any:
    t0, seconds = cfg["sys_t0_ms"], cfg["w4"]["seconds"]
    end = t0 + seconds * 1000 - 1 - next(_asked) % 1000  # a window not asked before: computed, not remembered
    return jp.http.get_json(
        "/jp/v1/jobs/w4-sys-0/system/series",
        {"metric": "gpu_util", "start": t0, "end": end, "step": "1m", "fields": "avg"},
    )


# name -> (prepare, profiled step, repeat the step until --seconds have passed)
WORKLOADS: dict[str, tuple[Step | None, Step, bool]] = {
    "w1.columnar": (None, _w1("columnar"), False),
    "w1.jsonl": (None, _w1("jsonl"), False),
    "w1.sdk": (None, _w1("sdk"), False),
    "w2.read_full": (_load_w1, lambda jp, cfg, _s: client.read_full(jp, "p-read", "m0"), True),
    "w2.chart_big": (_load_big, lambda jp, cfg, _s: client.chart(jp, "p-big", "m0", 1000 + next(_asked) % 999), True),
    "w3": (None, lambda jp, cfg, _s: side.w3(jp, {**cfg, "repeats": 1}, side.Result("jobpulse")), False),
    "w4": (None, lambda jp, cfg, _s: side.w4(jp, {**cfg, "repeats": 1}, side.Result("jobpulse")), False),
    "w4.query": (_load_w4, _w4_query, True),
    "w5": (None, lambda jp, cfg, _s: side.w5(jp, {**cfg, "repeats": 1}, side.Result("jobpulse")), False),
}


def summarize(collapsed: Path, top: int = 25) -> str:
    """Inclusive and own sample shares per function from py-spy's collapsed stacks."""
    inclusive: collections.Counter = collections.Counter()
    own: collections.Counter = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        for frame in set(frames):
            inclusive[frame] += n
        own[frames[-1]] += n
    if not total:
        return "no samples"
    out = [f"{total} samples", "", "inclusive:"]
    out += [f"  {n / total:6.1%}  {frame}" for frame, n in inclusive.most_common(top)]
    out += ["", "own:"]
    out += [f"  {n / total:6.1%}  {frame}" for frame, n in own.most_common(top)]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("--quick", action="store_true", help="the quick mode's sizes")
    parser.add_argument("--out", type=Path, default=HERE / ".work" / "profiles")
    parser.add_argument("--rate", type=int, default=250, help="samples per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long a query workload repeats")
    parser.add_argument("--client", action="store_true", help="sample this process instead of the server")
    args = parser.parse_args()
    py_spy = HERE / ".peers" / "venv" / "bin" / "py-spy"
    if not py_spy.exists():
        py_spy = Path(shutil.which("py-spy") or "py-spy")
    from jobpulse.testing import running_server

    cfg = config_for("quick" if args.quick else "full", HERE / ".work")
    args.out.mkdir(parents=True, exist_ok=True)
    name = args.workload.replace(".", "-") + ("-client" if args.client else "")
    collapsed = args.out / f"{name}.txt"
    work = HERE / ".work" / "profile-server"
    shutil.rmtree(work, ignore_errors=True)
    prepare, step, repeat = WORKLOADS[args.workload]
    with running_server(work) as srv:
        jp = client.Jobpulse(srv.url, srv.api_key)
        if prepare is not None:
            prepare(jp, cfg, work / "spool")
        pid = os.getpid() if args.client else srv.process.pid
        spy = subprocess.Popen(
            [
                str(py_spy),
                "record",
                "--pid",
                str(pid),
                "--rate",
                str(args.rate),
                "--format",
                "raw",
                "--output",
                str(collapsed),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(1.0)
        try:
            start, calls = time.perf_counter(), 0
            while True:
                step(jp, cfg, work / "spool")
                calls += 1
                if not repeat or time.perf_counter() - start > args.seconds or calls >= 10_000:
                    break
            elapsed = time.perf_counter() - start
            log(
                f"{args.workload}: {calls} run(s) in {elapsed:.2f} s under the profiler "
                f"({elapsed / calls * 1000:.1f} ms each)"
            )
        finally:
            spy.send_signal(signal.SIGINT)
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                spy.kill()
    if not collapsed.exists():
        print(f"py-spy wrote nothing: {spy.stderr.read().decode() if spy.stderr else ''}", file=sys.stderr)
        return 1
    text = summarize(collapsed)
    (args.out / f"{name}.summary.txt").write_text(text + "\n")
    print(text)
    print(f"collapsed stacks: {collapsed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
