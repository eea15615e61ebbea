"""An ELMo-style language model at CPU scale: two LSTM LMs, one per direction, for contrast with BERT.

Introduced in notebook 17's appendix (issue 38: "From word2vec through ELMo to BERT, measured"; the study's
steps are `bertedu.course.lm_study`, its multi-seed record `benchmarks/elmo_study.py`).
ELMo (Peters et al. 2018, "Deep contextualized word representations") reads a sentence with
a *forward* LM, an LSTM that predicts each token from the tokens before it, and a *backward*
LM, another LSTM that predicts each token from the tokens after it (section 3.1). A token's
contextual vector joins the two. Neither LSTM ever reads the other side of a token, so the
bidirectionality is "shallow": the two one-sided views are combined only after the fact.
BERT's paper sets itself against exactly this (Devlin et al. 2019, section 1: ELMo "uses a
shallow concatenation of independently trained left-to-right and right-to-left LMs"), while
BERT's masked LM conditions every layer on both sides at once.

What this module builds (0-based positions; a row of n real tokens x_0..x_{n-1}, padding
on the right):

    forward LM    LSTMLM reads x_0, x_1, ...; its state at t has read x_0..x_t;
                  its logits at t score x_{t+1}                    (next-token loss)
    backward LM   a second LSTMLM, with its own parameters, run on the row reversed
                  (x_{n-1}, ..., x_0, then the padding); mapped back, its state at t has
                  read x_{n-1}..x_t; its logits at t score x_{t-1}   (previous-token loss)
    contextual    [forward state at t ; backward state at t]         (B, T, 2H)
    middle fill   log p_fwd(x_t | x_0..x_{t-1}) + log p_bwd(x_t | x_{t+1}..x_{n-1}):
                  the forward state at t - 1 and the backward state at t + 1 each guess
                  x_t, and the guesses are added; neither side ever read x_t itself

The two LMs share no parameter and each has its own loss; `ELMoStyleLM.forward` returns
both and their sum, whose gradient with respect to either LM's parameters is that LM's own
gradient (a per-parameter optimiser such as Adam then trains the two exactly as two
separate runs would; a clip by the global norm of both would couple them).

What ELMo had (Peters et al. 2018, sections 3.1, 3.2 and 3.4), and what this version keeps:

    ELMo                                                   here
    character CNN input (2,048 n-gram filters, two         a token embedding table over the
      highway layers, projected to 512 dims)                 package's WordPiece/BPE vocabulary
    2 LSTM layers of 4,096 units, each projected to 512    `nn.LSTM` (PyTorch's own, not written
      dims inside the recurrence, a residual connection      out): `num_layers` layers of
      from the first layer to the second                     `hidden_size` units, no projection
                                                             inside, no residual connection
    token representation and softmax tied between the      tied *within* a direction (input
      two directions; separate LSTM parameters               embedding = output matrix), not
                                                             between: the directions share nothing
    a learned task-specific weighted sum of all layers     the top layer's states only
      (softmax-normalised weights s_j times a scale gamma)

The output layer: the top LSTM state (H dims) goes through dropout and a linear projection
to the embedding size E (skipped when H == E), then scores every token against the same
embedding matrix the LM reads with, plus one bias per token. ELMo projects inside the
recurrence instead (PyTorch's `nn.LSTM(proj_size=...)` could do that); projecting only at
the output keeps the states the contextual vectors are read from H wide.

Parameter counts (E embedding, H hidden, L layers, V vocabulary; PyTorch's LSTM keeps two
bias vectors per layer):

    one LSTM layer      4H (input + H) + 8H          input = E for the first layer, H after
    one direction       E V + V (token biases) + LSTM + (H E + E, the projection, when H != E)
    ELMoConfig.tiny()   E=64, H=128, L=2: one direction 65 V + 239,680; both 130 V + 479,360
    BertConfig.tiny()   `BertForMaskedLM`: 129 V + 479,360 (`BertForPreTraining` adds the
                        pooler and NSP head: + 16,770)

so the tiny ELMo-style model has exactly one more parameter per vocabulary entry than the
tiny BERT with an MLM head (a second bias vector), e.g. 1,519,360 against 1,511,360 at
V = 8,000: a comparison at equal size, as issue 38 asks. (The backward LM's own embedding
table is what ELMo's tying between directions would have saved.)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..model.constants import IGNORE_INDEX
from .gpt import causal_lm_loss

INITIALIZER_RANGE = 0.02  # BERT's: the embedding table starts as N(0, 0.02^2)


@dataclass(frozen=True)
class ELMoConfig:
    """The sizes of an ELMo-style model: both directions get the same.

    vocab_size      V, the tokenizer's vocabulary (the same as the BERT it is set against)
    embedding_size  E, the token embedding, which is also the output matrix (tied)
    hidden_size     H, the LSTM's units per layer; the contextual vector is 2H
    num_layers      L, stacked LSTM layers per direction
    dropout         on the top states before the output layer, and between LSTM layers

    `ELMoConfig.tiny(vocab_size=...)` is the size of `BertConfig.tiny()` (see the module
    docstring for the counts); variants by `dataclasses.replace` or overrides.
    """

    vocab_size: int = 30522
    embedding_size: int = 64
    hidden_size: int = 128
    num_layers: int = 2
    dropout: float = 0.1

    def __post_init__(self) -> None:
        for name in ("vocab_size", "embedding_size", "hidden_size", "num_layers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    @classmethod
    def tiny(cls, **overrides: Any) -> "ELMoConfig":
        """E=64, H=128, L=2: 130 V + 479,360 parameters, BertConfig.tiny's MLM model + V."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"unknown ELMoConfig field(s) {unknown}: the fields are {sorted(known)}")
        return cls(**{"embedding_size": 64, "hidden_size": 128, "num_layers": 2, **overrides})


