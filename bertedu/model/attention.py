"""Scaled dot-product attention and multi-head self-attention.

Introduced in notebook 03 (one head, the formula) and notebook 04 (many heads).

Dimension legend, used in shape comments throughout bertedu:

    B   batch size                 T   tokens in a sequence
    D   hidden size                N   attention heads
    Dh  head dim (D / N)           V   vocabulary size
    M   masked positions (MLM)     R   real (non-padding) tokens of a batch

Attention (Vaswani et al. 2017):

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + mask) V

Two kernels compute it from the same weights, chosen by name from `ATTENTION_KERNELS`:
"reference" writes every step out and can return the probabilities; "sdpa" calls
`torch.nn.functional.scaled_dot_product_attention`, which dispatches to FlashAttention or
memory-efficient kernels on a GPU. `tests/test_attention.py` proves they agree.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn

from .config import BertConfig
from .constants import ATTENTION_KERNEL_NAMES


def padding_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, T) 1 = real token, 0 = padding  ->  (B, 1, 1, T) bool, True where a key may be seen.

    BERT's mask hides padded *keys* from every query; it broadcasts over heads and queries.
    """
    return attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)


def causal_mask(T: int, device: torch.device | None = None) -> torch.Tensor:
    """(T, T) bool, True on and below the diagonal: token t sees tokens 0..t only (GPT, not BERT)."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: Optional[torch.Tensor] = None,
    *,
    causal: bool = False,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention written out; returns (output, probabilities).

    q, k, v: (..., T, Dh)            any leading dims, e.g. (B, N, T, Dh)
    mask:    bool, broadcastable to (..., T, T); True = may attend, False = hidden
    returns  output (..., T, Dh) and probs (..., T, T)
    """
    d_k = q.size(-1)
    # Divide by sqrt(d_k): the dot product of two d_k-dim vectors with unit-variance
    # entries has variance d_k, which would push softmax into saturation (notebook 03).
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., T, T)
    if causal:
        mask = causal_mask(q.size(-2), q.device) if mask is None else mask & causal_mask(q.size(-2), q.device)
    if mask is not None:
        # A hidden position gets the most negative number, so softmax gives it weight 0.
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    probs = scores.softmax(dim=-1)  # (..., T, T), each row sums to 1
    if dropout_p > 0.0:
        probs = F.dropout(probs, p=dropout_p)
    return probs @ v, probs  # (..., T, Dh), (..., T, T)


# ---- kernels: same signature, same answer -------------------------------------------
# kernel(q, k, v, mask, dropout_p, need_probs) -> (output, probs or None)
AttentionKernel = Callable[..., tuple[torch.Tensor, Optional[torch.Tensor]]]


def reference_kernel(q, k, v, mask, dropout_p, need_probs):
    return scaled_dot_product_attention(q, k, v, mask, dropout_p=dropout_p)


def sdpa_kernel(q, k, v, mask, dropout_p, need_probs):
    if need_probs:  # the fused kernels never materialise the (T, T) matrix
        return reference_kernel(q, k, v, mask, dropout_p, need_probs)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    return out, None


ATTENTION_KERNELS: dict[str, AttentionKernel] = {
    "reference": reference_kernel,
    "sdpa": sdpa_kernel,
}
assert tuple(ATTENTION_KERNELS) == ATTENTION_KERNEL_NAMES  # the names config.py validates against


class MultiHeadSelfAttention(nn.Module):
    """N heads of self-attention over one sequence, then the output projection.

    Each head attends in its own Dh = D / N dims; the heads are concatenated back to D
    and mixed by `output`. Parameters are the same whatever the kernel.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        D = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.query = nn.Linear(D, D)
        self.key = nn.Linear(D, D)
        self.value = nn.Linear(D, D)
        self.output = nn.Linear(D, D)
        self.dropout_p = config.attention_probs_dropout_prob
        self.kernel = config.attn_implementation

    def forward(
        self,
        x: torch.Tensor,
        mask: Optional[torch.Tensor] = None,
        need_probs: bool = False,
    ) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """x: (B, T, D); mask: bool (B, 1, 1, T) from `padding_mask`.

        Returns (B, T, D) and, when `need_probs`, the probabilities (B, N, T, T).
        """
        B, T, D = x.shape
        q, k, v = (t.transpose(1, 2) for t in self.split_heads(x))  # (B, N, T, Dh) each
        out, probs = ATTENTION_KERNELS[self.kernel](q, k, v, mask, self.active_dropout(), need_probs)
        out = out.transpose(1, 2).reshape(B, T, D)  # (B, T, D): heads side by side
        return self.output(out), probs

    def split_heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The projections, cut into heads: x (..., D) -> q, k, v (..., N, Dh).

        Works on any leading shape: (B, T, D) here, (R, D) real tokens on the fast path.
        """
        shape = (self.num_heads, self.head_dim)
        return tuple(proj(x).unflatten(-1, shape) for proj in (self.query, self.key, self.value))  # (..., N, Dh)

    def active_dropout(self) -> float:
        """The attention-probability dropout in effect: none in eval mode."""
        return self.dropout_p if self.training else 0.0
