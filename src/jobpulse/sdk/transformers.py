"""A Hugging Face Transformers ``Trainer`` callback that reports to jobpulse.

    from jobpulse.sdk.transformers import JobpulseCallback

    trainer = Trainer(..., callbacks=[JobpulseCallback(project="nlp", job="bert-7")])

The main process (``state.is_world_process_zero``) starts a run at the beginning of
training, with the training arguments (and the model's config, when it has one) as the
job's config, and reports every ``logs`` dict the Trainer emits at ``state.global_step``.
Keys are grouped by phase: ``eval_loss`` -> metric ``eval``, variant ``loss``;
``test_*`` -> ``test``; every other key (``loss``, ``learning_rate``, ``grad_norm``) ->
``train``. Pass a run made with ``jobpulse.init`` as ``run=`` to report into it instead.
"""

from __future__ import annotations

import contextlib
from typing import Any

from transformers import TrainerCallback

from jobpulse.sdk.run import Run
from jobpulse.sdk.session import init

_PHASES = ("eval_", "test_", "predict_")


def phase_key(key: str) -> str:
    """``eval_loss`` -> ``eval/loss``; ``loss`` -> ``train/loss``; keys with ``/`` stay."""
    if "/" in key:
        return key
    for prefix in _PHASES:
        if key.startswith(prefix) and len(key) > len(prefix):
            return f"{prefix[:-1]}/{key[len(prefix) :]}"
    return f"train/{key}"


def _config(args: Any, model: Any) -> dict[str, Any]:
    config: dict[str, Any] = {}
    with contextlib.suppress(Exception):
        config.update({f"args/{k}": v for k, v in args.to_dict().items()})
    model_config = getattr(model, "config", None)
    to_dict = getattr(model_config, "to_dict", None)
    if callable(to_dict):
        with contextlib.suppress(Exception):
            config.update({f"model/{k}": v for k, v in to_dict().items()})
    return config


class JobpulseCallback(TrainerCallback):
    """Reports the Trainer's logs to a jobpulse run."""

    def __init__(
        self,
        project: str | None = None,
        job: str | None = None,
        worker: str | None = None,
        *,
        run: Run | None = None,
        **init_options: Any,
    ) -> None:
        self._project = project
        self._job = job
        self._worker = worker
        self._options = init_options
        self.run = run
        self._owns_run = run is None

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        config = _config(args, model)
        if self.run is None:
            self.run = init(self._project, self._job, self._worker, config=config, **self._options)
        else:
            self.run.set_config(config)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        if self.run is None or not state.is_world_process_zero or not logs:
            return
        numbers = {phase_key(k): v for k, v in logs.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        if numbers:
            self.run.log(numbers, step=state.global_step)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.run is not None and self._owns_run and state.is_world_process_zero:
            self.run.finish("completed")
