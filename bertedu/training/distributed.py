"""Processes and devices for the training loop: torchrun's process group, DDP, torch.compile.

Used by `bertedu.training.loop`. Without torchrun everything here is one process, rank 0.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Optional

import torch
import torch.distributed as dist
from torch import nn

from ..utils import resolve_device


@dataclass
class DistContext:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def is_main_process() -> bool:
    """True in the process that writes a run's shared files (run.json, metrics.png): the only
    process, or rank 0 under torchrun (read from RANK, before the process group exists)."""
    return int(os.environ.get("RANK", "0")) == 0


def setup_distributed(device: Optional[str] = None) -> DistContext:
    """Read torchrun's WORLD_SIZE / RANK / LOCAL_RANK; join the process group if there is one.

    Backend nccl for GPUs, gloo for CPUs. Without torchrun: one process, rank 0.
    The group stays up until the process exits, so a script may call train() several
    times (pretraining, then fine-tuning): under torchrun a group cannot be made twice.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    ctx = DistContext(rank, world_size, local_rank, resolve_device(device, local_rank))
    if ctx.device.type == "cuda":
        torch.cuda.set_device(ctx.device)
    allow_tf32(ctx.device)
    if world_size > 1 and not dist.is_initialized():
        with _stop_signals_blocked():  # the group's threads inherit the mask: signals reach Python's thread
            dist.init_process_group("nccl" if ctx.device.type == "cuda" else "gloo")
        atexit.register(_leave_process_group)
    return ctx


def allow_tf32(device: torch.device) -> bool:
    """On CUDA, let fp32 matmuls and convolutions use TF32 tensor cores (10-bit mantissa,
    fp32 range): the fp32 parts of a bf16-autocast step and any --precision fp32 run go
    several times faster on Ampere and later. Nothing changes on the CPU, so CPU runs stay
    bit for bit what they were. Returns whether it was switched on."""
    if torch.device(device).type != "cuda":
        return False
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    return True


@contextlib.contextmanager
def _stop_signals_blocked():
    """Block SIGINT and SIGTERM in this thread for the body. Threads started inside (the
    process group's communication threads) keep them blocked for good, so the kernel hands
    a Ctrl-C or a scheduler's SIGTERM to the main thread, where `jobs.StopSignals` handles
    it, and never interrupts a system call in the middle of a collective."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _leave_process_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def wrap_model(model: nn.Module, ctx: DistContext, *, compile: bool = False, find_unused_parameters: bool = False):
    """(forward callable, DDP module or None): DDP across processes, then torch.compile."""
    ddp = None
    net: Any = model
    if ctx.world_size > 1:
        ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        ddp = net = nn.parallel.DistributedDataParallel(
            model, device_ids=ids, find_unused_parameters=find_unused_parameters
        )
    if compile:
        net = _CompiledWithFallback(net)
    return net, ddp


class _CompiledWithFallback:
    """torch.compile compiles on the first call; if that fails, warn once and run eagerly."""

    def __init__(self, module: nn.Module):
        self.eager = module
        try:
            self.compiled = torch.compile(module)
        except Exception as err:  # e.g. no compiler support on this platform
            self._fall_back(err)

    def _fall_back(self, err: Exception) -> None:
        warnings.warn(f"torch.compile failed ({type(err).__name__}: {err}); training continues in eager mode.")
        self.compiled = None

    def __call__(self, **batch):
        if self.compiled is not None:
            try:
                return self.compiled(**batch)
            except Exception as err:
                self._fall_back(err)
        return self.eager(**batch)
