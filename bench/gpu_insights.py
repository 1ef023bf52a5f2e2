"""Record two real PyTorch jobs whose GPU waste the insight detectors must find (needs an NVIDIA GPU and torch).

Both jobs run under ``jobpulse run --interval 1s`` against a server that cannot be reached, so everything they
send lands in the spool (``jobpulse sync`` delivers it later, e.g. to a test's server):

- ``gpu-phases`` (one process): an **input-bound** phase (a DataLoader whose workers, one per core, spend
  about three GPU steps of CPU time on each batch, so the GPU waits ~3/4 of the time while every core is busy),
  a **healthy** phase (batches made on the GPU), then a **hang** (the process sleeps holding its GPU memory, no
  step, no line) until its own watchdog ends it with exit code 1.
- ``gpu-straggler`` (``torchrun --nproc_per_node 2``, both ranks on the one GPU, no collective between them):
  both train alike, then rank 1 sleeps three steps' time after each step (a **slowed rank**).

Each phase's start and end (wall clock, ms) is written to ``OUT/phases.json``; ``nvidia-smi`` samples the GPU
beside the runs into ``OUT/nvidia_smi.csv``; the spool is packed as ``OUT/spool_h100_insights.tgz``.

    python bench/gpu_insights.py drive --out OUT [--input 125 --train 30 --hang 125 --alike 20 --slowed 125]

``phases --job ID --hang 0`` under ``jobpulse run`` is the first job alone, without its hang (it then exits 0).
``--device cpu`` rehearses the same runs without a GPU (nothing GPU-shaped is then recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
UNREACHABLE = "http://127.0.0.1:18765"  # nothing listens here: the runs spool


def now_ms() -> int:
    return int(time.time() * 1000)


def note_phase(out: Path, job: str, phase: str, started: int) -> None:
    """Append one finished phase to OUT/phases.json (each process writes its own phases in turn)."""
    path = out / "phases.json"
    phases = json.loads(path.read_text()) if path.exists() else []
    phases.append({"job": job, "phase": phase, "started_ms": started, "ended_ms": now_ms()})
    path.write_text(json.dumps(phases, indent=1))


FEATURES = 256  # width of a batch as the loader makes it; the model embeds it to its own width


class Model:
    """A bf16 MLP of ``layers`` square layers over a fixed embedding of its input; one step is a forward and
    backward pass and an SGD update."""

    def __init__(self, torch, device: str, size: int, layers: int, batch: int) -> None:
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        self.torch, self.device, self.dtype, self.batch = torch, device, dtype, batch
        self.embed = torch.randn(FEATURES, size, device=device, dtype=dtype) * FEATURES**-0.5
        self.weights = [torch.randn(size, size, device=device, dtype=dtype, requires_grad=True) for _ in range(layers)]
        for w in self.weights:
            w.data.mul_(size**-0.5)

    def step(self, x) -> float:
        h = x @ self.embed
        for w in self.weights:
            h = self.torch.relu(h @ w)
        loss = h.float().pow(2).mean()
        loss.backward()
        with self.torch.no_grad():
            for w in self.weights:
                w -= 1e-3 * w.grad
                w.grad = None
        return loss.item()

    def batch_on_device(self):
        return self.torch.randn(self.batch, FEATURES, device=self.device, dtype=self.dtype)


class SlowBatches:
    """A dataset whose every item costs ``cpu_s`` seconds of one core (a decode and augment stand-in)."""

    def __init__(self, batch: int, cpu_s: float, count: int) -> None:
        self.batch, self.cpu_s, self.count = batch, cpu_s, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int):
        import numpy as np
        import torch

        rng = np.random.default_rng(index)
        spent = time.thread_time() + self.cpu_s
        block = rng.standard_normal((256, 256))
        while time.thread_time() < spent:  # element-wise work: one core, whatever BLAS would do
            block = np.tanh(block * 1.0001 + 0.1)
        return torch.from_numpy(rng.standard_normal((self.batch, FEATURES), dtype=np.float32))


def step_seconds(model: Model, steps: int = 20) -> float:
    x = model.batch_on_device()
    model.step(x)
    started = time.perf_counter()
    for _ in range(steps):
        model.step(x)
    return (time.perf_counter() - started) / steps


def run_phases(args: argparse.Namespace) -> int:
    import torch
    from torch.utils.data import DataLoader

    import jobpulse

    out, job = Path(args.out), args.job
    run = jobpulse.init(job=job)
    model = Model(torch, args.device, args.size, args.layers, args.batch)
    gpu_s = step_seconds(model)
    workers = os.cpu_count() or 1
    cpu_s = args.ratio * gpu_s * workers  # a batch every ratio x gpu_s from `workers` loaders
    print(f"one step takes {gpu_s * 1000:.1f} ms on {args.device}; {workers} loader workers, {cpu_s:.2f} s of CPU each")
    step = 0

    started = now_ms()
    print(f"phase input-bound: {args.input:.0f} s")
    loader = DataLoader(SlowBatches(args.batch, cpu_s, 1_000_000), batch_size=None, num_workers=workers)
    deadline = time.monotonic() + args.input
    for x in loader:
        loss = model.step(x.to(args.device, model.dtype, non_blocking=True))
        step += 1
        run.log({"train/loss": loss, "train/phase": 0}, step=step)
        if time.monotonic() >= deadline:
            break
    del loader
    note_phase(out, job, "input-bound", started)

    started = now_ms()
    print(f"phase healthy: {args.train:.0f} s")
    deadline = time.monotonic() + args.train
    while time.monotonic() < deadline:
        loss = model.step(model.batch_on_device())
        step += 1
        if step % 10 == 0:
            run.log({"train/loss": loss, "train/phase": 1}, step=step)
    note_phase(out, job, "healthy", started)
    if args.hang <= 0:
        run.finish()
        return 0

    started = now_ms()
    print(f"phase hang: sleeping {args.hang:.0f} s with {torch.cuda.memory_reserved() / 2**30:.1f} GiB reserved")
    sys.stdout.flush()
    time.sleep(args.hang)
    note_phase(out, job, "hang", started)
    print(f"watchdog: no step for {args.hang:.0f} s, giving up", file=sys.stderr)
    run.finish()
    return 1


def run_straggler(args: argparse.Namespace) -> int:
    import torch

    import jobpulse

    out, job = Path(args.out), "gpu-straggler"
    rank = int(os.environ.get("RANK", "0"))
    run = jobpulse.init(job=job)
    model = Model(torch, args.device, args.size, args.layers, args.batch)
    gpu_s = step_seconds(model)
    print(f"rank {rank}: one step takes {gpu_s * 1000:.1f} ms")
    x, step = model.batch_on_device(), 0
    for phase, seconds in (("alike", args.alike), ("slowed", args.slowed)):
        started, deadline = now_ms(), time.monotonic() + seconds
        while time.monotonic() < deadline:
            loss = model.step(x)
            step += 1
            if phase == "slowed" and rank == 1:
                time.sleep(3 * gpu_s)
            if step % 10 == 0:
                run.log({"train/loss": loss}, step=step)
        if rank == 1:
            note_phase(out, job, phase, started)
    print(f"rank {rank}: {step} steps")
    run.finish()
    return 0


def drive(args: argparse.Namespace) -> int:
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    spool = out / "spool"
    env = {
        **os.environ,
        "JOBPULSE_URL": UNREACHABLE,
        "JOBPULSE_API_KEY": "jp_unreachable_server_key_0000000000",
        "JOBPULSE_PROJECT": "insights-h100",
        "JOBPULSE_SPOOL_DIR": str(spool),
        "PYTHONUNBUFFERED": "1",
        "JOBPULSE_FLUSH_TIMEOUT": "3",
    }
    smi = None
    if shutil.which("nvidia-smi"):
        query = "timestamp,utilization.gpu,memory.used,power.draw,temperature.gpu,clocks.sm"
        with open(out / "nvidia_smi.csv", "w") as csv:
            smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={query}", "--format=csv", "-lms", "1000"], stdout=csv)
    common = [*(f"--{k}={getattr(args, k)}" for k in ("device", "size", "layers", "batch")), f"--out={out}"]
    jobpulse = [sys.executable, "-m", "jobpulse", "run", "--interval", "1s", "--flush-timeout", "3"]
    try:
        phases = [str(HERE), "phases", *common, f"--input={args.input}", f"--train={args.train}"]
        code = subprocess.call(
            [*jobpulse, "--job", "gpu-phases", "--", sys.executable, *phases, f"--hang={args.hang}"], env=env
        )
        print(f"gpu-phases exited {code} (1 expected: its watchdog)")
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
        straggler = [str(HERE), "straggler", *common, f"--alike={args.alike}", f"--slowed={args.slowed}"]
        code = subprocess.call([*jobpulse, "--job", "gpu-straggler", "--", *torchrun, *straggler], env=env)
        print(f"gpu-straggler exited {code}")
    finally:
        if smi is not None:
            smi.terminate()
            smi.wait()
    with tarfile.open(out / "spool_h100_insights.tgz", "w:gz") as archive:
        archive.add(spool, arcname="spool")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("drive", "phases", "straggler"))
    parser.add_argument("--out", required=True, help="folder for phases.json, the spool and nvidia-smi's samples")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--job", default="gpu-phases", help="phases: the job's id")
    parser.add_argument("--size", type=int, default=8192, help="width of the MLP's layers")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--ratio", type=float, default=4.0, help="input-bound: a batch every RATIO GPU steps")
    parser.add_argument("--input", type=float, default=125.0, help="seconds of the input-bound phase")
    parser.add_argument("--train", type=float, default=30.0, help="seconds of the healthy phase")
    parser.add_argument("--hang", type=float, default=125.0, help="seconds of the hang")
    parser.add_argument("--alike", type=float, default=20.0, help="seconds both ranks train alike")
    parser.add_argument("--slowed", type=float, default=125.0, help="seconds rank 1 is slowed")
    args = parser.parse_args()
    return {"drive": drive, "phases": run_phases, "straggler": run_straggler}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
