"""A tiny Lightning DDP run on the CPU (2 processes, gloo) reporting through ``JobpulseLogger``: job ``argv[1]``.

Lightning starts the second process itself (it runs this script again); each prints lines that name its rank.
"""

import sys

import torch

try:
    import lightning.pytorch as pl
except ImportError:  # the older package name
    import pytorch_lightning as pl

from jobpulse.sdk.lightning import JobpulseLogger


class Tiny(pl.LightningModule):
    def __init__(self, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train/loss", loss, on_step=True, on_epoch=False)
        print(f"rank {self.global_rank} step {batch_idx}")
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(32, 4)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
    trainer = pl.Trainer(
        max_epochs=1,
        logger=JobpulseLogger(project="ranks", job=sys.argv[1]),
        log_every_n_steps=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=2,
        strategy="ddp",
    )
    trainer.fit(Tiny(), data)
