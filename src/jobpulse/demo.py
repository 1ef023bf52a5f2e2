"""A realistic simulated training job, loaded through the public API like any other sender.

Four workers with eight GPUs each trained for the two hours before the load: scalars every step,
system metrics every 10 s, logs with progress bars, a confusion-matrix plot and a debug image. Worker 2's
data loader dies near the end: its log ends in the traceback and it fails with exit code 1, while the others
complete, so the job ends failed. Every time is told to the server (``at``), so the job, its workers and its
data agree: the job started two hours before the load and ended at it.

Two troubles are for the insights to find, and the load ends by evaluating the job, so that its findings are
there when it is opened: one GPU runs hot and throttles its clocks all along (it stands out in a heat map too),
and for four epochs the input pipeline cannot keep up: every GPU waits while the CPUs are busy decoding, and
the throughput falls to a third.
"""

from __future__ import annotations

import math
import struct
import time
import zlib

import numpy as np

from .client import Client

PROJECT = "demo"
JOB = "demo-resnet50"
WORKERS = 4
GPUS = 8
STEPS = 3000
SPAN_S = 2 * 3600
SYSTEM_EVERY_S = 10
GIB = 1 << 30
EPOCHS = 30
EPOCH_MS = SPAN_S * 1000 // EPOCHS
FAILING_WORKER = 2
FIRST_EPOCH_MS = 2000  # the first epoch starts once the process group is up
FAIL_OFFSET_MS = FIRST_EPOCH_MS + 28 * EPOCH_MS + EPOCH_MS * 6 // 10  # in its 29th epoch, 1h52m in
THROTTLED = (1, 5)  # (worker, GPU) that runs hot and throttles its clocks
STARVED_EPOCHS = (20, 24)  # the epochs (first, end) in which the input pipeline cannot keep up: 1h20m to 1h36m


def epoch_start(t0: int, epoch: int) -> int:
    """When ``epoch`` (from 0) of the job started at ``t0`` begins, in ms."""
    return t0 + FIRST_EPOCH_MS + epoch * EPOCH_MS


def _starved(ts: np.ndarray, t0: int) -> np.ndarray:
    """Which of the times ``ts`` fall in the epochs the input pipeline cannot keep up with."""
    first, end = (epoch_start(t0, epoch) for epoch in STARVED_EPOCHS)
    return (ts >= first) & (ts < end)


