"""Training-step speed and memory of bertedu against `transformers.BertForPreTraining`.

One process, one run, the same machine: for each preset and sequence length this builds
one bertedu `BertForPreTraining`, its transformers twin with identical weights
(`bertedu.interop.to_hf`, attn_implementation="sdpa"), one random pretraining batch and
the same AdamW for both, then times full training steps

    optimizer.zero_grad(); loss = model(**batch).loss; loss.backward(); optimizer.step()

(dropout on, as in real training; `torch.cuda.synchronize()` around each step on CUDA)
and reports the median step time as tokens/s and as a ratio to transformers.

Variants of bertedu (transformers is always measured, as the baseline):

    readable     attention kernel "reference" (the formula written out), no fast path
    sdpa         attention kernel "sdpa" (torch.nn.functional.scaled_dot_product_attention)
    fast         sdpa + bertedu.model.fast.set_fast_path(model, unpad=True, sparse_mlm=True)
    fast-padded  the same, with set_fast_path(model, ..., attention="padded")

Precision is the same for every row of a run (--precision; bf16 autocast on CUDA by
default, fp32 on CPU). --compile wraps both models in torch.compile (eager on failure).

Batches. The main rows use full-length sequences (no padding), so real tokens = padded
tokens = B*T and tokens/s means either. The padding rows use a ragged batch of the same
(B, T) shape whose real lengths are drawn uniformly from the integers in
[ceil(T * ragged_min_frac), T] (default [T/4, T], seeded; expected padding 37.5%), right
padded; there tokens/s counts real tokens only (attention_mask.sum()).
Labels: each real position is labelled with probability 0.15 (its own token id), -100
elsewhere; next_sentence_label is a fair coin.

Formulas (printed with the results as well):

    tokens/s       = real tokens in the batch / median step time
    ratio          = bertedu tokens/s / transformers tokens/s  (same batch, same precision)
    training FLOPs per step (model FLOPs: what the model needs, whatever the kernels do)
                   = 6 * N_layers * n_tokens            encoder matmuls, forward + backward
                   + 12 * L * D * sum_i(T_i ** 2)        attention scores QK^T and probs@V
                   + 6 * (D*D + D*V) * M                 MLM head at the M labelled positions
      N_layers = every parameter of the L encoder layers (weights, biases, LayerNorms);
      T_i the real length of sequence i, n_tokens = sum_i T_i; D hidden, V vocabulary.
      Embedding lookups, the pooler and the NSP head (< 0.1% at BERT-BASE) are left out.
      A forward is 2 FLOPs per multiply-add, a backward twice a forward (hence 6 and 12).
      The same count is used for bertedu and transformers, so MFU ratios = speed ratios;
      work spent on padding or on unlabelled MLM positions earns no FLOPs.
    MFU            = FLOPs per step / (median step time * peak), peak = the GPU's dense
                     bf16 tensor-core FLOP/s (H100 SXM / H200: 989e12; --peak-tflops)
    activation memory (every device): bytes of the distinct storages autograd saves for
                     backward during one training forward, parameters excluded
                     (torch.autograd.graph.saved_tensors_hooks)
    peak memory (CUDA): torch.cuda.max_memory_allocated over the timed steps (weights,
                     gradients, AdamW state and activations together)
    padding turned into speed = (t_full - t_ragged) / (t_full * padding_fraction)
                     t_full: step time on the full batch of the same (B, T) shape,
                     t_ragged: on the ragged batch; 1.0 = every padded token cost nothing,
                     0.0 = padding cost as much as real tokens.

With --notebooks it also times `python -m pytest notebooks/NN.ipynb` (the project's
pytest options include --nbval) once per notebook, in a subprocess: the course's CPU budget.

Imports only torch, transformers, bertedu and the standard library.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import glob
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
try:
    import bertedu  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(REPO))
    import bertedu  # noqa: F401

from bertedu import BertConfig, BertForPreTraining
from bertedu.model.constants import IGNORE_INDEX
from bertedu.model.fast import set_fast_path
from bertedu.interop import to_hf
from bertedu.training.loop import param_groups as bertedu_param_groups
from bertedu.utils import cpu_has_bf16, peak_bf16_flops

BASELINE = "transformers"
VARIANTS = ("readable", "sdpa", "fast", "fast-padded")
MLM_PROBABILITY = 0.15
# AdamW as bertedu.training.loop.TrainConfig (BERT's recipe); identical for both models.
ADAMW = dict(lr=1e-4, betas=(0.9, 0.999), eps=1e-6)
WEIGHT_DECAY = 0.01

FORMULAS = {
    "tokens_per_s": "real tokens in the batch (attention_mask.sum()) / median step time; "
                    "main rows are full-length, so real = padded = B*T",
    "ratio": "bertedu tokens/s / transformers tokens/s on the same batch and precision",
    "flops_per_step": "6*N_layers*n_tokens + 12*L*D*sum_i(T_i^2) + 6*(D*D + D*V)*M; N_layers = "
                      "all parameters of the L encoder layers, T_i real lengths, n_tokens = sum T_i, "
                      "M labelled MLM positions",
    "mfu": "flops_per_step / (median step time * peak bf16 dense tensor FLOP/s)",
    "act_mib": "distinct storages saved for backward in one training forward, parameters "
               "excluded (saved_tensors_hooks), MiB",
    "peak_mib": "torch.cuda.max_memory_allocated over the timed steps, MiB (CUDA only)",
    "padding_to_speed": "(t_full - t_ragged) / (t_full * padding_fraction), same (B, T)",
}


# ---- the FLOP count --------------------------------------------------------------------
def encoder_layer_params(config: BertConfig) -> int:
    """Parameters of the L encoder layers: 4 (D x D) attention projections, D -> I -> D
    feed-forward, their biases, two LayerNorms (weight and bias) per layer."""
    D, I, L = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    per_layer = 4 * (D * D + D) + (D * I + I) + (I * D + D) + 2 * (2 * D)
    return L * per_layer


def training_flops(config: BertConfig, lengths, num_labelled: int) -> int:
    """Model FLOPs of one training step (forward + backward) on sequences of real `lengths`.

        6 * N_layers * sum(T_i) + 12 * L * D * sum(T_i^2) + 6 * (D*D + D*V) * M
    """
    lengths = [int(t) for t in lengths]
    D, L, V = config.hidden_size, config.num_hidden_layers, config.vocab_size
    dense = 6 * encoder_layer_params(config) * sum(lengths)
    attention = 12 * L * D * sum(t * t for t in lengths)
    mlm_head = 6 * (D * D + D * V) * int(num_labelled)
    return dense + attention + mlm_head


def peak_flops(device_name: str) -> float | None:
    """The GPU's dense bf16 peak (bertedu.utils.PEAK_BF16_FLOPS, matched as whole words)."""
    return peak_bf16_flops(device_name)


