"""The fast training path, beside the readable one: the same weights, the same function.

Introduced in the speed-ladder notebook. `BertModel` and `BertForPreTraining` stay as
readable as the notebooks built them; `set_fast_path(model, ...)` switches a model to the
functions below, which reuse its own layers (no copy of any weight). This module depends
on the readable ones, never the reverse: the model only holds the forward plugged in.

    unpad       only real tokens go through the dense layers. A batch (B, T) with R real
                tokens becomes a (R, D) matrix: every Linear, LayerNorm, GELU and dropout
                works per token anyway, so they run on R rows instead of B*T. Attention is
                the one place where tokens meet; it stays within each sequence, either on
                a jagged nested tensor (`torch.nested`, variable lengths, no padding at
                all) or, where PyTorch cannot run that, by padding around attention only.
    sparse_mlm  the MLM head (dense, GELU, LayerNorm, the V-way decoder) runs only on the
                ~15% of positions that carry a label: the decoder is the largest matrix
                multiply of a small BERT, and 85% of its rows were thrown away by the loss.

Both leave the loss and the gradients unchanged (tests/test_fast.py checks them against
the readable path on ragged batches, in fp32, dropout off). The other rungs of the ladder
need no code here: SDPA attention is `attn_implementation="sdpa"`, bf16 autocast and fused
AdamW live in `bertedu.training.loop`, `torch.compile` too (with a fallback to eager).

Every variant runs here too (tests/test_variants.py): RoBERTa, ALBERT and DistilBERT are
the same encoder (`model.bert`) and MLM head (`model.mlm`); their models read the sentence
head's logits from `nsp_logits` (ALBERT's SOP) or leave them (MLM only).

Token order. Unpadded rows are the real tokens in reading order: sequence 0's tokens,
then sequence 1's, ... `cu_seqlens` (B+1,) marks where each sequence starts, as in
FlashAttention's variable-length API. Real tokens must come first in every row (right
padding, what bertedu's collators make).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F

from .constants import IGNORE_INDEX
from .heads import BertForPreTraining, pretraining_loss
from .outputs import BertPreTrainingOutput

ATTENTION_MODES = ("auto", "nested", "padded")
RIGHT_PADDING = ("unpadding needs right padding: every row's real tokens first, then padding "
                 "(bertedu's collators pad this way)")

# The number of real tokens R and of labelled positions M change from batch to batch and
# are counted from the data (`nonzero`). torch.compile traces such sizes symbolically when
# these two options are on, instead of breaking the graph there and compiling again for
# every new R or M (issue 52 item 4; tests/test_compile.py counts breaks and recompiles).
DYNAMO_OPTIONS = dict(capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True)


def allow_data_dependent_shapes() -> None:
    """Let torch.compile trace the fast path whole: sizes counted from the data become
    symbols (R, M) in one graph. Only compiled code reads these options; eager runs,
    every CPU default included, compute exactly as before."""
    import torch._dynamo

    for name, value in DYNAMO_OPTIONS.items():
        setattr(torch._dynamo.config, name, value)


@dataclass
class Unpadded:
    """Where the real tokens of a (B, T) batch are."""

    indices: torch.Tensor  # (R,) positions of real tokens in the flattened (B*T,) batch
    cu_seqlens: torch.Tensor  # (B+1,) sequence b is rows cu_seqlens[b]:cu_seqlens[b+1]
    batch: int
    length: int  # T


def unpad_index(attention_mask: torch.Tensor) -> Unpadded:
    """attention_mask (B, T), 1 = real token, real tokens first -> `Unpadded`."""
    B, T = attention_mask.shape
    real = attention_mask.bool()
    lengths = real.sum(dim=1)  # (B,)
    # Right padding: row b is real exactly on its first lengths[b] positions.
    right_padded = (real == (torch.arange(T, device=real.device)[None, :] < lengths[:, None])).all()
    if torch.compiler.is_compiling():
        torch._assert_async(right_padded, RIGHT_PADDING)  # a tensor check: no graph break
    elif not right_padded:
        raise ValueError(RIGHT_PADDING)
    cu_seqlens = F.pad(lengths.cumsum(0), (1, 0))  # (B+1,)
    indices = real.flatten().nonzero().squeeze(1)  # (R,)
    return Unpadded(indices, cu_seqlens, B, T)


def unpad(x: torch.Tensor, where: Unpadded) -> torch.Tensor:
    """(B, T, ...) -> (R, ...): the real tokens only."""
    return x.flatten(0, 1).index_select(0, where.indices)


def pad(x: torch.Tensor, where: Unpadded) -> torch.Tensor:
    """(R, ...) -> (B, T, ...), zeros at padding."""
    out = x.new_zeros((where.batch * where.length, *x.shape[1:]))
    out = out.index_copy(0, where.indices, x)  # out of place: autograd sees a plain op
    return out.view(where.batch, where.length, *x.shape[1:])


# ---- attention over unpadded tokens ---------------------------------------------------


def _attention_nested(q, k, v, where: Unpadded, dropout_p: float) -> torch.Tensor:
    """q, k, v (R, N, Dh) -> (R, N, Dh), each sequence attending only to itself.

    A jagged nested tensor holds B sequences of different lengths without padding;
    scaled_dot_product_attention on it runs a variable-length kernel on CUDA.
    """
    offsets = where.cu_seqlens

    def jagged(t):  # (R, N, Dh) -> (B, N, j, Dh), j the ragged length
        return torch.nested.nested_tensor_from_jagged(t, offsets=offsets).transpose(1, 2)

    out = F.scaled_dot_product_attention(jagged(q), jagged(k), jagged(v), dropout_p=dropout_p)
    return out.transpose(1, 2).values()  # (R, N, Dh)


def _attention_padded(q, k, v, where: Unpadded, dropout_p: float) -> torch.Tensor:
    """The fallback: pad around attention only, with the usual padding mask."""
    T = where.length
    qp, kp, vp = (pad(t, where).transpose(1, 2) for t in (q, k, v))  # (B, N, T, Dh)
    lengths = where.cu_seqlens[1:] - where.cu_seqlens[:-1]  # (B,)
    mask = (torch.arange(T, device=q.device)[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T)
    out = F.scaled_dot_product_attention(qp, kp, vp, attn_mask=mask, dropout_p=dropout_p)  # (B, N, T, Dh)
    return unpad(out.transpose(1, 2), where)  # (R, N, Dh)


_nested_failed: set = set()


def unpadded_attention(q, k, v, where: Unpadded, dropout_p: float = 0.0, attention: str = "auto") -> torch.Tensor:
    """Self-attention within each sequence of unpadded q, k, v (R, N, Dh) -> (R, N, Dh).

    attention "nested" uses a jagged nested tensor and falls back to "padded" (with a
    warning, once per device type) if this PyTorch cannot run it there; both give the same
    result. "auto": nested on CUDA in eager mode, padded elsewhere and under torch.compile.
    """
    if attention not in ATTENTION_MODES:
        raise ValueError(f"attention must be one of {ATTENTION_MODES}, got {attention!r}")
    if attention == "auto":
        # Nested tensors get a variable-length kernel on CUDA; on CPU PyTorch runs them
        # sequence by sequence, and padding around attention measured faster.
        # Under torch.compile the nested tensor's offsets, counted from the data, break the
        # graph; padding around attention traces whole (tests/test_compile.py).
        nested = q.device.type == "cuda" and not torch.compiler.is_compiling()
        attention = "nested" if nested else "padded"
    if attention == "nested" and q.device.type not in _nested_failed:
        try:
            return _attention_nested(q, k, v, where, dropout_p)
        except (RuntimeError, NotImplementedError, TypeError) as err:
            _nested_failed.add(q.device.type)
            warnings.warn(f"nested-tensor attention is unavailable on {q.device.type} ({err}); "
                          "padding around attention instead (same result)")
    return _attention_padded(q, k, v, where, dropout_p)


# ---- the encoder on unpadded tokens ---------------------------------------------------


def layer_forward(layer, x: torch.Tensor, where: Unpadded, attention: str = "auto") -> torch.Tensor:
    """One `BertLayer` on unpadded x (R, D): its own sub-layers and residual blocks, on R
    rows instead of B*T; only the attention kernel differs."""
    attn = layer.attention
    q, k, v = attn.split_heads(x)  # (R, N, Dh) each
    a = unpadded_attention(q, k, v, where, attn.active_dropout(), attention)  # (R, N, Dh)
    a = attn.output(a.flatten(1))  # (R, D)
    return layer.feed_forward_block(layer.attention_residual(x, a))  # (R, D)


def encode_unpadded(bert, input_ids, token_type_ids=None, attention_mask=None, attention: str = "auto"):
    """`BertModel` on real tokens only -> (hidden (R, D), pooled (B, D), where)."""
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    where = unpad_index(attention_mask)
    x = unpad(bert.embeddings(input_ids, token_type_ids), where)  # (R, D)
    for layer in bert.layers:
        x = layer_forward(layer, x, where, attention)
    pooled = None
    if bert.pooler is not None:
        pooled = bert.pooler.pool(x.index_select(0, where.cu_seqlens[:-1]))  # (B, D): each sequence's [CLS]
    return x, pooled, where


def sparse_mlm_logits(mlm_head, hidden: torch.Tensor, labels: torch.Tensor):
    """The MLM head on labelled positions only: hidden (..., D), labels (...) -> logits (M, V), labels (M,)."""
    selected = (labels != IGNORE_INDEX).flatten().nonzero().squeeze(1)  # (M,)
    h = hidden.flatten(0, -2).index_select(0, selected)  # (M, D)
    return mlm_head(h), labels.flatten().index_select(0, selected)


def pretraining_forward(model, input_ids, token_type_ids=None, attention_mask=None, labels=None,
                        next_sentence_label=None, *, unpad: bool = True, sparse_mlm: bool = True,
                        attention: str = "auto") -> BertPreTrainingOutput:
    """`BertForPreTraining.forward` on the fast path (see the module docstring).

    Returns the same `BertPreTrainingOutput`, except that with sparse_mlm (and labels)
    `mlm_logits` is (M, V) for the M labelled positions in reading order and `mlm_labels`
    (M,) holds their labels; with unpadding alone, `mlm_logits` is padded back to (B, T, V).
    """
    if unpad:
        hidden, pooled, where = encode_unpadded(model.bert, input_ids, token_type_ids, attention_mask, attention)
        flat_labels = None if labels is None else unpad_labels(labels, where)  # (R,)
    else:
        out = model.bert(input_ids, token_type_ids, attention_mask)
        hidden, pooled, where, flat_labels = out.last_hidden_state, out.pooler_output, None, labels
    mlm_labels: Optional[torch.Tensor] = None
    if sparse_mlm and labels is not None:
        mlm_logits, mlm_labels = sparse_mlm_logits(model.mlm, hidden, flat_labels)  # (M, V), (M,)
    else:
        mlm_logits = model.mlm(hidden)  # (R, V) or (B, T, V)
        if where is not None:
            mlm_logits = pad(mlm_logits, where)  # (B, T, V)
    head = sentence_head(model)
    nsp_logits = None if head is None else head(pooled)  # (B, 2): NSP's, or ALBERT's SOP
    targets = mlm_labels if mlm_labels is not None else labels
    loss, mlm_loss, nsp_loss = pretraining_loss(mlm_logits, targets, nsp_logits, next_sentence_label)
    return BertPreTrainingOutput(mlm_logits=mlm_logits, nsp_logits=nsp_logits, loss=loss, mlm_loss=mlm_loss,
                                 nsp_loss=nsp_loss, mlm_labels=mlm_labels)


def sentence_head(model):
    """The head on the pooled [CLS] vector: BERT's NSP, ALBERT's SOP, or None (RoBERTa and
    DistilBERT train MLM alone). Its logits travel in the output's `nsp_logits`."""
    for name in ("nsp", "sop"):
        head = getattr(model, name, None)
        if head is not None:
            return head
    return None


