"""One training loop for pretraining and fine-tuning.

Introduced in the pretraining notebook; the fine-tuning notebooks reuse it unchanged.
`train(model, dataset, collate, TrainConfig(...))` takes

    model     any nn.Module whose forward(**batch) returns an object with `.loss`
              (BertForPreTraining adds .mlm_loss, .nsp_loss, .mlm_logits, .nsp_logits)
    dataset   a map-style torch Dataset of examples (anything `collate` understands)
    collate   collate(examples: list, generator: torch.Generator) -> dict[str, Tensor];
              any randomness (dynamic masking) must come from `generator`, which the loop
              seeds from (seed, step, micro-batch slot): that is what makes resuming exact.

and runs the recipe of Devlin et al. 2019 (appendix A.2):

    AdamW, no weight decay on biases and LayerNorm     param_groups()
    linear warm-up, then linear decay to 0             linear_schedule()
    gradient accumulation, gradient clipping           inside train()
    bf16 autocast on CUDA, optional torch.compile      TrainConfig.precision / .compile
    DistributedDataParallel under torchrun             setup_distributed()
    checkpoints that resume bit for bit                bertedu.training.checkpoint

Vocabulary of batches: a *micro-batch* is what one process runs forward at once
(`batch_size` examples); a *step* is one optimiser update, made from `grad_accum_steps`
micro-batches on each of `world_size` processes: the *global batch* of
batch_size * world_size * grad_accum_steps examples.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import time
import warnings
from pathlib import Path
from typing import Callable, Optional

import torch
import torch.distributed as dist
from torch import nn

from .batches import (
    Collate,
    batch_seed,
    count_tokens,
    global_batches,
    steps_in_epoch,
    to_device,
)
from .config import TrainConfig, TrainResult, TrainState
from .curves import METRICS_NAME, append_metrics, read_metrics  # noqa: F401 (read_metrics re-exported)
from .checkpoint import (
    DamagedCheckpointError,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from ..model.constants import IGNORE_INDEX
from .distributed import DistContext, setup_distributed, wrap_model
from ..errors import OutputFolderError, SettingError
from .jobs import StopSignals, TrainingInterrupted, run_lock, stop_signals
from .progress import ProgressBar
from ..utils import eval_mode, seed_everything
from ..utils import autocast as mixed_precision

log = logging.getLogger(__name__)


class TrainingDivergedError(RuntimeError):
    """The loss (or the gradient norm) became NaN or infinite."""

    def __init__(self, step: int, loss: float, grad_norm: float, checkpoint: Optional[str]):
        self.step, self.loss, self.grad_norm, self.checkpoint = step, loss, grad_norm, checkpoint
        kept = f"the last good checkpoint is {checkpoint}" if checkpoint else "no checkpoint had been written"
        super().__init__(
            f"training diverged at step {step}: loss {loss}, gradient norm {grad_norm}. "
            f"Nothing was saved for this step; {kept}. Try a lower lr, a longer warm-up, "
            "max_grad_norm=1.0, fp32 instead of bf16, or check the batch for bad labels."
        )


# ---- optimiser and schedule --------------------------------------------------------------
_NORM_TYPES = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._NormBase) + (
    (nn.RMSNorm,) if hasattr(nn, "RMSNorm") else ()
)


def param_groups(model: nn.Module, weight_decay: float,
                 peak_lrs: Optional[dict[str, float]] = None) -> list[dict]:
    """AdamW parameter groups: weight decay on weight matrices and embeddings only.

    Biases and normalisation weights (every LayerNorm, the embeddings' one included) get
    none: decaying a LayerNorm gain towards 0 would shrink the activations it is there to
    scale, and the original BERT excludes both ("LayerNorm", "bias"). A tied weight (the
    MLM decoder = word embeddings) appears once; a frozen one (requires_grad False) not at
    all. Each group lists its `names` for reading.

    peak_lrs: parameter-name prefix -> that part's own peak learning rate, e.g.
    {"mlm.": 2e-3} for a fresh MLM head on a pretrained encoder (the minilm-mlm recipe).
    Its parameters get groups of their own that carry it as `peak_lr`; the schedule scales
    it where the other groups follow the config's lr. Without peak_lrs: two groups, decay
    then no decay.
    """
    norm_params = {id(p) for m in model.modules() if isinstance(m, _NORM_TYPES) for p in m.parameters(recurse=False)}
    prefixes = list(peak_lrs or {})
    members: dict[tuple, list[tuple[str, nn.Parameter]]] = {}
    for name, p in model.named_parameters():  # named_parameters() skips tied duplicates
        if not p.requires_grad:
            continue
        prefix = next((k for k in prefixes if name.startswith(k)), None)
        no_decay = name.endswith("bias") or id(p) in norm_params
        members.setdefault((prefix, no_decay), []).append((name, p))
    groups = []
    for prefix, no_decay in [(None, False), (None, True)] + [(k, d) for k in prefixes for d in (False, True)]:
        named = members.get((prefix, no_decay), [])
        if prefix is not None and not named:
            continue
        group = {"params": [p for _, p in named], "names": [n for n, _ in named],
                 "weight_decay": 0.0 if no_decay else weight_decay}
        if prefix is not None:
            group["peak_lr"] = peak_lrs[prefix]
        groups.append(group)
    return groups


def make_optimizer(model: nn.Module, cfg: TrainConfig, device: torch.device,
                   peak_lrs: Optional[dict[str, float]] = None) -> torch.optim.AdamW:
    """AdamW over `param_groups`; fused (one kernel for every parameter, instead of a loop
    over parameter tensors) on a GPU, or wherever `cfg.fused_adamw` asks for it."""
    fused = device.type == "cuda" if cfg.fused_adamw is None else cfg.fused_adamw
    return torch.optim.AdamW(
        param_groups(model, cfg.weight_decay, peak_lrs), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, fused=fused or None
    )


def set_learning_rates(optimizer: torch.optim.Optimizer, lr: float, multiplier: float) -> None:
    """This step's rates: `lr` (the config's peak times the schedule's multiplier) for
    every group, except a group with its own `peak_lr`, which gets peak_lr * multiplier."""
    for group in optimizer.param_groups:
        group["lr"] = group["peak_lr"] * multiplier if "peak_lr" in group else lr


def linear_schedule(step: float, warmup_steps: float, total_steps: float, warmup_offset: int = 0) -> float:
    """Learning-rate multiplier: 0 -> 1 linearly over warmup_steps, then 1 -> 0 at total_steps.

    `step` is the number of updates already made (the update about to happen uses this
    value); floats work too, e.g. (fraction of budget used, warmup fraction, 1.0).
    warmup_offset 1 counts the update about to happen in the warm-up: (step + 1) / warmup,
    so the first update gets 1/warmup of the peak rather than BERT's 0 (the minilm-mlm
    recipe's schedule); the decay is the same.
    """
    if step < warmup_steps:
        return (step + warmup_offset) / warmup_steps
    span = total_steps - warmup_steps
    return max(0.0, (total_steps - step) / span) if span > 0 else 0.0


def clip_gradients(model: nn.Module, max_norm: Optional[float]) -> torch.Tensor:
    """Scale all gradients so their global L2 norm is at most max_norm; return the norm before."""
    params = [p for p in model.parameters() if p.grad is not None]
    return torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm else float("inf"))


def _lr_multiplier(cfg: TrainConfig, max_steps: Optional[int], state: TrainState) -> float:
    # warm-up: warmup_steps when given (above 0), else warmup_ratio of the budget
    by_steps = bool(cfg.warmup_steps) or cfg.warmup_ratio is None
    if cfg.max_tokens is None and cfg.time_budget is None:  # a step budget: the plain schedule
        warmup = cfg.warmup_steps if by_steps else cfg.warmup_ratio * max_steps
        return linear_schedule(state.step, warmup, max_steps, cfg.warmup_offset)
    # A token or time budget: the schedule runs on the fraction of the budget used.
    warmup = cfg.warmup_ratio if cfg.warmup_ratio is not None else 0.0
    if max_steps is not None and by_steps:
        warmup = cfg.warmup_steps / max_steps
    return linear_schedule(_budget_fraction(cfg, max_steps, state), warmup, 1.0)


def _budget_fraction(cfg: TrainConfig, max_steps: Optional[int], state: TrainState) -> float:
    fractions = []
    if max_steps is not None:
        fractions.append(state.step / max_steps)
    if cfg.max_tokens is not None:
        fractions.append(state.tokens_seen / cfg.max_tokens)
    if cfg.time_budget is not None:
        fractions.append(state.elapsed_s / cfg.time_budget)
    return min(1.0, max(fractions))


def _stop_reason(cfg: TrainConfig, max_steps: Optional[int], state: TrainState, stop_at_step: Optional[int]) -> str:
    if max_steps is not None and state.step >= max_steps:
        return "steps"
    if cfg.max_tokens is not None and state.tokens_seen >= cfg.max_tokens:
        return "max_tokens"
    if cfg.time_budget is not None and state.elapsed_s >= cfg.time_budget:
        return "time_budget"  # elapsed_s is averaged over processes, so all agree
    if stop_at_step is not None and state.step >= stop_at_step:
        return "stop_at_step"
    return ""


# ---- evaluation and metrics --------------------------------------------------------------
# (metric prefix, logits attribute of the output, label key of the batch)
_ACCURACIES = [("mlm", "mlm_logits", "labels"), ("nsp", "nsp_logits", "next_sentence_label"), ("", "logits", "labels")]


@torch.no_grad()
def evaluate(model: nn.Module, dataset, collate: Collate, batch_size: int = 32, seed: int = 0, *,
             device: Optional[torch.device] = None, precision: str = "fp32") -> dict[str, float]:
    """Held-out loss and accuracies, deterministic (collate's generator is seeded per batch).

    Returns loss (mean over batches, weighted by batch size), mlm_loss / nsp_loss when the
    model reports them, mlm_accuracy (argmax == label over positions whose label is not
    -100), nsp_accuracy, and accuracy for models returning `.logits` with `labels`.
    Under torch.distributed each process evaluates every world_size-th batch; the counts
    are summed, so all processes get the same numbers.
    """
    device = device or next(model.parameters()).device
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    sums = dict.fromkeys(_EVAL_SUMS, 0.0)
    autocast = mixed_precision(precision, device)
    with eval_mode(model):
        for b in range(rank, math.ceil(len(dataset) / batch_size), world):
            examples = [dataset[i] for i in range(b * batch_size, min((b + 1) * batch_size, len(dataset)))]
            batch = to_device(collate(examples, torch.Generator().manual_seed(batch_seed(seed, b, 0))), device)
            with autocast:
                out = model(**batch)
            _add_batch_counts(sums, out, batch, len(examples))
    if world > 1:
        t = torch.tensor([sums[n] for n in _EVAL_SUMS], dtype=torch.float64, device=device)
        dist.all_reduce(t)
        sums = dict(zip(_EVAL_SUMS, t.tolist()))
    n = max(sums["examples"], 1.0)
    result = {"examples": int(sums["examples"])}
    for name in ("loss", "mlm_loss", "nsp_loss"):
        if not math.isnan(sums[name]):
            result[name] = sums[name] / n
    for key in ("mlm_", "nsp_", ""):
        if sums[f"{key}total"] > 0:
            result[f"{key}accuracy"] = sums[f"{key}correct"] / sums[f"{key}total"]
    return result


_EVAL_SUMS = ("examples", "loss", "mlm_loss", "nsp_loss", "mlm_correct", "mlm_total",
              "nsp_correct", "nsp_total", "correct", "total")


def _add_batch_counts(sums: dict, out, batch: dict, n: int) -> None:
    """Add one batch's example count, size-weighted losses and accuracy counts to `sums`."""
    sums["examples"] += n
    for name in ("loss", "mlm_loss", "nsp_loss"):
        value = getattr(out, name, None)
        sums[name] += float(value) * n if value is not None else math.nan
    for prefix, logits_name, labels_name in _ACCURACIES:
        logits, labels = getattr(out, logits_name, None), batch.get(labels_name)
        if prefix == "mlm" and getattr(out, "mlm_labels", None) is not None:
            labels = out.mlm_labels  # the sparse MLM head scored the labelled positions only
        if logits is None or labels is None:
            continue
        labelled = labels != IGNORE_INDEX  # only labelled positions count
        hits = logits.argmax(-1)[labelled] == labels[labelled]
        key = f"{prefix}_" if prefix else ""
        sums[f"{key}correct"] += float(hits.sum())
        sums[f"{key}total"] += float(labelled.sum())


# ---- the loop ----------------------------------------------------------------------------
def train(
    model: nn.Module,
    dataset,
    collate: Collate,
    config: TrainConfig,
    *,
    eval_dataset=None,
    resume: bool = False,
    stop_at_step: Optional[int] = None,
    peak_lrs: Optional[dict[str, float]] = None,
    evaluator: Optional[Callable[[nn.Module], dict]] = None,
) -> TrainResult:
    """Train `model` on `dataset` as `config` says; see the module docstring for the contract.

    resume: continue from the latest checkpoint in config.out (start fresh if none); a
        damaged newest checkpoint is skipped, with a warning, for the newest intact one.
    stop_at_step: stop (and checkpoint) after this step although the budget runs on, to
        split one run over several sessions; the schedule is the full run's.
    peak_lrs: parameter-name prefix -> its own peak learning rate (`param_groups`).
    evaluator: evaluator(model) -> dict of held-out numbers, called where `eval_dataset`
        would be evaluated, instead of it (e.g. a fixed measure of its own masks and
        batches); the numbers are logged with the prefix eval_.
    Raises TrainingDivergedError on a NaN / infinite loss or gradient norm, before that step's update
    and any later checkpoint (on a GPU at the next read-back: `StepNumbers`);
    TrainingInterrupted on SIGINT / SIGTERM, after finishing the step and checkpointing it;
    OutputFolderError when another live process holds config.out (bertedu.training.jobs.run_lock).
    """
    with run_lock(config.out) if config.out else contextlib.nullcontext(), stop_signals() as stop:
        return _train(model, dataset, collate, config, resume, stop_at_step, stop, peak_lrs,
                      _held_out_measure(config, eval_dataset, collate, evaluator))


def _train(model, dataset, collate: Collate, config: TrainConfig, resume: bool, stop_at_step: Optional[int],
           stop: StopSignals, peak_lrs: Optional[dict[str, float]], held_out) -> TrainResult:
    cfg = config
    ctx = setup_distributed(cfg.device)
    model.to(ctx.device)
    optimizer = make_optimizer(model, cfg, ctx.device, peak_lrs)
    steps_per_epoch = steps_in_epoch(len(dataset), cfg, ctx.world_size)
    max_steps = _step_budget(cfg, steps_per_epoch)
    state, checkpoint, records = _start_or_resume(model, optimizer, cfg, ctx, len(dataset), resume)

    net, ddp = wrap_model(model, ctx, compile=cfg.compile, find_unused_parameters=cfg.ddp_find_unused_parameters)
    autocast = mixed_precision(cfg.precision, ctx.device)
    batches = global_batches(dataset, collate, cfg, ctx, state, steps_per_epoch)
    bar = ProgressBar(cfg, max_steps, state, enabled=cfg.progress and ctx.is_main)
    clock = time.perf_counter() - state.elapsed_s  # elapsed time carries over a resume
    window = (state.tokens_seen, state.elapsed_s)  # tokens and time at the last log line
    step_numbers = StepNumbers(cfg, ctx, optimizer, clock)
    loss, last_eval = None, None
    with bar:
        while not (stopped_by := _stop_reason(cfg, max_steps, state, stop_at_step)):
            # 1. this step's global batch (our share of it) and learning rate
            epoch, batch_in_epoch, micro_batches = next(batches)
            multiplier = _lr_multiplier(cfg, max_steps, state)
            lr = cfg.lr * multiplier
            set_learning_rates(optimizer, lr, multiplier)
            # 2. gradients of the mean loss over the global batch
            model.train()
            sums, parts, tokens = _forward_backward(net, ddp, micro_batches, autocast, ctx.device)
            # 3. clip, check for divergence, update (StepNumbers: what is read back from the device, and when)
            step_numbers.update(model, sums, state.step + 1, checkpoint)
            # 4. advance: the next global batch is the following one in the epoch order
            step_numbers.advance(state, tokens)
            state.epoch, state.batch_in_epoch = divmod(epoch * steps_per_epoch + batch_in_epoch + 1, steps_per_epoch)
            last = bool(_stop_reason(cfg, max_steps, state, stop_at_step))
            log, evaluate_now, save = _due(cfg, state.step, last, held_out is not None)
            signum = 0 if last else step_numbers.stop_signal(stop, log or evaluate_now or save)
            if log or evaluate_now or save or signum or not step_numbers.defer:  # this step's numbers
                loss, mlm_loss, nsp_loss, grad_norm = step_numbers.read(state, checkpoint)
            bar.update(state, loss)

            # 5. log, evaluate, checkpoint (process 0 writes; all take part)
            if log:
                numbers = {"loss": loss, "mlm_loss": mlm_loss if "mlm_loss" in parts else None,
                           "nsp_loss": nsp_loss if "nsp_loss" in parts else None, "lr": lr, "grad_norm": grad_norm}
                window = _log_step(cfg, ctx, state, epoch, numbers, window, records)
            if evaluate_now:
                last_eval = held_out(model, ctx.device)
                records.append(_log(cfg, ctx, {"step": state.step, **{f"eval_{k}": v for k, v in last_eval.items()}}))
            if save or (cfg.out and signum):
                checkpoint = _save(model, optimizer, cfg, ctx, state, len(dataset))
            if signum:
                raise TrainingInterrupted(signum, state.step, checkpoint if cfg.out else None)
    return TrainResult(step=state.step, loss=loss, tokens_seen=state.tokens_seen, elapsed_s=state.elapsed_s,
                       checkpoint=checkpoint, records=records, eval=last_eval, stopped_by=stopped_by)


def _due(cfg: TrainConfig, step: int, last: bool, can_evaluate: bool) -> tuple[bool, bool, bool]:
    """(log, evaluate, save): what this step's end does, by the config's intervals."""
    log = step % cfg.log_every == 0 or last
    evaluate_now = can_evaluate and ((cfg.eval_every and step % cfg.eval_every == 0) or last)
    save = bool(cfg.out) and ((cfg.save_every and step % cfg.save_every == 0) or last)
    return log, bool(evaluate_now), save


class StepNumbers:
    """The step's numbers on the host: read back from the device after every step, or, on a GPU, only
    where they are used (a log line, an evaluation, a checkpoint, the last step, a stop signal).

    Reading a number back waits for the GPU to finish the step, and the next step's work cannot be
    queued meanwhile; on the CPU it costs nothing. Deferred (`defer`: CUDA with the fused AdamW,
    and no token or time budget that several processes must agree on at every step), the check
    for divergence stays on the device: a step whose loss or gradient norm is NaN or infinite,
    and every step after it, makes no update (the fused AdamW's `found_inf`, as a GradScaler
    does), and the next read-back raises TrainingDivergedError naming that step, before any
    checkpoint is written. Otherwise the check is made before the update, at every step.
    """

    def __init__(self, cfg: TrainConfig, ctx: DistContext, optimizer: torch.optim.Optimizer, clock: float,
                 defer: Optional[bool] = None):
        self.cfg, self.ctx, self.optimizer, self.clock = cfg, ctx, optimizer, clock
        agree_each_step = ctx.world_size > 1 and (cfg.max_tokens is not None or cfg.time_budget is not None)
        fused = bool(optimizer.defaults.get("fused"))
        self.defer = (ctx.device.type == "cuda" and fused and not agree_each_step) if defer is None else defer
        if self.defer and not fused:
            raise SettingError("deferred read-back needs the fused AdamW (fused_adamw=True)")
        # deferred: [loss, mlm_loss, nsp_loss, grad_norm, tokens since the last read-back, first bad step, its loss,
        # its gradient norm]; read at once: the last step's [loss, mlm_loss, nsp_loss, grad_norm]
        self.kept = torch.zeros(8, device=ctx.device) if self.defer else None
        self.now: list = []

    def update(self, model: nn.Module, sums: torch.Tensor, step: int, checkpoint: Optional[str]) -> None:
        """Reduce the step's sums over processes, clip the gradients, check, and make the update."""
        sums[4] = time.perf_counter() - self.clock
        if self.ctx.world_size > 1:
            dist.all_reduce(sums)
            sums[[0, 1, 2, 4]] /= self.ctx.world_size
        norm = clip_gradients(model, self.cfg.max_grad_norm)  # the norm before clipping
        if self.defer:
            self._keep(sums, norm, step)
            self.optimizer.found_inf = (self.kept[5] > 0).float()  # 1: no update from the first bad step on
            try:
                self.optimizer.step()
            finally:
                del self.optimizer.found_inf
        else:
            loss, mlm_loss, nsp_loss, tokens, elapsed = sums.tolist()
            grad_norm = float(norm)
            if not (math.isfinite(loss) and math.isfinite(grad_norm)):
                raise TrainingDivergedError(step, loss, grad_norm, checkpoint)
            self.optimizer.step()
            self.now = [loss, mlm_loss, nsp_loss, grad_norm, tokens, elapsed]
        self.optimizer.zero_grad(set_to_none=True)

    def _keep(self, sums: torch.Tensor, norm: torch.Tensor, step: int) -> None:
        kept = self.kept
        kept[:3], kept[3] = sums[:3], norm
        kept[4] += sums[3]
        bad = ~(torch.isfinite(sums[0]) & torch.isfinite(norm)) & (kept[5] == 0)  # the first bad step only
        kept[5:] = torch.where(bad, torch.stack([torch.full_like(norm, step), sums[0], norm]), kept[5:])

    def advance(self, state: TrainState, tokens: int) -> None:
        """Count the step, its real tokens (`tokens`: this process's) and the elapsed time."""
        state.step += 1
        if not self.defer:  # the tokens of all processes, the time averaged over them
            state.tokens_seen += int(self.now[4])
            state.elapsed_s = self.now[5]
            return
        state.elapsed_s = time.perf_counter() - self.clock  # this process's clock
        if self.ctx.world_size == 1:  # otherwise the sum over processes arrives with the next read-back
            state.tokens_seen += tokens

    def stop_signal(self, stop: StopSignals, reading: bool) -> int:
        """SIGINT / SIGTERM received (0: none). Several processes agree on it through the device,
        so when read-back is deferred they ask only where the numbers are read anyway."""
        if self.defer and self.ctx.world_size > 1 and not reading:
            return 0
        return stop.requested(self.ctx)

    def read(self, state: TrainState, checkpoint: Optional[str]) -> list[float]:
        """[loss, mlm_loss, nsp_loss, grad_norm] of the last step; deferred: one read-back, which raises
        TrainingDivergedError if a step since the last one diverged."""
        if not self.defer:
            return self.now[:4]
        loss, mlm_loss, nsp_loss, grad_norm, tokens, bad_step, bad_loss, bad_norm = self.kept.tolist()
        if bad_step:
            raise TrainingDivergedError(int(bad_step), bad_loss, bad_norm, checkpoint)
        if self.ctx.world_size > 1:  # the tokens of all processes, summed since the last read-back
            state.tokens_seen += int(tokens)
        self.kept[4] = 0
        return [loss, mlm_loss, nsp_loss, grad_norm]


# ---- helpers of train() ------------------------------------------------------------------
def _held_out_measure(cfg: TrainConfig, eval_dataset, collate: Collate,
                      evaluator: Optional[Callable[[nn.Module], dict]]):
    """measure(model, device) -> held-out numbers: the evaluator's, or `evaluate` on
    eval_dataset with the training collate; None when there is neither."""
    if evaluator is not None:
        return lambda model, device: evaluator(model)
    if eval_dataset is None:
        return None
    return lambda model, device: evaluate(model, eval_dataset, collate, cfg.eval_batch_size or cfg.batch_size,
                                          cfg.seed, device=device, precision=cfg.precision)


def _log_step(cfg: TrainConfig, ctx: DistContext, state: TrainState, epoch: int, numbers: dict,
              window: tuple[int, float], records: list) -> tuple[int, float]:
    """Log one training record (the step's numbers, tokens and speed since the last one);
    return the new window (tokens, elapsed seconds) the next record's speed starts from."""
    speed = (state.tokens_seen - window[0]) / max(state.elapsed_s - window[1], 1e-9)
    records.append(_log(cfg, ctx, {"step": state.step, "epoch": epoch, **numbers, "tokens": state.tokens_seen,
                                   "tokens_per_s": speed, "elapsed": state.elapsed_s}))
    return state.tokens_seen, state.elapsed_s


def _step_budget(cfg: TrainConfig, steps_per_epoch: int) -> Optional[int]:
    """The step budget: steps, or the steps of `epochs` epochs, whichever comes first."""
    if cfg.epochs is None:
        return cfg.steps
    epoch_steps = math.ceil(cfg.epochs * steps_per_epoch)
    return epoch_steps if cfg.steps is None else min(cfg.steps, epoch_steps)


def _forward_backward(net, ddp, micro_batches: list[dict], autocast, device: torch.device):
    """Forward and backward each micro-batch of one step; the gradients add up in .grad.

    Each loss is divided by A = len(micro_batches), so the summed gradient is that of the
    mean over the micro-batches: the gradient of one batch A times larger when the loss is
    a mean over equal-sized pieces (for MLM: the same number of labelled tokens in every
    micro-batch; otherwise each micro-batch's tokens weigh a little differently).
    Returns (sums, parts, tokens): sums (5,) = loss, mlm_loss, nsp_loss (means over the
    micro-batches), real tokens, and a slot for the elapsed time; parts names the partial
    losses the model reported; tokens is this process's real tokens, counted on the host.
    """
    A = len(micro_batches)
    sums = torch.zeros(5, device=device)
    parts, tokens = set(), 0
    for i, batch in enumerate(micro_batches):
        tokens += count_tokens(batch)  # on the host: the batch has not moved yet
        sums[3] += count_tokens(batch)
        batch = to_device(batch, device)
        # DDP all-reduces gradients during backward; only the last micro-batch needs that
        sync = ddp is None or i == A - 1
        with contextlib.nullcontext() if sync else ddp.no_sync():
            with autocast:
                out = net(**batch)
            (out.loss / A).backward()
        sums[0] += out.loss.detach().float() / A
        for j, name in ((1, "mlm_loss"), (2, "nsp_loss")):
            if getattr(out, name, None) is not None:
                sums[j] += getattr(out, name).detach().float() / A
                parts.add(name)
    return sums, parts, tokens


def _start_or_resume(model, optimizer, cfg: TrainConfig, ctx: DistContext, num_examples: int, resume: bool):
    """(state, checkpoint path, earlier metrics records) for a fresh or a resumed run."""
    out_dir = Path(cfg.out) if cfg.out else None
    latest = latest_checkpoint(out_dir) if out_dir else None
    if resume and out_dir is None:
        raise ValueError("resume=True needs config.out, the directory holding the checkpoints")
    if latest is not None and not resume:
        raise OutputFolderError(
            f"{out_dir} already holds {latest.name}: pass resume=True to continue that run, "
            "or choose another out folder (or delete this one) to start afresh."
        )
    if latest is None:
        if resume:
            log.warning("resume=True but %s has no checkpoint: starting from step 0", out_dir)
        seed_everything(cfg.seed + ctx.rank)  # dropout differs between processes, as it should
        if out_dir and ctx.is_main:
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / METRICS_NAME).write_text("")
        return TrainState(), None, []

    saved = _load_newest_intact(out_dir, model, optimizer)
    latest = Path(saved["path"])
    global_batch = cfg.batch_size * ctx.world_size * cfg.grad_accum_steps
    if len(saved["rng"]) != ctx.world_size and saved["global_batch"] != global_batch:
        raise SettingError(
            f"{latest} was written by {len(saved['rng'])} processes (global batch {saved['global_batch']}); this "
            f"run has {ctx.world_size} (global batch {global_batch}): resume with torchrun --nproc-per-node "
            f"{len(saved['rng'])}, or change --batch-size / --grad-accum-steps to keep the global batch")
    if saved["global_batch"] != global_batch or saved["num_examples"] != num_examples:
        raise ValueError(
            f"{latest} was trained with a global batch of {saved['global_batch']} on {saved['num_examples']} "
            f"examples; this run has {global_batch} on {num_examples}. The data position only means "
            "something with the same data and global batch (batch_size x processes x grad_accum_steps)."
        )
    if len(saved["rng"]) == ctx.world_size:
        set_rng_state(saved["rng"][ctx.rank])
    else:
        warnings.warn(f"{latest} was written by {len(saved['rng'])} processes, this run has {ctx.world_size}: "
                      "the data order continues exactly, dropout's random numbers do not.")
        seed_everything(cfg.seed + ctx.rank + saved["step"])
    state = TrainState(**{k: saved[k] for k in ("step", "epoch", "batch_in_epoch", "tokens_seen", "elapsed_s")})
    # Keep the metrics up to the checkpoint; anything logged after it will be redone.
    metrics, records = out_dir / METRICS_NAME, []
    if ctx.is_main:  # only process 0 keeps (and rewrites) the metrics
        records = [r for r in read_metrics(metrics) if r["step"] <= state.step] if metrics.exists() else []
        metrics.write_text("".join(json.dumps(r) + "\n" for r in records))
    log.info("resumed from %s at step %d", latest, state.step)
    return state, str(latest), records


def _load_newest_intact(out_dir: Path, model, optimizer) -> dict:
    """Load the newest checkpoint in out_dir that matches its manifest; a damaged one (a
    full disk, a copy cut short) is skipped with a warning. Raises if none is intact."""
    damaged = []
    for path in reversed(list_checkpoints(out_dir)):
        try:
            saved = load_checkpoint(path, model, optimizer)  # verifies before loading anything
        except DamagedCheckpointError as err:
            warnings.warn(f"{err}; resuming from an older checkpoint instead")
            damaged.append(str(err))
            continue
        if damaged:
            log.warning("resuming from %s: the newer checkpoint(s) are damaged", path)
        return saved
    raise DamagedCheckpointError(f"no intact checkpoint in {out_dir}: " + "; ".join(damaged))


def _save(model, optimizer, cfg: TrainConfig, ctx: DistContext, state: TrainState, num_examples: int) -> str:
    """Checkpoint on process 0, with every process's RNG state (each has its own dropout)."""
    rngs = [rng_state()]
    if ctx.world_size > 1:
        rngs = [None] * ctx.world_size
        dist.all_gather_object(rngs, rng_state())
    path = Path(cfg.out) / f"checkpoint-{state.step}"
    if ctx.is_main:
        training_state = {
            **dataclasses.asdict(state),
            "global_batch": cfg.batch_size * ctx.world_size * cfg.grad_accum_steps,
            "num_examples": num_examples,
            "optimizer": optimizer.state_dict(),
            "rng": rngs,  # the schedule has no state of its own: it is a function of step/tokens/time
        }
        path = save_checkpoint(cfg.out, state.step, model, training_state, keep_last=cfg.keep_checkpoints,
                               extra_json={"train_config.json": dataclasses.asdict(cfg)})
    if ctx.world_size > 1:
        dist.barrier()  # nobody races ahead (or reads it) before it is complete
    return str(path)


def _log(cfg: TrainConfig, ctx: DistContext, record: dict) -> dict:
    """Append one record to out_dir/metrics.jsonl (process 0 only) and return it."""
    if cfg.out and ctx.is_main:
        append_metrics(cfg.out, record)
    return record
