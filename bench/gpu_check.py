"""Check the NVIDIA collector against a real GPU under a known load (needs a GPU, its driver and torch).

Samples the job's GPU 0 (as CUDA_VISIBLE_DEVICES names it) every second: a few seconds idle,
~20 s while a thread runs back-to-back matmuls on it, a few seconds idle again. Prints each
reading of ``gpu_util``, ``gpu_sm_util`` (where GPM exists), ``gpu_mem_bytes`` and
``torch.cuda.memory_reserved()``, and checks that:

- ``gpu_util`` is high (>= 80 % median) under load and lower when idle;
- ``gpu_mem_bytes`` is at least what torch has reserved, and exceeds it by no more than the CUDA
  context and other processes can explain (< 2 GiB when the GPU is otherwise empty).

    python bench/gpu_check.py [--seconds 20] [--size 8192]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from jobpulse.agent.nvidia import NvidiaCollector  # noqa: E402

GIB = 1 << 30


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the load")
    parser.add_argument("--size", type=int, default=8192, help="matrix size of the load")
    parser.add_argument("--idle", type=float, default=3.0, help="idle seconds before and after")
    args = parser.parse_args()

    try:
        import torch
    except ImportError:
        print("torch is not installed: pip install torch")
        return 2
    if not torch.cuda.is_available():
        print("torch sees no CUDA device")
        return 2
    collector = NvidiaCollector.create()
    if collector is None:
        print("NVML found no GPU for this process (driver, CUDA_VISIBLE_DEVICES?)")
        return 2
    target = collector.targets[0]
    print(f"device 0 = NVML GPU {target.gpu.index} {target.uuid}" + (" (MIG)" if target.mig else ""))
    print(f"torch: {torch.__version__}, {torch.cuda.get_device_name(0)}")

    torch.cuda.init()
    load = threading.Event()
    done = threading.Event()

    def matmul_loop() -> None:
        a = torch.randn(args.size, args.size, device="cuda:0", dtype=torch.float16)
        b = torch.randn(args.size, args.size, device="cuda:0", dtype=torch.float16)
        torch.cuda.synchronize()
        load.set()
        while not done.is_set():
            for _ in range(10):
                a = (a @ b).clamp_(-1, 1)
            torch.cuda.synchronize()

    def reading(phase: str, t: float) -> dict[str, float]:
        values = {s.metric: s.value for s in collector.collect(t) if s.device == "0"}
        reserved = torch.cuda.memory_reserved(0)
        values["torch_reserved"] = float(reserved)
        print(
            f"{phase:>5} t={t:5.1f}s gpu_util={values.get('gpu_util', float('nan')):5.1f}% "
            f"sm_util={values.get('gpu_sm_util', float('nan')):5.1f}% "
            f"gpu_mem={values.get('gpu_mem_bytes', float('nan')) / GIB:7.3f} GiB "
            f"torch_reserved={reserved / GIB:7.3f} GiB "
            f"power={values.get('gpu_power_w', float('nan')):6.1f} W"
        )
        return values

    start = time.monotonic()
    idle_before, loaded, idle_after = [], [], []
    collector.collect(0.0)
    for _ in range(int(args.idle)):
        time.sleep(1.0)
        idle_before.append(reading("idle", time.monotonic() - start))
    worker = threading.Thread(target=matmul_loop, daemon=True)
    worker.start()
    load.wait(60)
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        time.sleep(1.0)
        loaded.append(reading("load", time.monotonic() - start))
    done.set()
    worker.join(30)
    torch.cuda.synchronize()
    for _ in range(int(args.idle)):
        time.sleep(1.0)
        idle_after.append(reading("idle", time.monotonic() - start))
    collector.close()

    ok = True
    utils = [v["gpu_util"] for v in loaded if "gpu_util" in v]
    idle_utils = [v["gpu_util"] for v in idle_after[1:] if "gpu_util" in v]
    if utils:
        median = statistics.median(utils)
        print(f"gpu_util under load: median {median:.1f} %, min {min(utils):.1f} %, max {max(utils):.1f} %")
        if median < 80:
            ok = False
            print("FAIL: gpu_util under load is below 80 %")
        if idle_utils and max(idle_utils) >= median:
            ok = False
            print("FAIL: gpu_util does not drop when the load stops")
    else:
        ok = False
        print("FAIL: no gpu_util readings")
    diffs = [v["gpu_mem_bytes"] - v["torch_reserved"] for v in loaded if "gpu_mem_bytes" in v]
    if diffs:
        low, high = min(diffs) / GIB, max(diffs) / GIB
        print(
            f"gpu_mem_bytes - torch.cuda.memory_reserved(): {low:.3f} .. {high:.3f} GiB "
            "(the CUDA context and any other process on the GPU)"
        )
        if min(diffs) < 0:
            ok = False
            print("FAIL: NVML reports less memory in use than torch has reserved")
        elif max(diffs) > 2 * GIB:
            print("NOTE: more than 2 GiB beyond torch's reserve: other processes on this GPU?")
    else:
        ok = False
        print("FAIL: no gpu_mem_bytes readings")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