def unpad_labels(labels: torch.Tensor, where: Unpadded) -> torch.Tensor:
    """(B, T) labels -> (R,): the real tokens' labels, in the order of the unpadded rows."""
    return unpad(labels.unsqueeze(-1), where).squeeze(-1)


@dataclass(frozen=True)
class FastPath:
    """The options of the fast path, callable as `BertForPreTraining.fast_forward`."""

    unpad: bool = True
    sparse_mlm: bool = True
    attention: str = "auto"

    def __post_init__(self) -> None:
        if self.attention not in ATTENTION_MODES:
            raise ValueError(f"attention must be one of {ATTENTION_MODES}, got {self.attention!r}")

    def __call__(self, model, input_ids, token_type_ids, attention_mask, labels, next_sentence_label):
        return pretraining_forward(model, input_ids, token_type_ids, attention_mask, labels, next_sentence_label,
                                   unpad=self.unpad, sparse_mlm=self.sparse_mlm, attention=self.attention)


def set_fast_path(model: BertForPreTraining, unpad: bool = False, sparse_mlm: bool = False,
                  attention: str = "auto") -> BertForPreTraining:
    """Train `model` on the fast path (same weights, same loss and gradients); returns it.

    model: a `BertForPreTraining`, or a variant's pretraining model (`RobertaForMaskedLM`,
        `AlbertForPreTraining`, `DistilBertForMaskedLM`, any `BertForMaskedLM`).

    unpad: only real tokens go through the dense layers; attention per sequence, on a
        nested tensor ("nested") or padded around attention only ("padded").
    sparse_mlm: the MLM head only on labelled positions; `mlm_logits` is then (M, V)
        with their labels in `mlm_labels`.
    Both False: back to the readable path. Requests for hidden states or attention maps
    always take the readable path.
    """
    path = FastPath(unpad, sparse_mlm, attention)  # checks `attention` even when switching off
    if unpad or sparse_mlm:
        allow_data_dependent_shapes()  # compiled, the step is one graph (no effect in eager)
    model.fast_forward = path if (unpad or sparse_mlm) else None
    return model