@dataclass
class ELMoOutput:
    forward_logits: torch.Tensor  # (B, T, V): at position t, the scores of token t + 1
    backward_logits: torch.Tensor  # (B, T, V): at position t, the scores of token t - 1
    forward_loss: Optional[torch.Tensor] = None  # next-token cross-entropy, when labels are given
    backward_loss: Optional[torch.Tensor] = None  # previous-token cross-entropy
    loss: Optional[torch.Tensor] = None  # their sum: each LM's gradient is its own loss's


def row_lengths(input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor]) -> torch.Tensor:
    """The number of real tokens per row, (B,), checking that padding is on the right.

    attention_mask (B, T): 1 = real token, 0 = padding; None = no padding.
    """
    B, T = input_ids.shape
    if attention_mask is None:
        return torch.full((B,), T, dtype=torch.long, device=input_ids.device)
    if attention_mask.shape != input_ids.shape:
        raise ValueError(f"attention_mask has shape {tuple(attention_mask.shape)}, input_ids {(B, T)}: "
                         "give one mask entry per token")
    lengths = attention_mask.long().sum(1)  # (B,)
    right_padded = torch.arange(T, device=input_ids.device)[None] < lengths[:, None]  # (B, T)
    if not torch.equal(right_padded, attention_mask.bool()):
        raise ValueError("attention_mask must be ones then zeros in every row (padding on the right): "
                         "pad each row after its real tokens")
    return lengths


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each row's first lengths[b] entries along dim 1; padding stays where it is.

    x (B, T) or (B, T, ...), lengths (B,). Row [a b c PAD PAD] becomes [c b a PAD PAD].
    Applying it twice gives x back, so the same call maps the backward LM's outputs home.
    """
    T = x.size(1)
    t = torch.arange(T, device=x.device)[None]  # (1, T)
    n = lengths[:, None].to(x.device)  # (B, 1)
    index = torch.where(t < n, n - 1 - t, t)  # (B, T): real position t <- n - 1 - t
    index = index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x)  # (B, T, ...)
    return x.gather(1, index)


class LSTMLM(nn.Module):
    """One direction: token embedding -> `nn.LSTM` -> dropout -> projection -> tied softmax.

    forward(input_ids (B, T)) -> (states (B, T, H), logits (B, T, V)). It reads left to
    right: the state at t has read tokens 0..t only, so padding on the right never reaches
    a real position. The backward LM is this same class given reversed rows.
    """

    def __init__(self, config: ELMoConfig):
        super().__init__()
        E, H = config.embedding_size, config.hidden_size
        self.config = config
        self.embeddings = nn.Embedding(config.vocab_size, E)
        between_layers = config.dropout if config.num_layers > 1 else 0.0  # nn.LSTM warns otherwise
        self.lstm = nn.LSTM(E, H, num_layers=config.num_layers, batch_first=True, dropout=between_layers)
        self.dropout = nn.Dropout(config.dropout)
        # Tie the output matrix to the embedding: project H down to E unless they already agree.
        self.projection = nn.Linear(H, E) if H != E else nn.Identity()
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))  # one per output token
        nn.init.normal_(self.embeddings.weight, std=INITIALIZER_RANGE)

    def logits(self, states: torch.Tensor) -> torch.Tensor:
        """states (B, T, H) -> logits (B, T, V), scored against the input embedding matrix."""
        x = self.projection(self.dropout(states))  # (B, T, E)
        return x @ self.embeddings.weight.T + self.bias  # (B, T, V)

    def forward(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        states, _ = self.lstm(self.embeddings(input_ids))  # (B, T, H): the top layer's h_t
        return states, self.logits(states)


class ELMoStyleLM(nn.Module):
    """Two separate LSTM LMs, left-to-right and right-to-left, joined only at the output.

    forward(input_ids (B, T), attention_mask (B, T) = None, labels (B, T) = None) -> ELMoOutput
    labels: the ids to predict, unshifted (usually input_ids; IGNORE_INDEX = -100 where no
    prediction is wanted); padding positions are ignored whatever labels hold there.
    Padding goes on the right (`row_lengths` checks).
    """

    def __init__(self, config: ELMoConfig):
        super().__init__()
        self.config = config
        self.forward_lm = LSTMLM(config)  # reads x_0 .. x_{n-1}
        self.backward_lm = LSTMLM(config)  # reads x_{n-1} .. x_0; no parameter in common

    def _run(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor]):
        """Both directions: forward (states, logits), backward (states, logits) in reversed
        coordinates (row b's position s is original position n_b - 1 - s), and the lengths."""
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be (batch, tokens), got shape {tuple(input_ids.shape)}")
        lengths = row_lengths(input_ids, attention_mask)  # (B,)
        forward = self.forward_lm(input_ids)  # (B, T, H), (B, T, V)
        backward = self.backward_lm(reverse_padded(input_ids, lengths))  # the same, on reversed rows
        return forward, backward, lengths

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: Optional[torch.Tensor] = None,
        labels: Optional[torch.Tensor] = None,
    ) -> ELMoOutput:
        (_, forward_logits), (_, reversed_logits), lengths = self._run(input_ids, attention_mask)
        backward_logits = reverse_padded(reversed_logits, lengths)  # (B, T, V): position t scores t - 1
        if labels is None:
            return ELMoOutput(forward_logits, backward_logits)
        real = torch.arange(input_ids.size(1), device=input_ids.device)[None] < lengths[:, None]  # (B, T)
        labels = labels.masked_fill(~real, IGNORE_INDEX)  # padding is never a target
        forward_loss = causal_lm_loss(forward_logits, labels)  # logits at t against x_{t+1}
        # The backward LM's task is the forward task on reversed rows: the same loss there.
        backward_loss = causal_lm_loss(reversed_logits, reverse_padded(labels, lengths))
        return ELMoOutput(forward_logits, backward_logits, forward_loss, backward_loss, forward_loss + backward_loss)

    def contextual(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """ELMo's vector per token, from the top layer: (B, T, 2H), zeros at padding.

        [:, t, :H]  the forward LM's state at t, which has read x_0..x_t
        [:, t, H:]  the backward LM's state at t, which has read x_{n-1}..x_t (n: the row's length)
        Both have read x_t itself, each with one side of the sentence only.
        """
        (forward_states, _), (reversed_states, _), lengths = self._run(input_ids, attention_mask)
        backward_states = reverse_padded(reversed_states, lengths)  # (B, T, H)
        both = torch.cat([forward_states, backward_states], dim=-1)  # (B, T, 2H)
        real = torch.arange(input_ids.size(1), device=input_ids.device)[None] < lengths[:, None]  # (B, T)
        return both * real[..., None]

    def fill_middle_log_probs(
        self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None
    ) -> torch.Tensor:
        """The shallow guess at each token from its two sides: (B, T, V), in fp32.

        At position t: log p_fwd(. | x_0..x_{t-1}) + log p_bwd(. | x_{t+1}..x_{n-1}), the
        forward LM's logits at t - 1 plus the backward LM's at t + 1, each log-softmaxed.
        Neither side reads x_t, so no [MASK] is needed: whatever token sits at t, the
        result is the same. The sum is a product of experts, unnormalised (log_softmax it
        again for a distribution). Positions without a token on both sides (t = 0,
        t = n - 1, padding) hold -inf: this model has nothing to combine there.
        """
        out = self(input_ids, attention_mask)
        forward_lp = F.log_softmax(out.forward_logits.float(), dim=-1)  # (B, T, V): guesses of t + 1
        backward_lp = F.log_softmax(out.backward_logits.float(), dim=-1)  # (B, T, V): guesses of t - 1
        scores = torch.full_like(forward_lp, float("-inf"))  # (B, T, V)
        scores[:, 1:-1] = forward_lp[:, :-2] + backward_lp[:, 2:]  # t: left state t-1, right state t+1
        lengths = row_lengths(input_ids, attention_mask)
        t = torch.arange(input_ids.size(1), device=input_ids.device)[None]  # (1, T)
        middle = (t >= 1) & (t <= lengths[:, None] - 2)  # (B, T): a real token on both sides
        return scores.masked_fill(~middle[..., None], float("-inf"))

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
