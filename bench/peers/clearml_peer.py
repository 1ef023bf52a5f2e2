"""ClearML: the SDK's ``Logger.report_scalar`` in offline mode (no server: the task is written to a local
session folder by ClearML's own background reporter). Workload 6 only.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import FIVE, Result, install_bytes, read_config, time_calls, version_of  # noqa: E402

CLOSE_S = 120


def main() -> None:
    cfg = read_config()
    res = Result("clearml")
    res.data["versions"] = {"clearml": version_of("clearml")}
    work = Path(cfg["work_dir"]) / "clearml"
    shutil.rmtree(work, ignore_errors=True)  # every run starts from nothing
    work.mkdir(parents=True)
    # keep ClearML's configuration and offline sessions inside the work folder, away from the user's home
    os.environ["HOME"] = str(work)
    os.environ["CLEARML_CACHE_DIR"] = str(work / "cache")
    os.environ["CLEARML_OFFLINE_MODE"] = "1"
    os.environ.setdefault("CLEARML_LOG_ENVIRONMENT", "")
    if "w6" in cfg.get("workloads", []):
        with res.guard("w6.log_call"):
            from clearml import Task

            Task.set_offline(offline_mode=True)
            task = Task.init(
                project_name="bench",
                task_name="w6",
                auto_connect_frameworks=False,
                auto_resource_monitoring=False,
                auto_connect_streams=False,
                auto_connect_arg_parser=False,
            )
            logger = task.get_logger()
            items = list(FIVE.items())

            def call(step: int) -> None:
                for name, value in items:
                    logger.report_scalar(title="train", series=name, value=value, iteration=step)

            done = 0
            for _ in range(cfg["repeats"]):
                us, calls = time_calls(call, cfg["w6"]["calls"], cfg["w6"]["time_s"], first_step=done)
                done += calls
                res.add("w6.log_call", us, "us/call", calls=calls, path="5 x Logger.report_scalar (offline)")
            # close() waits for ClearML's reporter subprocess, which once never answered (the whole run then
            # waited for this worker's time limit): it gets CLOSE_S, and a flush that does not end is an error
            start = time.perf_counter()
            closing = threading.Thread(target=task.close, daemon=True)
            closing.start()
            closing.join(CLOSE_S)
            if closing.is_alive():
                res.error("w6.flush", f"Task.close() had not returned after {CLOSE_S} s")
            else:
                res.add("w6.flush", time.perf_counter() - start, "s", calls=done)
    res.add("w7.install_server", install_bytes("clearml"), "bytes")
    res.emit()
    os._exit(0)  # ClearML's reporter threads may outlive the task


if __name__ == "__main__":
    main()
