"""Parse time of JSON-lines ingest bodies: this checkout's parser, and another checkout's in the same run.

    .venv/bin/python bench/bench_ingest_parse.py [--baseline DIR] [--rounds N] [--repeats N]

``--baseline`` names another checkout of jobpulse (``git worktree add /tmp/before <commit>``); its ``src`` is
timed on the same bodies, on the same machine, in the same run, for comparison. Each implementation runs in
processes of its own (they share the package's name): ``--rounds`` rounds, the two implementations one after the
other in each, so that a change of the machine's load falls on both; each process parses each body ``--repeats``
times, after one parse untimed (the first of a process pays for what is imported or cached on first use).
Figures are the median of all parses, and the fastest (the least disturbed by other work on the machine).
Only parsing is timed (``parse_body``: bounds, reading, rules, Arrow frames), not HTTP or storage. Both must
accept the same number of events of every body, or the run fails.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOW_MS = 1_800_000_000_000
TS = NOW_MS - 3_600_000
DEFAULTS = {"project": "bench", "job": "run-1", "worker": None, "kind": None}


def scalar(i: int) -> dict:
    return {"kind": "scalar", "metric": f"metric_{i % 10}", "variant": "train", "iter": i // 10, "value": i * 0.37,
            "ts": TS + i}  # fmt: skip


def mixed(i: int) -> dict:
    if i % 4 == 2:
        return {"kind": "system", "worker": "worker-0", "metric": "gpu_util", "device": str(i % 8), "value": 97.5,
                "ts": TS + i}  # fmt: skip
    if i % 4 == 3:
        return {"kind": "log", "worker": "worker-0", "seq": i, "level": "info", "ts": TS + i,
                "msg": f"step {i}: loss 0.1234, lr 0.001, \"grad_norm\": 1.5"}  # fmt: skip
    return scalar(i)


def media(i: int) -> dict:
    if i % 3 == 1:
        return {"kind": "vector", "metric": "hist", "iter": i, "values": [i * 0.5, 1, 2, 3, "NaN"], "ts": TS + i}
    if i % 3 == 2:
        return {"kind": "plot", "metric": "roc", "iter": i, "plot": {"data": [{"x": [0, 1], "y": [0, i]}]}}
    return scalar(i)


def bodies() -> dict[str, bytes]:
    import orjson

    def lines(events: list[dict]) -> bytes:
        return b"\n".join(orjson.dumps(e) for e in events)

    bad = [scalar(i) for i in range(100_000)]
    bad[50_000]["value"] = "high"
    return {
        "100,000 scalar lines": lines([scalar(i) for i in range(100_000)]),
        "100,000 mixed scalar/system/log lines": lines([mixed(i) for i in range(100_000)]),
        "100,000 scalar lines, one of them bad": lines(bad),
        "30,000 scalar/vector/plot lines": lines([media(i) for i in range(30_000)]),
        "200 mixed lines (a small batch)": lines([mixed(i) for i in range(200)]),
    }


def child(src: str, path: str, repeats: int) -> None:
    """Time this implementation on the bodies in ``path``; print one JSON object."""
    sys.path.insert(0, src)
    from jobpulse.ingest.parse import parse_body

    out = {}
    for name, body in pickle.loads(Path(path).read_bytes()).items():
        inner = max(1, 20_000 // body.count(b"\n"))  # small bodies: many parses per timing
        times = []
        # once untimed: the first parse of a process pays for imports done on first use, and a cold cache
        accepted = parse_body(body, "application/x-ndjson", DEFAULTS, max_events=1_000_000, now_ms=NOW_MS).accepted
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(inner):
                accepted = parse_body(
                    body, "application/x-ndjson", DEFAULTS, max_events=1_000_000, now_ms=NOW_MS
                ).accepted
            times.append((time.perf_counter() - start) / inner)
        out[name] = {"times": times, "accepted": accepted}
    print(json.dumps(out))


def run(src: Path, path: str, repeats: int) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(src), path, "--repeats", str(repeats)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, help="another checkout of jobpulse to time on the same bodies")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("SRC", "BODIES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.repeats)
        return
    sys.path.insert(0, str(ROOT / "bench"))
    from machine import describe

    sets = bodies()
    sources = {"this checkout": ROOT / "src"}
    if args.baseline:
        sources[f"baseline ({args.baseline})"] = args.baseline / "src"
    measured: dict[str, dict[str, dict]] = {name: {} for name in sources}
    with tempfile.NamedTemporaryFile(suffix=".pkl") as file:
        file.write(pickle.dumps(sets))
        file.flush()
        for _ in range(args.rounds):
            for impl, src in sources.items():
                for body, figures in run(src, file.name, args.repeats).items():
                    known = measured[impl].setdefault(body, {"times": [], "accepted": figures["accepted"]})
                    known["times"] += figures["times"]
    print(f"machine: {describe()}")
    print(f"parse_body of JSON-lines bodies, in-process (no HTTP): {args.rounds} rounds x {args.repeats} parses")
    print("median of all parses, and the fastest\n")
    for name, body in sets.items():
        lines = body.count(b"\n") + 1
        print(f"{name}: {len(body) / 2**20:.2f} MiB")
        accepted = {impl: figures[name]["accepted"] for impl, figures in measured.items()}
        if len(set(accepted.values())) != 1:
            raise SystemExit(f"  the implementations accept different counts: {accepted}")
        figures = {}
        for impl, by_body in measured.items():
            times = by_body[name]["times"]
            figures[impl] = (statistics.median(times), min(times))
            median, fastest = figures[impl]
            print(f"  {impl:<36} median {median * 1000:9.2f} ms {lines / median:>12,.0f} lines/s"
                  f" | fastest {fastest * 1000:9.2f} ms {lines / fastest:>12,.0f} lines/s")  # fmt: skip
        if len(figures) == 2:
            (new_median, new_fastest), (old_median, old_fastest) = figures.values()
            print(f"  {'this checkout / baseline (time)':<36} median {new_median / old_median:9.2f}x"
                  f"{'':27} | fastest {new_fastest / old_fastest:9.2f}x")  # fmt: skip
        print()


if __name__ == "__main__":
    main()
