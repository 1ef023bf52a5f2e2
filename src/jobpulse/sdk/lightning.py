"""A PyTorch Lightning logger that reports to jobpulse.

    from jobpulse.sdk.lightning import JobpulseLogger

    trainer = lightning.Trainer(logger=JobpulseLogger(project="vision", job="resnet-42"))

Works with ``lightning`` (``lightning.pytorch``) and with the older ``pytorch_lightning``.
Every process of a distributed run (DDP) is a rank of the job: each starts its own run, a worker named from its
rank (``jobpulse.sdk.env`` reads it from the launcher, or from the process group Lightning's DDP joined), and
reports its own metrics and console; a metric ``"val/acc"`` becomes metric ``val``, variant ``acc`` (see
``Run.log``). Hyperparameters become the job's config, from global rank 0. The run is started on first use, or
pass one made with ``jobpulse.init`` as ``run=``; a run the logger started is finished by it.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

try:
    from lightning.pytorch.loggers.logger import Logger
    from lightning.pytorch.utilities import rank_zero_only
except ImportError:  # the older package name
    from pytorch_lightning.loggers.logger import Logger
    from pytorch_lightning.utilities import rank_zero_only

from jobpulse.sdk.run import Run
from jobpulse.sdk.session import init

_STATUS = {"success": "completed", "finished": "completed", "failed": "failed", "interrupted": "stopped"}


def flatten(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested hyperparameters as one level of ``a/b`` keys, values JSON-ready."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, argparse.Namespace):
            value = vars(value)
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}/"))
        elif value is None or isinstance(value, bool | int | float | str):
            out[name] = value
        elif isinstance(value, list | tuple) and all(isinstance(v, bool | int | float | str) for v in value):
            out[name] = list(value)
        else:
            out[name] = str(value)
    return out


class JobpulseLogger(Logger):
    """Lightning logger: ``log_metrics`` -> ``Run.log``, ``log_hyperparams`` -> the job's config."""

    def __init__(
        self,
        project: str | None = None,
        job: str | None = None,
        worker: str | None = None,
        *,
        run: Run | None = None,
        **init_options: Any,
    ) -> None:
        super().__init__()
        self._project = project
        self._job = job
        self._worker = worker
        self._options = init_options
        self._run = run
        self._owns_run = run is None

    @property
    def name(self) -> str:
        return self._run.project if self._run is not None else (self._project or "jobpulse")

    @property
    def version(self) -> str:
        return self._run.job if self._run is not None else (self._job or "")

    @property
    def experiment(self) -> Run:
        """The jobpulse run of this process (started on first use, on every rank)."""
        if self._run is None:
            self._run = init(self._project, self._job, self._worker, **self._options)
        return self._run

    @rank_zero_only
    def log_hyperparams(self, params: Mapping[str, Any] | argparse.Namespace, *args: Any, **kwargs: Any) -> None:
        if isinstance(params, argparse.Namespace):
            params = vars(params)
        self.experiment.set_config(flatten(params or {}))

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        self.experiment.log(metrics, step=step)

    def finalize(self, status: str) -> None:
        if self._run is not None and self._owns_run:
            self._run.finish(_STATUS.get(status, "completed"))
