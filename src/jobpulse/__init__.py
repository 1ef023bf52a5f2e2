"""jobpulse: self-hosted telemetry for ML training jobs.

    import jobpulse

    run = jobpulse.init(project="vision", job="resnet-42", config={"lr": 3e-4})
    for step in range(1000):
        run.log({"train/loss": loss, "lr": lr}, step=step)
    run.finish()

Importing this package starts no thread, opens no file and imports nothing heavy: the
SDK is loaded on first use of one of the names below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobpulse.sdk.checks import RefusedError
    from jobpulse.sdk.run import Run
    from jobpulse.sdk.session import current_run, finish, init, log

__all__ = ["RefusedError", "Run", "current_run", "finish", "init", "log"]

_LAZY = {
    "RefusedError": "jobpulse.sdk.checks",
    "Run": "jobpulse.sdk.run",
    **{n: "jobpulse.sdk.session" for n in ("current_run", "finish", "init", "log")},
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'jobpulse' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
