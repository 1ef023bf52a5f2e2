"""A tiny data-parallel training run for the launcher tests: gloo on the CPU, a few steps, reported with the SDK.

Each rank prints lines that name it, reports its loss, and all-reduces a tensor, so that a rank that did not
join the process group fails the job. Run by torchrun (or any launcher that sets torch.distributed's variables).
"""

import os
import sys

import torch
import torch.distributed as dist

import jobpulse

STEPS = 3

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
run = jobpulse.init(project="ranks")
for step in range(STEPS):
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    loss = 1.0 / (step + 1) + rank
    run.log({"loss": loss}, step=step)  # a key without "/": metric and variant "loss"
    print(f"rank {rank} step {step} loss={loss:.3f} total={total.item():.0f}")
print(f"rank {rank} warns on stderr", file=sys.stderr)
os.write(1, f"rank {rank} fd-level line\n".encode())  # C-level output: not the SDK's, so the node's
dist.barrier()
dist.destroy_process_group()
run.finish()
