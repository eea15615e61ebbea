"""What a training run is given and where it stands: shared by the loop, its batches and its
progress bar (`training/loop.py`, `training/batches.py`, `training/progress.py`), so none of
them imports another for a type.

    TrainConfig   everything a run needs besides the model and the data (a frozen dataclass;
                  `PretrainConfig` and `FinetuneConfig` extend it, every field is a flag)
    TrainState    where a run is: saved in every checkpoint, so a resumed run picks up there
    TrainResult   what `train()` returns
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

from ..utils import PRECISIONS, resolve_device, setting


@dataclass(frozen=True)
class TrainConfig:
    """Everything a run needs besides the model and the data. Variants: `dataclasses.replace`.

    The run stops at the first budget reached: steps, epochs, max_tokens (real tokens,
    padding not counted) or time_budget (seconds of wall clock, so not reproducible). With
    max_tokens or time_budget the learning-rate schedule follows the fraction of the budget
    used, so warm-up must then be given as warmup_ratio. `PretrainConfig` and
    `FinetuneConfig` extend this class, so every field is also a command-line flag.
    """

    # AdamW (BERT: lr 1e-4, betas (0.9, 0.999), eps 1e-6, weight decay 0.01)
    lr: float = setting(1e-4, "peak learning rate of AdamW (BERT-BASE: 1e-4)")
    weight_decay: float = setting(0.01, "AdamW weight decay, never applied to biases and LayerNorm")
    betas: tuple[float, float] = setting((0.9, 0.999), "AdamW's beta1 and beta2")
    eps: float = setting(1e-6, "AdamW's epsilon (BERT: 1e-6)")
    max_grad_norm: Optional[float] = setting(1.0, "clip the global gradient norm to this; None: no clipping "
                                                  "(the norm is still logged)")
    warmup_steps: int = setting(0, "steps of linear learning-rate warm-up before the linear decay to 0 "
                                   "(needs a step budget); above 0 it is used instead of warmup_ratio")
    warmup_ratio: Optional[float] = setting(None, "warm-up as a fraction of the budget, instead of warmup_steps")
    warmup_offset: int = setting(0, "updates the warm-up counts as made before the first one: 0 is BERT's "
                                    "schedule (the first update's learning rate is 0); 1 gives the first update "
                                    "1/warmup of the peak and the last warm-up update the peak (the minilm-mlm "
                                    "recipe's schedule); needs a step budget")
    # budget: the first one reached stops the run (at least one is needed)
    steps: Optional[int] = setting(None, "stop after this many optimiser steps")
    epochs: Optional[float] = setting(None, "stop after this many passes over the training data")
    max_tokens: Optional[int] = setting(None, "stop after this many real (non-padding) training tokens")
    time_budget: Optional[float] = setting(None, "stop after this much wall-clock time, in seconds (on the "
                                                 "command line also with a unit: 90s, 45m, 2h)")
    # batches
    batch_size: int = setting(32, "examples per micro-batch, per process")
    grad_accum_steps: int = setting(1, "micro-batches per optimiser step; the global batch is batch_size x "
                                       "processes x grad_accum_steps")
    num_workers: Optional[int] = setting(None, "DataLoader worker processes preparing batches; None: 0 on the "
                                               "CPU, min(8, CPU cores) on CUDA")
    seed: int = setting(0, "seed of every random draw: initialisation, dropout, data order, masks")
    # hardware
    device: Optional[str] = setting(None, "cpu, cuda or cuda:N; None: this process's GPU when there is one "
                                            "and BERTEDU_SCALE is not cpu")
    precision: str = setting("fp32", "fp32, bf16 (autocast: matmuls in bf16, on CUDA or the CPU) or auto (bf16 on "
                                               "CUDA, else fp32)")
    compile: bool = setting(False, "torch.compile the model (falls back to eager if compilation fails)")
    fused_adamw: Optional[bool] = setting(None, "one fused AdamW kernel; None: fused on CUDA only")
    ddp_find_unused_parameters: bool = setting(False, "under torchrun, for models whose loss skips some weights")
    # bookkeeping (0 = only at the end of the run)
    out: Optional[str] = setting(None, "output folder for checkpoints and metrics; None: nothing written")
    log_every: int = setting(10, "log a metrics record every N steps")
    eval_every: int = setting(0, "evaluate on held-out data every N steps; 0: at the end only")
    save_every: int = setting(0, "write a checkpoint every N steps; 0: at the end only")
    keep_checkpoints: int = setting(1, "checkpoints kept in the output folder, the newest ones")
    eval_batch_size: Optional[int] = setting(None, "examples per evaluation batch; None: batch_size")
    progress: bool = setting(True, "show a progress bar (off in notebooks stored for nbval, and in logs)")

    def __post_init__(self) -> None:
        if not any(v is not None for v in (self.steps, self.epochs, self.max_tokens, self.time_budget)):
            raise ValueError("give a budget: steps, epochs, max_tokens or time_budget")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        for name in ("batch_size", "grad_accum_steps", "log_every", "keep_checkpoints"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        self._check_budget()
        self._check_lr()
        self._check_optimizer()
        if self.warmup_ratio is not None and not 0 <= self.warmup_ratio <= 1:
            raise ValueError(f"warmup_ratio must be in [0, 1], got {self.warmup_ratio}")
        if self.device is not None:
            resolve_device(self.device)  # a device this machine lacks fails here, before any data is read
        if self.warmup_offset not in (0, 1):
            raise ValueError(f"warmup_offset is 0 (BERT's warm-up) or 1 (the first update counted), "
                             f"got {self.warmup_offset}")
        if self.warmup_offset and (self.max_tokens is not None or self.time_budget is not None):
            raise ValueError("warmup_offset counts updates: it needs a step budget (steps or epochs), "
                             "not max_tokens or time_budget")
        if self.warmup_steps and self.steps is None and self.epochs is None:
            raise ValueError(
                "warmup_steps needs a step budget (steps or epochs) to place the decay; "
                "with max_tokens or time_budget give warmup_ratio instead"
            )

    def _check_budget(self) -> None:
        """Every budget given is something to train: a run of no steps would end at once and report nothing."""
        for name in ("steps", "max_tokens"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("epochs", "time_budget"):
            if getattr(self, name) is not None and not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("eval_every", "save_every"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or a number of steps, got {getattr(self, name)}")

    def _check_optimizer(self) -> None:
        if not self.weight_decay >= 0:
            raise ValueError(f"weight_decay must be 0 or more (BERT: 0.01), got {self.weight_decay}")
        if self.max_grad_norm is not None and not self.max_grad_norm >= 0:
            raise ValueError(f"max_grad_norm must be positive (or 0 / None: no clipping), got {self.max_grad_norm}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be 0 or more, got {self.warmup_steps}")
        if not (0 <= self.betas[0] < 1 and 0 <= self.betas[1] < 1) or not self.eps > 0:
            raise ValueError(f"AdamW needs betas in [0, 1) and a positive eps (BERT: 0.9 0.999, 1e-6), got betas "
                             f"{tuple(self.betas)} and eps {self.eps}")

    def _check_lr(self) -> None:
        if self.lr is None or not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")

    def train_config(self, **changes: Any) -> "TrainConfig":
        """The plain `TrainConfig` part of this config (of a subclass), with `changes`."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(TrainConfig)}
        return TrainConfig(**{**values, **changes})


@dataclass
class TrainState:
    """Where a run is: saved in every checkpoint, so a resumed run picks up exactly here."""

    step: int = 0  # optimiser updates done
    epoch: int = 0  # the data position: next global batch is batch_in_epoch of epoch
    batch_in_epoch: int = 0
    tokens_seen: int = 0  # real tokens (attention_mask.sum()) over all processes
    elapsed_s: float = 0.0


@dataclass
class TrainResult:
    step: int
    loss: Optional[float]  # the last step's training loss
    tokens_seen: int
    elapsed_s: float
    checkpoint: Optional[str]  # the last checkpoint written (or resumed from)
    records: list[dict] = field(default_factory=list)  # everything in metrics.jsonl
    eval: Optional[dict] = None  # the last evaluation
    stopped_by: str = ""  # "steps", "max_tokens", "time_budget", "stop_at_step"
