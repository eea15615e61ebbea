"""The order in which the training loop sees the data, and how it moves batches.

Used by `bertedu.training.loop`. Everything random here is a pure function of (seed, epoch,
step, slot), so a resumed or a multi-process run sees exactly what one uninterrupted
process would: nothing needs saving but the data position.
"""

from __future__ import annotations

import os
from typing import Callable, Optional

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from ..errors import SettingError
from .config import TrainConfig, TrainState
from .distributed import DistContext

Collate = Callable[[list, torch.Generator], dict]


def epoch_permutation(num_examples: int, seed: int, epoch: int) -> torch.Tensor:
    """The order examples are seen in during `epoch`: the same for every process and run."""
    return torch.randperm(num_examples, generator=torch.Generator().manual_seed(seed + epoch))


def batch_seed(seed: int, step: int, slot: int) -> int:
    """Seed for collate's generator: a pure function of (seed, step, slot), so no state to save.

    slot = micro_batch * world_size + rank numbers the pieces of one global batch, so one
    process with grad_accum_steps=2 draws the same masks as two processes with 1.
    """
    return int(np.random.SeedSequence([seed, step, slot]).generate_state(1, np.uint64)[0] >> 1)


class MicroBatches(Dataset):
    """This process's micro-batches of one epoch, from global batch `first_batch` on, collated.

    Global batch b of the epoch is perm[b*G : (b+1)*G]; it is cut into world_size *
    grad_accum_steps slots of batch_size examples, and slot a * world_size + rank is this
    process's micro-batch a. A map-style dataset, so a DataLoader can prepare it in workers.
    """

    def __init__(self, dataset, collate: Collate, cfg: "TrainConfig", ctx: "DistContext", epoch: int,
                 first_batch: int, steps_per_epoch: int):
        self.dataset, self.collate, self.cfg, self.ctx = dataset, collate, cfg, ctx
        self.perm = epoch_permutation(len(dataset), cfg.seed, epoch)
        self.first_batch, self.steps_per_epoch = first_batch, steps_per_epoch
        self.first_step = epoch * steps_per_epoch  # the global step of this epoch's batch 0

    def __len__(self) -> int:
        return (self.steps_per_epoch - self.first_batch) * self.cfg.grad_accum_steps

    def __getitem__(self, i: int) -> dict:
        A, B, W = self.cfg.grad_accum_steps, self.cfg.batch_size, self.ctx.world_size
        b, a = self.first_batch + i // A, i % A
        slot = a * W + self.ctx.rank
        start = b * (B * W * A) + slot * B
        examples = [self.dataset[j] for j in self.perm[start : start + B].tolist()]
        generator = torch.Generator().manual_seed(batch_seed(self.cfg.seed, self.first_step + b, slot))
        return self.collate(examples, generator)


def global_batches(dataset, collate: Collate, cfg: "TrainConfig", ctx: "DistContext", state: "TrainState",
                    steps_per_epoch: int):
    """Yield (epoch, batch_in_epoch, [this process's grad_accum_steps micro-batches]) forever."""
    epoch, first = state.epoch, state.batch_in_epoch
    while True:
        if hasattr(dataset, "set_epoch"):  # e.g. PretrainingDataset's dynamic masks: fresh each epoch
            dataset.set_epoch(epoch)
        micro = MicroBatches(dataset, collate, cfg, ctx, epoch, first, steps_per_epoch)
        loader = DataLoader(
            micro, batch_size=None, num_workers=loader_workers(cfg.num_workers, ctx.device), pin_memory=ctx.device.type == "cuda",
            # an explicit generator: otherwise the DataLoader draws its worker seed from the
            # global torch RNG, which a resumed run would then be out of step with
            generator=torch.Generator().manual_seed(cfg.seed + epoch),
        )
        it = iter(loader)
        for b in range(first, steps_per_epoch):
            yield epoch, b, [next(it) for _ in range(cfg.grad_accum_steps)]
        epoch, first = epoch + 1, 0


def loader_workers(num_workers: Optional[int], device: torch.device) -> int:
    """DataLoader workers: the number asked for; None: none on the CPU (the loop's own process
    prepares each batch, as every CPU run always has), min(8, CPU cores) on CUDA, so masking and
    collating run beside the GPU's work instead of taking turns with it. The batches are the
    same either way: each is drawn from its own seeded generator."""
    if num_workers is not None:
        return num_workers
    return min(8, os.cpu_count() or 1) if torch.device(device).type == "cuda" else 0


def steps_in_epoch(num_examples: int, cfg: "TrainConfig", world_size: int) -> int:
    global_batch = cfg.batch_size * world_size * cfg.grad_accum_steps
    if num_examples < global_batch:
        raise SettingError(
            f"the training set has {num_examples} examples, fewer than one global batch of {global_batch} "
            f"(batch_size {cfg.batch_size} x {world_size} processes x grad_accum_steps {cfg.grad_accum_steps}); "
            "lower --batch-size or --grad-accum-steps (or give it more examples)."
        )
    return num_examples // global_batch  # the incomplete last global batch is dropped


def to_device(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device, non_blocking=True) if torch.is_tensor(v) else v for k, v in batch.items()}


def count_tokens(batch: dict) -> int:
    """Real tokens in a micro-batch: padding (attention_mask 0) does not count."""
    if "attention_mask" in batch:
        return int(batch["attention_mask"].sum())
    return int(batch["input_ids"].numel()) if "input_ids" in batch else 0