# ---- batches ---------------------------------------------------------------------------
def make_batch(config: BertConfig, batch_size: int, seq_len: int, lengths=None, seed: int = 0) -> dict:
    """A right-padded random pretraining batch. lengths None: every sequence is full."""
    g = torch.Generator().manual_seed(seed)
    B, T = batch_size, seq_len
    if lengths is None:
        lengths = torch.full((B,), T, dtype=torch.long)
    lengths = torch.as_tensor(lengths, dtype=torch.long)
    positions = torch.arange(T)[None, :]
    attention_mask = (positions < lengths[:, None]).long()  # (B, T), real tokens first
    # ids above the special tokens of a BERT vocabulary ([PAD]=0 ... [MASK]=103 in the
    # uncased one); which ids does not matter for speed, only that they are not padding.
    input_ids = torch.randint(1000, config.vocab_size, (B, T), generator=g)
    input_ids = input_ids.masked_fill(attention_mask == 0, config.pad_token_id)
    token_type_ids = ((positions >= (lengths[:, None] // 2)) & (attention_mask == 1)).long()  # segment B
    selected = (torch.rand(B, T, generator=g) < MLM_PROBABILITY) & (attention_mask == 1)
    selected[0, 1] = True  # at least one labelled position
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    next_sentence_label = torch.randint(0, 2, (B,), generator=g)
    return dict(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                labels=labels, next_sentence_label=next_sentence_label)


def ragged_lengths(batch_size: int, seq_len: int, min_frac: float, seed: int = 1) -> torch.Tensor:
    """Real lengths uniform over the integers [ceil(T * min_frac), T], seeded."""
    g = torch.Generator().manual_seed(seed)
    low = max(2, math.ceil(seq_len * min_frac))
    return torch.randint(low, seq_len + 1, (batch_size,), generator=g)


def batch_stats(batch: dict) -> dict:
    mask = batch["attention_mask"]
    lengths = mask.sum(dim=1).tolist()
    real, padded = int(mask.sum()), mask.numel()
    return dict(lengths=lengths, real_tokens=real, padded_tokens=padded,
                padding_fraction=1 - real / padded,
                labelled=int((batch["labels"] != IGNORE_INDEX).sum()))


# ---- models and optimiser --------------------------------------------------------------
def fused_adamw_supported(device: torch.device) -> bool:
    """Whether this PyTorch runs AdamW(fused=True) on `device` (tried, not assumed)."""
    try:
        p = torch.nn.Parameter(torch.zeros(2, device=device))
        p.grad = torch.ones_like(p)
        torch.optim.AdamW([p], fused=True).step()
        return True
    except (RuntimeError, TypeError, ValueError):
        return False


def param_groups(model: torch.nn.Module) -> list[dict]:
    """bertedu.training.loop.param_groups (no decay on biases and LayerNorm), for either model."""
    return [{k: v for k, v in g.items() if k != "names"} for g in bertedu_param_groups(model, WEIGHT_DECAY)]


def build(variant: str, pristine: BertForPreTraining, device: torch.device, fast_options: dict):
    """A fresh copy of the pristine weights as `variant`, in train mode, on `device`."""
    if variant == BASELINE:
        model = to_hf(pristine)
        if hasattr(model, "set_attn_implementation"):
            model.set_attn_implementation("sdpa")
        else:  # older transformers
            model.config._attn_implementation = "sdpa"
    else:
        model = copy.deepcopy(pristine)  # deepcopy keeps the decoder tied to the embeddings
        model.bert.set_attn_implementation("reference" if variant == "readable" else "sdpa")
        if variant.startswith("fast"):
            options = dict(fast_options)
            if variant == "fast-padded":
                options["attention"] = "padded"
            set_fast_path(model, **options)
    return model.to(device).train()


# ---- measurements ----------------------------------------------------------------------
def autocast(device: torch.device, precision: str):
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def activation_bytes(model, batch: dict, device: torch.device, precision: str) -> int:
    """Bytes of the distinct storages autograd keeps for backward (parameters excluded)."""
    param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        try:
            s = t.untyped_storage()
            if s.data_ptr() not in param_ptrs:
                seen[s.data_ptr()] = s.nbytes()
        except (RuntimeError, NotImplementedError, TypeError):  # tensors without one storage
            if hasattr(t, "values"):  # nested (jagged) tensors
                pack(t.values())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast(device, precision):
        loss = model(**batch).loss
    del loss
    return sum(seen.values())


@torch.no_grad()
def eval_loss(model, batch: dict) -> float:
    """Loss in eval mode, fp32, dropout off: the same weights must give the same number."""
    model.eval()
    try:
        return float(model(**batch).loss)
    finally:
        model.train()


def time_steps(model, optimizer, batch, device, precision, warmup: int, steps: int):
    def step():
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, precision):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        return loss

    for _ in range(warmup):
        loss = step()
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(steps):
        sync(device)
        t0 = time.perf_counter()
        loss = step()
        sync(device)
        times.append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    return times, float(loss.detach()), peak


def measure(variant, pristine, batch_cpu, args, device, fused, fast_options, log) -> dict:
    """One row: build the model, check its loss, measure activations, time the steps."""
    model = build(variant, pristine, device, fast_options)
    batch = {k: v.to(device) for k, v in batch_cpu.items()}
    row = dict(variant=variant)
    row["eval_loss"] = eval_loss(model, batch)
    row["act_bytes"] = activation_bytes(model, batch, device, args.precision)
    optimizer = torch.optim.AdamW(param_groups(model), **ADAMW, fused=True if fused else None)
    runner, row["compiled"] = model, False
    if args.compile:
        try:
            runner = torch.compile(model, backend=args.compile_backend)
            # compilation happens on the first call: do it here, so a failure falls back
            time_steps(runner, optimizer, batch, device, args.precision, warmup=1, steps=0)
            row["compiled"] = True
        except Exception as err:  # noqa: BLE001 - any compiler error means: run eager
            log(f"  torch.compile failed for {variant} ({type(err).__name__}: {str(err)[:200]}); "
                "falling back to eager")
            runner = model
    times, last_loss, peak = time_steps(runner, optimizer, batch, device, args.precision,
                                        args.warmup, args.steps)
    row.update(step_s=statistics.median(times), step_s_all=times, train_loss=last_loss,
               peak_bytes=peak)
    del runner, model, optimizer, batch
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return row


# ---- the run ---------------------------------------------------------------------------
def default_batch_size(device: torch.device, preset: str, seq_len: int) -> int:
    """CPU: 2048 tokens per step (16 x 128, 4 x 512). CUDA: 16384 tokens per step
    (128 x 128, 32 x 512) for base and smaller, 8192 for large; the usual BERT-BASE batches."""
    tokens = 2048 if device.type == "cpu" else (8192 if preset == "large" else 16384)
    return max(1, tokens // seq_len)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="default: cuda if available, else cpu")
    p.add_argument("--presets", default=None, help="comma list; default tiny,mini on CPU, base on CUDA")
    p.add_argument("--seq-lens", default="128,512", help="comma list (default 128,512)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="default: 2048 tokens per step on CPU (16 at 128, 4 at 512), "
                        "16384 on CUDA (128 at 128, 32 at 512)")
    p.add_argument("--steps", type=int, default=None, help="timed steps (default CPU 10, CUDA 20)")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps first (default CPU 2, CUDA 5)")
    p.add_argument("--variants", default="readable,sdpa,fast",
                   help=f"bertedu variants, comma list of {','.join(VARIANTS)}; transformers always runs")
    p.add_argument("--precision", choices=("fp32", "bf16"), default=None,
                   help="all rows alike; default bf16 autocast on CUDA, fp32 on CPU")
    p.add_argument("--fast-options", default="unpad,sparse_mlm",
                   help="set_fast_path options turned on for the fast variants (default unpad,sparse_mlm)")
    p.add_argument("--ragged", action=argparse.BooleanOptionalAction, default=True,
                   help="padding rows on a ragged batch (default on)")
    p.add_argument("--ragged-min-frac", type=float, default=0.25,
                   help="ragged lengths uniform in [ceil(T*f), T] (default 0.25)")
    p.add_argument("--ragged-variants", default="fast,transformers",
                   help="which models get a padding row (default fast,transformers)")
    p.add_argument("--compile", action="store_true", help="torch.compile both models (eager if it fails)")
    p.add_argument("--compile-backend", default="inductor")
    p.add_argument("--peak-tflops", type=float, default=None, help="override the GPU's bf16 dense peak")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (CPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--time-budget-s", type=float, default=None,
                   help="skip the measurements left once this much wall time has passed")
    p.add_argument("--notebooks", nargs="?", const="all", default=None,
                   help="also time `pytest NOTEBOOK` per notebook: 'all' or a comma list of "
                        "numbers/paths (e.g. 03,06)")
    p.add_argument("--skip-models", action="store_true", help="only the notebook timings")
    p.add_argument("--json", default=None, help="write every number here (rewritten after each row)")
    p.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                   help="print one table from earlier --json files and exit")
    p.add_argument("--prepend", nargs="+", default=[], metavar="JSON",
                   help="earlier --json files whose rows go above this run's in the final table")
    return p.parse_args(argv)


def settings(args) -> tuple[torch.device, list[str], list[int], list[str], dict]:
    """Resolve the command line's defaults (they depend on the device) and check it:
    (device, presets, sequence lengths, variants besides the baseline, fast-path options)."""
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda, but torch.cuda.is_available() is False")
    if args.threads:
        torch.set_num_threads(args.threads)
    args.precision = args.precision or ("bf16" if device.type == "cuda" else "fp32")
    args.steps = args.steps if args.steps is not None else (20 if device.type == "cuda" else 10)
    args.warmup = args.warmup if args.warmup is not None else (5 if device.type == "cuda" else 2)
    presets = [s for s in (args.presets or ("base" if device.type == "cuda" else "tiny,mini")).split(",") if s]
    seq_lens = [int(s) for s in args.seq_lens.split(",") if s]
    if args.steps < 1:
        raise SystemExit("--steps must be at least 1")
    variants = [v for v in args.variants.split(",") if v and v != BASELINE]
    for v in variants:
        if v not in VARIANTS:
            raise SystemExit(f"unknown variant {v!r}; choose from {', '.join(VARIANTS)}")
    fast_options = {k: True for k in args.fast_options.split(",") if k}
    return device, presets, seq_lens, variants, fast_options


def run_meta(args, device: torch.device, device_name: str, fused: bool, fast_options: dict, peak) -> dict:
    """What a result file says about how it was measured."""
    import transformers

    return dict(
        command=" ".join([Path(sys.executable).name, *sys.argv]),
        device=device.type, device_name=device_name, torch=torch.__version__,
        transformers=transformers.__version__, python=platform.python_version(),
        cpu_count=os.cpu_count(), threads=torch.get_num_threads(), precision=args.precision,
        cpu_capability=torch.backends.cpu.get_cpu_capability(),
        cpu_bf16=cpu_has_bf16(),
        adamw=dict(ADAMW, weight_decay=WEIGHT_DECAY, fused=fused,
                   note="same for both models; no decay on biases and LayerNorm"),
        dropout="on (config defaults: hidden 0.1, attention 0.1), both models",
        steps=args.steps, warmup=args.warmup, compile=args.compile,
        fast_options=fast_options, peak_flops=peak,
        ragged=f"lengths uniform over integers [ceil(T*{args.ragged_min_frac}), T], seeded, right padded",
        formulas=FORMULAS, started=time.strftime("%Y-%m-%d %H:%M:%S"),
    )


class Bench:
    """One run's state: the settings, the result so far (saved after each row), the time budget."""

    def __init__(self, args, device: torch.device, fast_options: dict):
        self.args, self.device, self.fast_options = args, device, fast_options
        self.device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else (
            platform.processor() or platform.machine())
        self.peak = args.peak_tflops * 1e12 if args.peak_tflops else (
            peak_flops(self.device_name) if device.type == "cuda" else None)
        self.fused = fused_adamw_supported(device)
        self.result = dict(meta=run_meta(args, device, self.device_name, self.fused, fast_options, self.peak),
                           rows=[], padding=[], notebooks=[], skipped=[])
        self.start = time.perf_counter()

    @staticmethod
    def log(msg):
        print(msg, flush=True)

    def save(self):
        if self.args.json:
            Path(self.args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(self.args.json).write_text(json.dumps(self.result, indent=1))

    def out_of_time(self, what) -> bool:
        budget = self.args.time_budget_s
        if budget is not None and time.perf_counter() - self.start > budget:
            self.result["skipped"].append(dict(what=what, why=f"time budget {budget:.0f} s spent"))
            self.log(f"  skipped {what}: time budget spent")
            return True
        return False

    def measure(self, what, variant, pristine, batch):
        return guarded(measure, what, self.result, self.log, variant, pristine, batch, self.args, self.device,
                       self.fused, self.fast_options, self.log)

    def full_rows(self, pristine, config, preset: str, T: int, B: int, variants: list[str]) -> None:
        """Every variant's training step on B full sequences of T tokens, against the baseline's."""
        full = make_batch(config, B, T, seed=self.args.seed)
        stats = batch_stats(full)
        flops = training_flops(config, stats["lengths"], stats["labelled"])
        base_row = None
        for variant in [BASELINE, *variants]:
            what = f"{preset} T={T} {variant}"
            row = None if self.out_of_time(what) else self.measure(what, variant, pristine, full)
            if row is None:
                continue
            row.update(preset=preset, seq_len=T, batch_size=B, precision=self.args.precision,
                       real_tokens=stats["real_tokens"], padded_tokens=stats["padded_tokens"], flops_per_step=flops)
            finish_row(row, self.peak)
            if variant == BASELINE:
                base_row = row
            if base_row is not None:
                row["ratio"] = row["tokens_per_s"] / base_row["tokens_per_s"]
                row["loss_diff"] = abs(row["eval_loss"] - base_row["eval_loss"])
                if row["loss_diff"] > 1e-3 * max(1.0, abs(base_row["eval_loss"])):
                    self.log(f"  WARNING: {variant} eval loss {row['eval_loss']:.6f} differs from "
                             f"transformers' {base_row['eval_loss']:.6f}")
            self.result["rows"].append(row)
            self.log(f"  {preset:>5} T={T:<4} B={B:<4} {variant:<12} {row['tokens_per_s']:>12,.0f} tok/s"
                     f"  x{row.get('ratio', float('nan')):.2f}  act {row['act_bytes'] / 2**20:,.1f} MiB"
                     + (f"  MFU {row['mfu']:.1%}" if row.get("mfu") is not None else ""))
            self.save()

    def ragged_rows(self, pristine, config, preset: str, T: int, B: int, variants: list[str]) -> None:
        """The same on a ragged batch (right padded): how much of the padding each variant turns into speed."""
        args = self.args
        ragged = make_batch(config, B, T, lengths=ragged_lengths(B, T, args.ragged_min_frac, args.seed + 1),
                            seed=args.seed)
        stats = batch_stats(ragged)
        flops = training_flops(config, stats["lengths"], stats["labelled"])
        ragged_base = None
        for variant in variants:
            full_row = next((r for r in self.result["rows"] if r["preset"] == preset and r["seq_len"] == T
                             and r["variant"] == variant), None)
            what = f"{preset} T={T} {variant} ragged"
            row = None if full_row is None or self.out_of_time(what) else self.measure(what, variant, pristine, ragged)
            if row is None:
                continue
            row.update(preset=preset, seq_len=T, batch_size=B, precision=args.precision,
                       real_tokens=stats["real_tokens"], padded_tokens=stats["padded_tokens"],
                       padding_fraction=stats["padding_fraction"], flops_per_step=flops,
                       full_step_s=full_row["step_s"], full_tokens_per_s=full_row["tokens_per_s"])
            finish_row(row, self.peak)
            saved = row["full_step_s"] - row["step_s"]  # the time the padding cost the full batch's step
            row["padding_to_speed"] = saved / (row["full_step_s"] * row["padding_fraction"])
            if variant == BASELINE:
                ragged_base = row
            if ragged_base is not None:
                row["ratio"] = row["tokens_per_s"] / ragged_base["tokens_per_s"]
                row["loss_diff"] = abs(row["eval_loss"] - ragged_base["eval_loss"])
            self.result["padding"].append(row)
            self.log(f"  {preset:>5} T={T:<4} B={B:<4} {variant:<12} ragged ({stats['padding_fraction']:.0%} "
                     f"padding) {row['tokens_per_s']:>12,.0f} real tok/s, padding->speed "
                     f"{row['padding_to_speed']:.2f}")
            self.save()


def run(args) -> dict:
    device, presets, seq_lens, variants, fast_options = settings(args)
    bench = Bench(args, device, fast_options)
    bench.log(f"# bench: {device.type} ({bench.device_name}), torch {torch.__version__}, transformers "
              f"{bench.result['meta']['transformers']}, {torch.get_num_threads()} threads, precision {args.precision}, "
              f"AdamW fused={bench.fused}, compile={args.compile}")
    ragged_models = [m for m in args.ragged_variants.split(",") if m in variants or m == BASELINE]
    for preset in ([] if args.skip_models else presets):
        torch.manual_seed(args.seed)
        config = BertConfig.preset(preset)
        pristine = BertForPreTraining(config).train()
        for T in seq_lens:
            if T > config.max_position_embeddings:
                raise SystemExit(f"seq len {T} > max_position_embeddings {config.max_position_embeddings}")
            B = args.batch_size or default_batch_size(device, preset, T)
            bench.full_rows(pristine, config, preset, T, B, variants)
            if args.ragged:
                bench.ragged_rows(pristine, config, preset, T, B,
                                  [m for m in [BASELINE, *variants] if m in ragged_models])
        del pristine
    if args.notebooks:
        bench.result["notebooks"] = time_notebooks(args.notebooks, bench.log)
        bench.save()
    bench.result["meta"]["wall_s"] = time.perf_counter() - bench.start
    bench.save()
    return bench.result


def guarded(fn, what, result, log, *args):
    """fn(*args), or None with the error recorded: one failed row does not lose the rest."""
    try:
        return fn(*args)
    except Exception as err:  # noqa: BLE001 - e.g. CUDA out of memory, a kernel missing
        log(f"  FAILED {what}: {type(err).__name__}: {str(err)[:300]}")
        result["skipped"].append(dict(what=what, why=f"{type(err).__name__}: {str(err)[:300]}"))
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return None


def finish_row(row: dict, peak: float | None) -> None:
    row["tokens_per_s"] = row["real_tokens"] / row["step_s"]
    row["padded_tokens_per_s"] = row["padded_tokens"] / row["step_s"]
    row["mfu"] = row["flops_per_step"] / (row["step_s"] * peak) if peak else None
    row["achieved_tflops"] = row["flops_per_step"] / row["step_s"] / 1e12


def time_notebooks(which: str, log) -> list[dict]:
    """Wall time of `python -m pytest NOTEBOOK` (project options: --nbval) per notebook."""
    paths = sorted(glob.glob(str(REPO / "notebooks" / "*.ipynb")))
    if which != "all":
        wanted = [w.strip() for w in which.split(",") if w.strip()]
        paths = [p for p in paths if any(Path(p).name.startswith(w) or p.endswith(w) for w in wanted)]
    rows = []
    for path in paths:
        rel = str(Path(path).relative_to(REPO))
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", rel, "-q", "-p", "no:cacheprovider"],
                              cwd=REPO, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        tail = (proc.stdout.strip().splitlines() or [""])[-1]
        rows.append(dict(notebook=rel, wall_s=wall, returncode=proc.returncode, summary=tail))
        log(f"  {rel:<50} {wall:7.1f} s  rc={proc.returncode}  {tail}")
    return rows


# ---- the table -------------------------------------------------------------------------
def fmt_tok(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.1f}k"


def table(results: list[dict]) -> str:
    """The short summary: one line per measurement, padding rows, notebook times."""
    lines = []
    cuda = any(r["meta"]["device"] == "cuda" for r in results)
    for res in results:
        m = res["meta"]
        cpu = f" ({m['cpu_capability']}, bf16 instructions: {m['cpu_bf16']})" if "cpu_bf16" in m else ""
        lines.append(f"# {m['device']} {m['device_name']}{cpu} | torch {m['torch']} | transformers "
                     f"{m['transformers']} | {m['threads']} threads | AdamW fused={m['adamw']['fused']} | "
                     f"dropout on | compile={m['compile']} | {m['steps']} timed steps (median), "
                     f"{m['warmup']} warm-up | {m.get('wall_s', float('nan')):.0f} s")
    head = f"{'preset':<6} {'T':>4} {'B':>4} {'variant':<15} {'prec':<5} {'tok/s':>8} {'vs HF':>6} {'act MiB':>8}"
    if cuda:
        head += f" {'peak MiB':>9} {'MFU':>6}"
    rows = [r for res in results for r in res["rows"]]
    if rows:
        lines += ["", "training step, full-length batch (tok/s = real = padded tokens/s)", head]
        for r in rows:
            name = r["variant"] + ("+c" if r.get("compiled") else "")
            line = (f"{r['preset']:<6} {r['seq_len']:>4} {r['batch_size']:>4} {name:<15} {r['precision']:<5} "
                    f"{fmt_tok(r['tokens_per_s']):>8} {r.get('ratio', float('nan')):>5.2f}x "
                    f"{r['act_bytes'] / 2**20:>8.1f}")
            if cuda:
                peak = f"{r['peak_bytes'] / 2**20:>9.0f}" if r.get("peak_bytes") else f"{'-':>9}"
                mfu = f"{r['mfu']:>6.1%}" if r.get("mfu") is not None else f"{'-':>6}"
                line += f" {peak} {mfu}"
            lines.append(line)
    pads = [r for res in results for r in res["padding"]]
    if pads:
        lines += ["", "padding: ragged batch of the same (B, T) vs the full batch "
                      "(tok/s = real tokens/s; padding->speed = (t_full - t_ragged) / (t_full * pad))",
                  f"{'preset':<6} {'T':>4} {'B':>4} {'variant':<15} {'pad':>5} {'full tok/s':>10} "
                  f"{'ragged tok/s':>12} {'vs HF':>6} {'pad->speed':>10}" + (f" {'MFU':>6}" if cuda else "")]
        for r in pads:
            name = r["variant"] + ("+c" if r.get("compiled") else "")
            lines.append(f"{r['preset']:<6} {r['seq_len']:>4} {r['batch_size']:>4} {name:<15} "
                         f"{r['padding_fraction']:>5.0%} {fmt_tok(r['full_tokens_per_s']):>10} "
                         f"{fmt_tok(r['tokens_per_s']):>12} {r.get('ratio', float('nan')):>5.2f}x "
                         f"{r['padding_to_speed']:>10.2f}"
                         + ((f" {r['mfu']:>6.1%}" if r.get("mfu") is not None else f" {'-':>6}") if cuda else ""))
    nbs = [r for res in results for r in res["notebooks"]]
    if nbs:
        lines += ["", f"course CPU budget: `pytest NOTEBOOK` wall time ({results[0]['meta']['cpu_count']} CPUs)",
                  f"{'notebook':<50} {'seconds':>8} result"]
        lines += [f"{r['notebook']:<50} {r['wall_s']:>8.1f} {'pass' if r['returncode'] == 0 else 'FAIL'}"
                  for r in nbs]
        lines.append(f"{'total':<50} {sum(r['wall_s'] for r in nbs):>8.1f}")
    skipped = [s for res in results for s in res["skipped"]]
    if skipped:
        lines += ["", "skipped: " + "; ".join(f"{s['what']} ({s['why']})" for s in skipped)]
    if cuda:
        peak = next((res["meta"]["peak_flops"] for res in results if res["meta"].get("peak_flops")), None)
        lines += ["", "MFU = (6*N_layers*tokens + 12*L*D*sum T_i^2 + 6*(D^2+D*V)*M) / (step time * "
                      + (f"{peak / 1e12:.0f} TFLOP/s bf16 dense peak)" if peak else "peak: unknown GPU, give --peak-tflops)")]
    if rows or pads:
        lines.append("act MiB: storages saved for backward in one forward (parameters excluded); "
                     "+c: torch.compile; vs HF: tok/s over transformers' on the same batch")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.merge:
        results = [json.loads(Path(p).read_text()) for p in args.merge if Path(p).exists()]
        if not results:
            raise SystemExit(f"none of {args.merge} exists")
        print(table(results))
        return 0
    result = run(args)
    earlier = [json.loads(Path(p).read_text()) for p in args.prepend if Path(p).exists()]
    print()
    print(table([*earlier, result]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
