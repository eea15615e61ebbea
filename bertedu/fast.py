"""The fast training path, beside the readable one: the same weights, the same function.

Introduced in the speed-ladder notebook. `BertModel` and `BertForPreTraining` stay as
readable as the notebooks built them; `model.set_fast_path(...)` switches a model to the
functions below, which reuse its own layers (no copy of any weight):

    unpad       only real tokens go through the dense layers. A batch (B, T) with N real
                tokens becomes a (N, D) matrix: every Linear, LayerNorm, GELU and dropout
                works per token anyway, so they run on N rows instead of B*T. Attention is
                the one place where tokens meet; it stays within each sequence, either on
                a jagged nested tensor (`torch.nested`, variable lengths, no padding at
                all) or, where PyTorch cannot run that, by padding around attention only.
    sparse_mlm  the MLM head (dense, GELU, LayerNorm, the V-way decoder) runs only on the
                ~15% of positions that carry a label: the decoder is the largest matrix
                multiply of a small BERT, and 85% of its rows were thrown away by the loss.

Both leave the loss and the gradients unchanged (tests/test_fast.py checks them against
the readable path on ragged batches, in fp32, dropout off). The other rungs of the ladder
need no code here: SDPA attention is `attn_implementation="sdpa"`, bf16 autocast and fused
AdamW live in `bertedu.train`, `torch.compile` too (with a fallback to eager).

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

ATTENTION_MODES = ("auto", "nested", "padded")


@dataclass
class Unpadded:
    """Where the real tokens of a (B, T) batch are."""

    indices: torch.Tensor  # (N,) positions of real tokens in the flattened (B*T,) batch
    cu_seqlens: torch.Tensor  # (B+1,) sequence b is rows cu_seqlens[b]:cu_seqlens[b+1]
    batch: int
    length: int  # T

    @property
    def num_tokens(self) -> int:
        return int(self.indices.numel())


def unpad_index(attention_mask: torch.Tensor) -> Unpadded:
    """attention_mask (B, T), 1 = real token, real tokens first -> `Unpadded`."""
    B, T = attention_mask.shape
    real = attention_mask.bool()
    lengths = real.sum(dim=1)  # (B,)
    # Right padding: row b is real exactly on its first lengths[b] positions.
    if not torch.equal(real, torch.arange(T, device=real.device)[None, :] < lengths[:, None]):
        raise ValueError(
            "unpadding needs right padding: every row's real tokens first, then padding "
            "(bertedu's collators pad this way)"
        )
    cu_seqlens = F.pad(lengths.cumsum(0), (1, 0))  # (B+1,)
    indices = real.flatten().nonzero().squeeze(1)  # (N,)
    return Unpadded(indices, cu_seqlens, B, T)


def unpad(x: torch.Tensor, where: Unpadded) -> torch.Tensor:
    """(B, T, ...) -> (N, ...): the real tokens only."""
    return x.flatten(0, 1).index_select(0, where.indices)


def pad(x: torch.Tensor, where: Unpadded) -> torch.Tensor:
    """(N, ...) -> (B, T, ...), zeros at padding."""
    out = x.new_zeros((where.batch * where.length, *x.shape[1:]))
    out = out.index_copy(0, where.indices, x)  # out of place: autograd sees a plain op
    return out.view(where.batch, where.length, *x.shape[1:])


# ---- attention over unpadded tokens ---------------------------------------------------


def _attention_nested(q, k, v, where: Unpadded, dropout_p: float) -> torch.Tensor:
    """q, k, v (N, H, Dh) -> (N, H, Dh), each sequence attending only to itself.

    A jagged nested tensor holds B sequences of different lengths without padding;
    scaled_dot_product_attention on it runs a variable-length kernel on CUDA.
    """
    offsets = where.cu_seqlens

    def jagged(t):  # (N, H, Dh) -> (B, H, j, Dh), j the ragged length
        return torch.nested.nested_tensor_from_jagged(t, offsets=offsets).transpose(1, 2)

    out = F.scaled_dot_product_attention(jagged(q), jagged(k), jagged(v), dropout_p=dropout_p)
    return out.transpose(1, 2).values()  # (N, H, Dh)


def _attention_padded(q, k, v, where: Unpadded, dropout_p: float) -> torch.Tensor:
    """The fallback: pad around attention only, with the usual padding mask."""
    B, T = where.batch, where.length
    qp, kp, vp = (pad(t, where).transpose(1, 2) for t in (q, k, v))  # (B, H, T, Dh)
    lengths = where.cu_seqlens[1:] - where.cu_seqlens[:-1]  # (B,)
    mask = (torch.arange(T, device=q.device)[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T)
    out = F.scaled_dot_product_attention(qp, kp, vp, attn_mask=mask, dropout_p=dropout_p)  # (B, H, T, Dh)
    return unpad(out.transpose(1, 2), where)  # (N, H, Dh)


_nested_failed: set = set()


def unpadded_attention(q, k, v, where: Unpadded, dropout_p: float = 0.0, mode: str = "auto") -> torch.Tensor:
    """Self-attention within each sequence of unpadded q, k, v (N, H, Dh) -> (N, H, Dh).

    mode "nested" uses a jagged nested tensor and falls back to "padded" (with a warning,
    once per device type) if this PyTorch cannot run it there; both give the same result.
    "auto": nested on CUDA, padded elsewhere.
    """
    if mode not in ATTENTION_MODES:
        raise ValueError(f"attention mode must be one of {ATTENTION_MODES}, got {mode!r}")
    if mode == "auto":
        # Nested tensors get a variable-length kernel on CUDA; on CPU PyTorch runs them
        # sequence by sequence, and padding around attention measured faster.
        mode = "nested" if q.device.type == "cuda" else "padded"
    if mode == "nested" and q.device.type not in _nested_failed:
        try:
            return _attention_nested(q, k, v, where, dropout_p)
        except (RuntimeError, NotImplementedError, TypeError) as err:
            _nested_failed.add(q.device.type)
            warnings.warn(f"nested-tensor attention is unavailable on {q.device.type} ({err}); "
                          "padding around attention instead (same result)")
    return _attention_padded(q, k, v, where, dropout_p)


# ---- the encoder on unpadded tokens ---------------------------------------------------


def layer_forward(layer, x: torch.Tensor, where: Unpadded, mode: str = "auto") -> torch.Tensor:
    """One `BertLayer` on unpadded x (N, D): the same sub-layers, on N rows instead of B*T."""
    attn = layer.attention
    N, D = x.shape
    H, Dh = attn.num_heads, attn.head_dim
    q, k, v = (proj(x).view(N, H, Dh) for proj in (attn.query, attn.key, attn.value))  # (N, H, Dh)
    dropout_p = attn.dropout_p if attn.training else 0.0
    a = attn.output(unpadded_attention(q, k, v, where, dropout_p, mode).reshape(N, D))  # (N, D)
    x = layer.attention_norm(x + layer.dropout(a))
    return layer.output_norm(x + layer.dropout(layer.feed_forward(x)))  # (N, D)


def encode_unpadded(bert, input_ids, token_type_ids=None, attention_mask=None, mode: str = "auto"):
    """`BertModel` on real tokens only -> (hidden (N, D), pooled (B, D), where)."""
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    where = unpad_index(attention_mask)
    x = unpad(bert.embeddings(input_ids, token_type_ids), where)  # (N, D)
    for layer in bert.layers:
        x = layer_forward(layer, x, where, mode)
    pooled = None
    if bert.pooler is not None:
        cls = x.index_select(0, where.cu_seqlens[:-1])  # (B, D): each sequence's first token
        pooled = torch.tanh(bert.pooler.dense(cls))
    return x, pooled, where


def sparse_mlm_logits(mlm_head, hidden: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100):
    """The MLM head on labelled positions only: hidden (..., D), labels (...) -> logits (M, V), labels (M,)."""
    selected = (labels != ignore_index).flatten().nonzero().squeeze(1)  # (M,)
    h = hidden.flatten(0, -2).index_select(0, selected)  # (M, D)
    return mlm_head(h), labels.flatten().index_select(0, selected)


def pretraining_forward(model, input_ids, token_type_ids=None, attention_mask=None, labels=None,
                        next_sentence_label=None, *, unpad_tokens: bool = True, sparse_mlm: bool = True,
                        mode: str = "auto"):
    """`BertForPreTraining.forward` on the fast path (see the module docstring).

    Returns the same `BertPreTrainingOutput`, except that with sparse_mlm (and labels)
    `mlm_logits` is (M, V) for the M labelled positions in reading order and `mlm_labels`
    (M,) holds their labels; with unpadding alone, `mlm_logits` is padded back to (B, T, V).
    """
    from .heads import IGNORE_INDEX
    from .outputs import BertPreTrainingOutput

    if unpad_tokens:
        hidden, pooled, where = encode_unpadded(model.bert, input_ids, token_type_ids, attention_mask, mode)
        flat_labels = None if labels is None else unpad(labels.unsqueeze(-1), where).squeeze(-1)  # (N,)
    else:
        out = model.bert(input_ids, token_type_ids, attention_mask)
        hidden, pooled, where, flat_labels = out.last_hidden_state, out.pooler_output, None, labels
    mlm_labels: Optional[torch.Tensor] = None
    if sparse_mlm and labels is not None:
        mlm_logits, mlm_labels = sparse_mlm_logits(model.mlm, hidden, flat_labels, IGNORE_INDEX)  # (M, V), (M,)
    else:
        mlm_logits = model.mlm(hidden)  # (N, V) or (B, T, V)
        if where is not None:
            mlm_logits = pad(mlm_logits, where)  # (B, T, V)
    nsp_logits = model.nsp(pooled)  # (B, 2)
    mlm_loss = nsp_loss = loss = None
    if labels is not None:
        targets = mlm_labels if mlm_labels is not None else labels.flatten()
        mlm_loss = F.cross_entropy(mlm_logits.flatten(0, -2).float(), targets, ignore_index=IGNORE_INDEX)
        loss = mlm_loss
    if next_sentence_label is not None:
        nsp_loss = F.cross_entropy(nsp_logits.float(), next_sentence_label)
        loss = nsp_loss if loss is None else loss + nsp_loss
    return BertPreTrainingOutput(mlm_logits=mlm_logits, nsp_logits=nsp_logits, loss=loss, mlm_loss=mlm_loss,
                                 nsp_loss=nsp_loss, mlm_labels=mlm_labels)
