"""Weights & Biases: ``wandb.log`` in offline mode (no network: the run is written to a local folder by
its own service process). Workload 6 only.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import FIVE, Result, install_bytes, read_config, time_calls, version_of  # noqa: E402


def main() -> None:
    cfg = read_config()
    res = Result("wandb")
    res.data["versions"] = {"wandb": version_of("wandb")}
    work = Path(cfg["work_dir"]) / "wandb"
    shutil.rmtree(work, ignore_errors=True)  # every run starts from nothing
    work.mkdir(parents=True)
    os.environ.update(
        WANDB_MODE="offline",
        WANDB_DIR=str(work),
        WANDB_SILENT="true",
        WANDB_CONSOLE="off",
        WANDB_DISABLE_GIT="true",
        WANDB_DISABLE_CODE="true",
        WANDB_CONFIG_DIR=str(work / "config"),
        WANDB_CACHE_DIR=str(work / "cache"),
        WANDB_DATA_DIR=str(work / "data"),
    )
    if "w6" in cfg.get("workloads", []):
        with res.guard("w6.log_call"):
            import wandb

            run = wandb.init(project="bench", name="w6", settings=wandb.Settings(x_disable_stats=True))
            done = 0
            for _ in range(cfg["repeats"]):
                us, calls = time_calls(
                    lambda i: run.log(FIVE, step=i), cfg["w6"]["calls"], cfg["w6"]["time_s"], first_step=done
                )
                done += calls
                res.add("w6.log_call", us, "us/call", calls=calls, path="wandb.log (offline)")
            start = time.perf_counter()
            run.finish()
            res.add("w6.flush", time.perf_counter() - start, "s", calls=done)
    res.add("w7.install_server", install_bytes("wandb"), "bytes")
    res.emit()


if __name__ == "__main__":
    main()
