"""What each rung of the speed ladder is worth, counted from the config. Introduced in notebook 12.

A forward pass of `BertForPreTraining` is, in floating-point operations, a handful of matrix
multiplies (2 FLOPs per multiply-add; lookups, GELU, LayerNorm and softmax are a few operations
per number and are left out, as `torch.utils.flop_counter.FlopCounterMode` leaves them out):

    dense layers   per layer and position: Q, K, V and the output projection (4 D x D) and the
                   feed-forward (D x I, I x D)                          2 L (4 D^2 + 2 D I)
    attention      per layer and sequence of length t: the scores Q K^T and the weighted sum
                   of the values (t x t x D multiply-adds each)         4 L D t^2
    MLM head       per position it runs on: the transform (D x D) and the decoder (D x V)
                                                                        2 (D^2 + D V)
    NSP head       per sequence: the pooler (D x D) and the 2-way classifier
                                                                        2 (D^2 + 2 D)

A training step costs about three forwards (the backward multiplies twice as much: once for the
gradient of the input, once for that of the weight), so the ratios below hold for a step too.

The rungs of notebook 12 (`RUNG_EFFECTS`): the sparse MLM head runs the head on the M labelled
positions instead of all B*T; unpadding runs the dense layers on the real tokens instead of B*T
(and, where attention runs on a jagged nested tensor, as on CUDA, attention on the real lengths);
SDPA, bf16 and compile remove no FLOPs: they make the same ones cheaper (fewer trips to memory,
faster arithmetic). The counts here are checked against `FlopCounterMode` in tests/test_flops.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model.config import BertConfig

COMPONENTS = ("dense layers", "attention", "MLM head", "NSP head")

RUNG_EFFECTS = {  # rung -> what it does to the work of a step
    "eager": "every matrix multiply on the padded batch; the MLM head on all B*T positions",
    "+ SDPA": "no FLOPs removed: one fused kernel, the T x T scores need not go through memory",
    "+ sparse MLM": "the MLM head on the M labelled positions only",
    "+ unpadding": "the dense layers on the real tokens only (attention too, where it runs nested)",
    "+ bf16": "no FLOPs removed: each multiply is cheaper where the chip has bf16 matrix units",
    "+ compile": "no FLOPs removed: the small elementwise operations fused into fewer passes",
}


def forward_flops(config: BertConfig, lengths: Sequence[int], padded_length: int, labelled: int, *,
                  sparse_mlm: bool = False, unpad: bool = False, unpadded_attention: bool = False) -> dict[str, int]:
    """FLOPs of one `BertForPreTraining` forward, by component (`COMPONENTS`).

    lengths: the real length of each of the B sequences; padded_length: T; labelled: M, the
    positions with an MLM label. sparse_mlm / unpad as in `bertedu.model.fast.set_fast_path`;
    unpadded_attention: attention also on the real lengths (the nested kernel on CUDA; on a
    CPU bertedu pads around attention, so it costs t = T for every sequence).
    """
    lengths = [int(t) for t in lengths]
    B, T = len(lengths), int(padded_length)
    D, I, L, V = config.hidden_size, config.intermediate_size, config.num_hidden_layers, config.vocab_size
    dense_positions = sum(lengths) if unpad else B * T
    attention_lengths = lengths if (unpad and unpadded_attention) else [T] * B
    mlm_positions = int(labelled) if sparse_mlm else B * T
    return {
        "dense layers": 2 * L * (4 * D * D + 2 * D * I) * dense_positions,
        "attention": 4 * L * D * sum(t * t for t in attention_lengths),
        "MLM head": 2 * (D * D + D * V) * mlm_positions,
        "NSP head": 2 * (D * D + 2 * D) * B,
    }


def ladder_flops(config: BertConfig, lengths: Sequence[int], padded_length: int, labelled: int, *,
                 unpadded_attention: bool = False) -> dict[str, dict[str, int]]:
    """`forward_flops` for every rung of `RUNG_EFFECTS`, each rung keeping the ones before it."""
    options = {"eager": {}, "+ SDPA": {}, "+ sparse MLM": dict(sparse_mlm=True)}
    for rung in ("+ unpadding", "+ bf16", "+ compile"):  # the last two remove no FLOPs
        options[rung] = dict(sparse_mlm=True, unpad=True, unpadded_attention=unpadded_attention)
    return {rung: forward_flops(config, lengths, padded_length, labelled, **kw) for rung, kw in options.items()}


def mlm_head_share(config: BertConfig, length: int) -> float:
    """The MLM head's share of a forward's FLOPs when it runs on every position of full
    sequences of `length` tokens: what the sparse head can remove (most of it)."""
    flops = forward_flops(config, [length], length, 0)
    per_token = {name: flops[name] for name in ("dense layers", "attention", "MLM head")}
    return per_token["MLM head"] / sum(per_token.values())


def speed_up_ceiling(before: dict[str, int], after: dict[str, int]) -> float:
    """FLOPs before / FLOPs after: the speed-up if time were proportional to FLOPs."""
    return sum(before.values()) / sum(after.values())


H100_SXM_BF16_PEAK = 989e12  # FLOP/s, dense bf16, NVIDIA's H100 SXM data sheet (bertedu.utils.PEAK_BF16_FLOPS)
ROUTE_MFU = 0.30  # the lower of docs/gpu_route.md's two utilisations: a budget sized at it errs on the long side


def train_flops_per_token(config: BertConfig, seq_len: int, mlm_probability: float) -> float:
    """Training FLOPs per real token of full `seq_len`-token sequences on the fast path (sparse MLM
    head on the `mlm_probability` share of the pieces, unpadded): three forwards, the NSP head left
    out. docs/gpu_route.md's section 3 count: 567 MFLOP for BERT-BASE at 128 tokens, 30% masked."""
    per_sequence = forward_flops(config, [seq_len], seq_len, 0, sparse_mlm=True, unpad=True)
    head = forward_flops(config, [seq_len], seq_len, seq_len, sparse_mlm=True, unpad=True)["MLM head"]
    body = per_sequence["dense layers"] + per_sequence["attention"] + mlm_probability * head
    return 3 * body / seq_len


def budget_tokens(config: BertConfig, seconds: float, seq_len: int, mlm_probability: float,
                  peak_flops: float = H100_SXM_BF16_PEAK, mfu: float = ROUTE_MFU) -> int:
    """The training tokens that `seconds` of one GPU buy at utilisation `mfu` of `peak_flops`, by
    `train_flops_per_token`: an estimate from a formula and a data sheet, not a measurement.
    Notebook 07 sizes its gpu-scale run with it (`--max-tokens`, which keeps the run reproducible
    where a time budget would not)."""
    return int(seconds * mfu * peak_flops / train_flops_per_token(config, seq_len, mlm_probability))