def png(pixels: np.ndarray) -> bytes:
    """Encode an (h, w, 3) uint8 array as a PNG."""
    height, width, _ = pixels.shape
    raw = b"".join(b"\x00" + pixels[row].tobytes() for row in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


def _scalars(rng: np.random.Generator, t0: int) -> list[dict]:
    steps = np.arange(STEPS)
    ts = (t0 + steps * (SPAN_S * 1000 // STEPS)).tolist()
    progress = steps / STEPS
    lr = np.where(steps < 200, 0.4 * steps / 200, 0.2 * (1 + np.cos(math.pi * progress)))
    loss = 6.9 * np.exp(-4 * progress) + 0.9 + rng.normal(0, 0.08, STEPS)
    loss[1700:1705] += 2.5  # a spike a downsampled chart must still show
    top1 = 76 * (1 - np.exp(-4.5 * progress)) + rng.normal(0, 0.6, STEPS)
    ips = 2900 + rng.normal(0, 60, STEPS)
    ips[_starved(np.array(ts), t0)] -= 1950  # the GPUs wait for their batches
    val = steps[::100]
    series = [
        {
            "kind": "scalar",
            "metric": "loss",
            "variant": "train",
            "iter": steps.tolist(),
            "ts": ts,
            "value": loss.round(5).tolist(),
        },
        {
            "kind": "scalar",
            "metric": "loss",
            "variant": "val",
            "iter": val.tolist(),
            "ts": [ts[i] for i in val],
            "value": (loss[val] + 0.15).round(5).tolist(),
        },
        {
            "kind": "scalar",
            "metric": "accuracy",
            "variant": "top1",
            "iter": val.tolist(),
            "ts": [ts[i] for i in val],
            "value": top1[val].round(3).tolist(),
        },
        {
            "kind": "scalar",
            "metric": "accuracy",
            "variant": "top5",
            "iter": val.tolist(),
            "ts": [ts[i] for i in val],
            "value": np.minimum(99, top1[val] + 17).round(3).tolist(),
        },
        {
            "kind": "scalar",
            "metric": "lr",
            "variant": "lr",
            "iter": steps.tolist(),
            "ts": ts,
            "value": lr.round(7).tolist(),
        },
        {
            "kind": "scalar",
            "metric": "throughput",
            "variant": "images_per_sec",
            "iter": steps.tolist(),
            "ts": ts,
            "value": ips.round(1).tolist(),
        },
    ]
    return series


def _end(t0: int, worker: int) -> int:
    """When ``worker`` stopped: the failing one in its 29th epoch, the others at the end of the span."""
    return t0 + (FAIL_OFFSET_MS if worker == FAILING_WORKER else SPAN_S * 1000)


def _system(rng: np.random.Generator, t0: int, worker: int) -> list[dict]:
    ts = np.arange(t0, _end(t0, worker), SYSTEM_EVERY_S * 1000)
    n = len(ts)
    warm = np.clip(np.arange(n) / 30, 0, 1)
    series: list[dict] = []

    def add(metric: str, device: str, values: np.ndarray) -> None:
        series.append(
            {
                "kind": "system",
                "worker": f"worker-{worker}",
                "metric": metric,
                "device": device,
                "ts": ts.tolist(),
                "value": np.round(values, 3).tolist(),
            }
        )

    starved = _starved(ts, t0)
    for gpu in range(GPUS):
        hot = (worker, gpu) == THROTTLED
        util = warm * ((45 + rng.normal(0, 10, n)) if hot else (95 + rng.normal(0, 3, n)))
        util[starved] = 28 + rng.normal(0, 6, int(starved.sum()))  # waiting for the input pipeline
        util[(np.arange(n) % 180) < 3] = 2.0  # evaluation pauses every 30 minutes
        util = np.clip(util, 0, 100)
        mem = warm * (61 * GIB + rng.normal(0, 0.2 * GIB, n))
        add("gpu_util", str(gpu), util)
        add("gpu_mem_bytes", str(gpu), mem)
        add("gpu_mem_util", str(gpu), 100 * mem / (80 * GIB))
        add("gpu_power_w", str(gpu), 90 + 5.9 * util + rng.normal(0, 8, n))
        heat = 38 + 48 * warm if hot else 38 + 0.35 * util  # the hot GPU reaches 86 C whatever its load
        add("gpu_temp_c", str(gpu), heat + rng.normal(0, 1, n))
        add("gpu_throttle_thermal", str(gpu), ((warm >= 1) & hot).astype(float))  # 1 while the driver throttles
    cores = warm * (22 + rng.normal(0, 2, n))
    cores[starved] = 93 + rng.normal(0, 1, int(starved.sum()))  # the loader's workers decode flat out
    add("cpu_cores", "", cores)
    add("cpu_util", "", 100 * cores / 96)
    mem = 180 * GIB * warm + 8 * GIB
    add("mem_bytes", "", mem)
    add("mem_util", "", 100 * mem / (1024 * GIB))
    add("net_rx_Bps", "", warm * (2.1e9 + rng.normal(0, 1e8, n)))
    add("net_tx_Bps", "", warm * (2.0e9 + rng.normal(0, 1e8, n)))
    add("disk_read_Bps", "", warm * (4.5e8 + rng.normal(0, 5e7, n)))
    add("disk_write_Bps", "", np.abs(rng.normal(2e6, 1e6, n)))
    eph = 40 * GIB + np.arange(n) * 12e6
    add("ephemeral_bytes", "", eph)
    add("ephemeral_util", "", eph / (500 * GIB))
    return series


TRACEBACK = """Traceback (most recent call last):
  File "/workspace/train.py", line 214, in <module>
    main()
  File "/workspace/train.py", line 187, in main
    batch = next(loader_iter)
  File "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py", line 631, in __next__
    data = self._next_data()
RuntimeError: DataLoader worker (pid 41822) is killed by signal: Bus error. \
It is possible that dataloader's workers are out of shared memory."""
ERROR = TRACEBACK.splitlines()[-1]


def _logs(t0: int, worker: int) -> dict:
    lines: list[tuple[int, str, str]] = []
    w = f"worker-{worker}"
    end = _end(t0, worker)
    lines.append((t0, "info", f"[{w}] initializing process group: backend=nccl world_size={WORKERS * GPUS}"))
    lines.append((t0 + 800, "info", f"[{w}] rank {worker * GPUS}-{worker * GPUS + GPUS - 1} ready on 8x H100 80GB"))
    lines.append((t0 + 1500, "warning", f"[{w}] NCCL_IB_TIMEOUT not set, using default 18"))
    for epoch in range(EPOCHS):
        start = epoch_start(t0, epoch)
        for step in range(0, 100, 10):
            when = start + step * EPOCH_MS // 100
            loss = 6.9 * math.exp(-4 * (epoch * 100 + step) / 3000) + 0.9
            lines.append((when, "info", f"epoch {epoch + 1} step {step * 10}/1000 loss={loss:.4f} lr=0.2"))
        bar = "█" * 10
        lines.append(
            (start + EPOCH_MS - 2500, "info", f"Epoch {epoch + 1}: 100%|{bar}| 1000/1000 [03:58<00:00, 4.19it/s]")
        )
        if epoch == STARVED_EPOCHS[0]:
            lines.append(
                (start + 3000, "warning", f"[{w}] input pipeline: waited 2.3 s for a batch (8 loader workers busy)")
            )
        if epoch == STARVED_EPOCHS[1]:
            lines.append((start + 3000, "info", f"[{w}] input pipeline keeps up again: 0.02 s per batch"))
        if worker == FAILING_WORKER and epoch == 17:
            lines.append(
                (
                    start + EPOCH_MS // 2,
                    "warning",
                    "a worker process of the dataloader (pid 39107) exited unexpectedly; restarting it "
                    "(attempt 1 of 3)",
                )
            )
    lines = [line for line in lines if line[0] < end]
    if worker == FAILING_WORKER:
        lines.extend((end + i, "error", text) for i, text in enumerate(TRACEBACK.splitlines()))
    else:
        lines.append((end - 200, "info", f"[{w}] training finished: saved checkpoint epoch-{EPOCHS}.pt"))
    ts = [t for t, _, _ in lines]
    return {
        "kind": "log",
        "worker": w,
        "seq": list(range(1, len(lines) + 1)),
        "ts": ts,
        "level": [lvl for _, lvl, _ in lines],
        "msg": [m for _, _, m in lines],
    }


def _put_worker(client: Client, job: str, worker: int, body: dict) -> None:
    client.request("PUT", f"/jp/v1/jobs/{job}/workers/worker-{worker}", json=body)


def load_demo(client: Client, *, job: str = JOB, project: str = PROJECT, seed: int = 7) -> dict:
    """Send the demo job to the server behind ``client`` and evaluate its insights; answers what was sent and how
    many findings the evaluation opened."""
    rng = np.random.default_rng(seed)
    now = int(time.time() * 1000)
    t0 = now - SPAN_S * 1000
    client.request(
        "POST",
        "/jp/v1/jobs",
        json={
            "project": project,
            "job": job,
            "name": "ResNet-50 on ImageNet (demo)",
            "tags": ["demo", "resnet"],
            "config": {"model": "resnet50", "batch_size": 1024, "optimizer": "sgd", "epochs": 30},
            "instance_type": {
                "id": "gpu-8xh100",
                "name": "8x H100 80GB",
                "memory_limit_mib": 1024 * 1024,
                "millicpu_limit": 96_000,
                "gpu_count": GPUS,
                "gpu_type": "H100",
                "gpu_memory_limit_mib": 80 * 1024,
            },
            "leader": "worker-0",
            "status": "running",
            "at": t0,
        },
    )
    for worker in range(WORKERS):
        _put_worker(client, job, worker, {"status": "running", "host": f"gpu-node-{worker:02d}", "at": t0 + 300})
    sent = 0
    result = client.ingest({"project": project, "job": job, "series": _scalars(rng, t0)})
    sent += result["accepted"]
    for worker in range(WORKERS):
        result = client.ingest({"project": project, "job": job, "series": _system(rng, t0, worker)})
        sent += result["accepted"]
        result = client.ingest({"project": project, "job": job, "series": [_logs(t0, worker)]})
        sent += result["accepted"]
    classes = ["cat", "dog", "car", "ship"]
    matrix = (rng.dirichlet(np.ones(4) * 0.3, 4) * 100 + np.eye(4) * 300).round().tolist()
    figure = {
        "data": [{"type": "heatmap", "z": matrix, "x": classes, "y": classes, "colorscale": "Blues"}],
        "layout": {
            "title": {"text": "Confusion matrix (val)"},
            "xaxis": {"title": {"text": "predicted"}},
            "yaxis": {"title": {"text": "true"}},
        },
    }
    yy, xx = np.mgrid[0:64, 0:64]
    pixels = np.stack([(xx * 4) % 256, (yy * 4) % 256, ((xx + yy) * 2) % 256], axis=-1).astype(np.uint8)
    upload = client.request(
        "PUT",
        f"/jp/v1/jobs/{job}/files/samples/batch-{STEPS}.png",
        data=png(pixels),
        content_type="image/png",
    )
    events = [
        {"kind": "plot", "metric": "confusion", "variant": "val", "iter": STEPS, "plot": figure, "ts": now},
        {
            "kind": "image",
            "metric": "samples",
            "variant": "augmented",
            "iter": STEPS,
            "url": upload["url"],
            "ts": now,
        },
        {
            "kind": "vector",
            "metric": "grad_norm",
            "variant": "per_layer",
            "iter": STEPS,
            "values": rng.gamma(2, 0.5, 16).round(4).tolist(),
            "ts": now,
        },
    ]
    sent += client.ingest(events, project=project, job=job)["accepted"]
    # as a training script would: the error first, then each worker's end (the job ends with the last one)
    client.request("PATCH", f"/jp/v1/jobs/{job}", json={"error_message": ERROR})
    for worker in range(WORKERS):
        failed = worker == FAILING_WORKER
        end = {"status": "failed" if failed else "completed", "exit_code": 1 if failed else 0}
        _put_worker(
            client, job, worker, {**end, "at": _end(t0, worker) + (len(TRACEBACK.splitlines()) if failed else 0)}
        )
    evaluated = client.request("POST", f"/jp/v1/jobs/{job}/insights/evaluate")
    return {"job": job, "project": project, "events": sent, "findings": len(evaluated["findings"])}
