"""The Lightning logger and the Transformers callback in tiny real training runs.

Each test skips when its library is not installed; neither is a default test requirement
(torch alone is several hundred MB).
"""

from __future__ import annotations

import pytest
import sdk_support as s

pytestmark = pytest.mark.e2e


@pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")  # lightning 2.6 on torch 2.13
def test_lightning_logger_reports_metrics_and_hyperparameters(server, tmp_path):
    try:
        import lightning.pytorch as pl
    except ImportError:
        pl = pytest.importorskip("pytorch_lightning", reason="lightning is not installed")
    torch = pytest.importorskip("torch")
    from jobpulse.sdk.lightning import JobpulseLogger
    from ranks.lightning_ddp import Tiny  # the module the DDP test trains, on one process here

    torch.manual_seed(0)
    x = torch.randn(64, 4)
    pairs = torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True))
    data = torch.utils.data.DataLoader(pairs, batch_size=8)
    options = s.run_options(server, tmp_path, flush_interval=0.2)
    logger = JobpulseLogger(project="frameworks", job="lightning-tiny", **options)
    trainer = pl.Trainer(
        max_epochs=2,
        logger=logger,
        log_every_n_steps=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
    )
    trainer.fit(Tiny(), data)
    assert logger.experiment.status == "completed"
    points = s.all_points(server, "lightning-tiny", "train/loss", "train/loss")
    assert points["iter"] == list(range(16))
    job = s.api_get(server, "/jp/v1/jobs/lightning-tiny")
    assert job["job"]["config"]["lr"] == 0.05
    assert [w["status"] for w in job["workers"]] == ["completed"]


def test_transformers_callback_reports_trainer_logs(server, tmp_path):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    torch = pytest.importorskip("torch")
    pytest.importorskip("accelerate", reason="the Trainer needs accelerate")
    from jobpulse.sdk.transformers import JobpulseCallback, phase_key

    assert (phase_key("eval_loss"), phase_key("loss"), phase_key("a/b")) == ("eval/loss", "train/loss", "a/b")

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def forward(self, x, labels=None):
            out = self.layer(x)
            loss = torch.nn.functional.mse_loss(out, labels) if labels is not None else None
            return {"loss": loss, "logits": out}

    class Data(torch.utils.data.Dataset):
        def __init__(self) -> None:
            torch.manual_seed(0)
            self.x = torch.randn(32, 4)

        def __len__(self) -> int:
            return len(self.x)

        def __getitem__(self, i):
            return {"x": self.x[i], "labels": self.x[i].sum(0, keepdim=True)}

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=8,
        num_train_epochs=3,
        logging_steps=1,
        eval_strategy="epoch",
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
    )
    options = s.run_options(server, tmp_path, flush_interval=0.2)
    callback = JobpulseCallback(project="frameworks", job="hf-tiny", **options)
    trainer = transformers.Trainer(
        model=Tiny(), args=args, train_dataset=Data(), eval_dataset=Data(), callbacks=[callback]
    )
    trainer.train()
    assert callback.run.status == "completed"
    loss = s.all_points(server, "hf-tiny", "train/loss", "train/loss")
    assert loss["iter"] == list(range(1, 13))
    assert s.all_points(server, "hf-tiny", "eval/loss", "eval/loss")["iter"] == [4, 8, 12]
    job = s.api_get(server, "/jp/v1/jobs/hf-tiny")["job"]
    assert job["config"]["args/per_device_train_batch_size"] == 8
