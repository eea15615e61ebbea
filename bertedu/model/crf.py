"""A linear-chain conditional random field (CRF): a tagger that scores whole tag sequences.

Introduced in the token tagging notebook (09), for BERT+CRF named-entity recognition
(`BertForTokenClassification(..., head="crf")`). Lafferty, McCallum and Pereira 2001;
the notation is that of Lample et al. 2016, "Neural Architectures for Named Entity
Recognition", section 2.2, whose LSTM-CRF is the model BERT's encoder replaces here.

The softmax head picks each word's tag on its own, so nothing stops it from writing I-PER
after O, or ending a name one character early. A CRF scores a sentence's whole tag sequence
y = (y_1 .. y_W) from two kinds of score:

    emissions  P (W, C)  what the encoder says about each word: the head's logits
    transitions A (C, C)  learned, one per pair of tags (from, to), plus start[y_1] and end[y_W]

    s(y) = start[y_1] + sum_i P[i, y_i] + sum_{i>1} A[y_{i-1}, y_i] + end[y_W]
    p(y) = exp s(y) / Z,      Z = the sum of exp s(y') over all C^W sequences y'

Training maximises log p(gold) = s(gold) - log Z. Z has C^W terms, but the forward
algorithm computes log Z in W steps of (C, C) work, in log space (logsumexp, so no exp
overflows). Decoding finds argmax_y s(y) with Viterbi: the same recursion with max in
place of logsumexp, then a walk back along the choices made.

BIO constraints. I-X continues an entity of type X: it may follow only B-X or I-X, and it
cannot open a sentence. `bio_allowed(label_names)` lists what is allowed; a CRF built with
`label_names` adds -inf to the forbidden starts and transitions when it decodes (fixed
masks, not parameters, not saved), so Viterbi never writes an invalid sequence. Training
leaves them free, as AllenNLP's CRF does: gold sequences are valid BIO, and the learned
scores of the transitions they never use fall on their own.

Shapes: B batch, W positions (words) of a sentence, C tags. `mask` (B, W): True = a real
word, False = padding, with padding only after a row's words (an empty sentence is a row
of padding: score, log Z and loss 0, path []). Scores are computed in float32 (float64 if given).

`tests/test_crf.py` checks all of it against `pytorch-crf` (the `torchcrf` module) on the
same parameters, and against brute force over every path of a small case.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch
from torch import nn


def _bio_parts(label: str) -> tuple[str, str]:
    """'B-PER' -> ('B', 'PER'); a bare 'I' -> ('I', ''); 'O' or any other label -> (label, '')."""
    if label in ("B", "I"):
        return label, ""
    prefix, sep, kind = label.partition("-")
    return (prefix, kind) if sep and prefix in ("B", "I") else (label, "")


def bio_allowed(label_names: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """(allowed starts (C,), allowed transitions (C, C) [from, to]), bool, under the BIO rule:
    a tag I-X may open no sentence, and may follow only B-X or I-X. Nothing else is ruled
    out (O, B-X and labels outside the BIO scheme may start and follow anything), so a label
    set with no I- tags (part-of-speech tags, say) gets no constraint at all.

    `["O", "B-PER", "I-PER"]` -> starts [True, True, False]; into I-PER only from B-PER, I-PER.
    """
    parts = [_bio_parts(name) for name in label_names]
    C = len(parts)
    start = torch.ones(C, dtype=torch.bool)
    transitions = torch.ones(C, C, dtype=torch.bool)
    for to, (prefix, kind) in enumerate(parts):
        if prefix != "I":
            continue
        start[to] = False  # an entity's inside needs its beginning first
        for frm, (prefix_from, kind_from) in enumerate(parts):
            transitions[frm, to] = prefix_from in ("B", "I") and kind_from == kind
    return start, transitions


def pack_positions(x: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The kept positions of each row, moved to its front: x (B, T, ...) and keep (B, T) bool
    -> (B, W, ...) and its mask (B, W), W being the most positions kept in one row.

    For tagging: a sentence's words are the first pieces of its words; [CLS], [SEP],
    continuation pieces and padding are dropped, so the CRF's transitions run from one word
    to the next. `unpack_positions` puts results back.
    """
    counts = keep.sum(dim=1)  # (B,)
    W = int(counts.max()) if counts.numel() else 0
    mask = torch.arange(W, device=x.device) < counts.unsqueeze(1)  # (B, W): real words first
    packed = x.new_zeros((x.shape[0], W, *x.shape[2:]))  # (B, W, ...)
    packed[mask] = x[keep]  # both in row-major order, a row's words in sentence order
    return packed, mask


def unpack_positions(packed: torch.Tensor, mask: torch.Tensor, keep: torch.Tensor, fill: int) -> torch.Tensor:
    """The reverse of `pack_positions`: (B, W) values at a row's words -> (B, T) with `fill`
    wherever `keep` is False."""
    out = torch.full(keep.shape, fill, dtype=packed.dtype, device=packed.device)  # (B, T)
    out[keep] = packed[mask]
    return out


class LinearChainCRF(nn.Module):
    """A linear-chain CRF over C tags: the tagging notebook (09) builds it; the module
    docstring has the formulas.

    Parameters (torchcrf's names, so the two can share values): `start_transitions` (C,),
    `end_transitions` (C,), `transitions` (C, C), [from, to]. They start at 0: no
    preference, so before training the best path is each word's highest emission, the
    softmax head's choice. `label_names` (C tag names) switches on the BIO constraints
    when decoding (`bio_allowed`).

    forward(emissions (B, W, C), tags (B, W), mask (B, W) = None) -> the mean negative
        log-likelihood per word (torchcrf's "token_mean"), the training loss
    log_likelihood(...) -> (B,); score(...) -> s(y) (B,); log_partition(emissions, mask) -> (B,)
    decode(emissions, mask=None) -> the best tag sequence of each sentence, a list of lists
    """

    def __init__(self, num_tags: int, label_names: Optional[Sequence[str]] = None):
        super().__init__()
        if num_tags < 1:
            raise ValueError(f"a CRF needs at least one tag, got num_tags={num_tags}")
        if label_names is not None and len(label_names) != num_tags:
            raise ValueError(f"{len(label_names)} label names for {num_tags} tags")
        self.num_tags = num_tags
        self.label_names = list(label_names) if label_names is not None else None
        self.start_transitions = nn.Parameter(torch.zeros(num_tags))  # (C,)
        self.end_transitions = nn.Parameter(torch.zeros(num_tags))  # (C,)
        self.transitions = nn.Parameter(torch.zeros(num_tags, num_tags))  # (C, C): [from, to]
        if label_names is not None:
            start_ok, transition_ok = bio_allowed(label_names)
        else:
            start_ok = torch.ones(num_tags, dtype=torch.bool)
            transition_ok = torch.ones(num_tags, num_tags, dtype=torch.bool)
        # Added to the scores when decoding: 0 where allowed, -inf where forbidden. Fixed, and
        # rebuilt from label_names, so not saved with the weights.
        self.register_buffer("start_constraint", _penalty(start_ok), persistent=False)
        self.register_buffer("transition_constraint", _penalty(transition_ok), persistent=False)

    def extra_repr(self) -> str:
        return f"num_tags={self.num_tags}, bio_constraints={self.label_names is not None}"

    def _checked(self, emissions: torch.Tensor, mask: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(emissions in float32 or wider, mask as bool), after checking shapes and that padding comes last."""
        if emissions.dim() != 3 or emissions.shape[2] != self.num_tags:
            raise ValueError(f"emissions must be (B, W, {self.num_tags}), got shape {tuple(emissions.shape)}")
        if mask is None:
            mask = torch.ones(emissions.shape[:2], dtype=torch.bool, device=emissions.device)
        mask = mask.bool()
        if mask.shape != emissions.shape[:2]:
            raise ValueError(f"mask {tuple(mask.shape)} must be (B, W) = {tuple(emissions.shape[:2])}")
        if (mask[:, 1:] & ~mask[:, :-1]).any():
            raise ValueError("mask must put each row's words first and its padding after them")
        return (emissions if emissions.dtype == torch.float64 else emissions.float()), mask

    def score(self, emissions: torch.Tensor, tags: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """s(y) (B,) of the tag sequences `tags` (B, W): start, emissions, transitions and end
        scores along each sentence's real words (tags at padding are ignored)."""
        emissions, mask = self._checked(emissions, mask)
        B, W, _ = emissions.shape
        if W == 0:
            return emissions.new_zeros(B)
        tags = tags.long().masked_fill(~mask, 0)  # padding's tags (-100, say) must index something
        lengths = mask.sum(dim=1)  # (B,)
        emitted = emissions.gather(2, tags.unsqueeze(2)).squeeze(2)  # (B, W): P[i, y_i]
        moved = self.transitions[tags[:, :-1], tags[:, 1:]]  # (B, W - 1): A[y_{i-1}, y_i]
        last = tags.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)  # (B,): y_W
        total = (self.start_transitions[tags[:, 0]]
                 + emitted.masked_fill(~mask, 0.0).sum(dim=1)
                 + moved.masked_fill(~mask[:, 1:], 0.0).sum(dim=1)  # into a real word only
                 + self.end_transitions[last])
        return total.masked_fill(lengths == 0, 0.0)

    def log_partition(self, emissions: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """log Z (B,) by the forward algorithm, in log space.

        alpha[b, j] is the log of the summed exp-scores of every sequence of the first i
        words that ends in tag j:

            alpha_1 = start + P_1
            alpha_i[j] = logsumexp_k (alpha_{i-1}[k] + A[k, j]) + P_i[j]
            log Z = logsumexp_j (alpha_W[j] + end[j])

        At a padded position alpha stays as it was, so each row stops at its own last word.
        """
        emissions, mask = self._checked(emissions, mask)
        B, W, _ = emissions.shape
        if W == 0:
            return emissions.new_zeros(B)
        alpha = self.start_transitions + emissions[:, 0]  # (B, C)
        for i in range(1, W):
            # (B, C, 1) + (C, C) -> (B, C, C) [b, from, to]; the sum over `from` in log space
            step = torch.logsumexp(alpha.unsqueeze(2) + self.transitions, dim=1) + emissions[:, i]  # (B, C)
            alpha = torch.where(mask[:, i].unsqueeze(1), step, alpha)
        log_z = torch.logsumexp(alpha + self.end_transitions, dim=1)  # (B,)
        return log_z.masked_fill(~mask[:, 0], 0.0)  # an empty sentence: one (empty) sequence, score 0

    def log_likelihood(self, emissions: torch.Tensor, tags: torch.Tensor,
                       mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """log p(tags) = s(tags) - log Z, per sentence (B,); torchcrf's forward with reduction='none'."""
        return self.score(emissions, tags, mask) - self.log_partition(emissions, mask)

    def forward(self, emissions: torch.Tensor, tags: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The training loss: -log p(tags) summed over the batch, divided by its number of
        words, so that it is on the scale of the softmax head's mean cross-entropy per word."""
        _, mask = self._checked(emissions, mask)
        return -self.log_likelihood(emissions, tags, mask).sum() / mask.sum().clamp(min=1)

    @torch.no_grad()
    def decode(self, emissions: torch.Tensor, mask: Optional[torch.Tensor] = None,
               constrained: bool = True) -> list[list[int]]:
        """The best tag sequence of each sentence (Viterbi), as lists of tag ids of the
        sentences' lengths. `constrained`: forbid what `label_names` rules out (if given).

            best_1 = start + P_1
            best_i[j] = max_k (best_{i-1}[k] + A[k, j]) + P_i[j],  came_from_i[j] = that k
            y_W = argmax_j (best_W[j] + end[j]); then y_{i-1} = came_from_i[y_i], back to i = 1
        """
        emissions, mask = self._checked(emissions, mask)
        B, W, _ = emissions.shape
        if W == 0:
            return [[] for _ in range(B)]
        start, transitions = self.start_transitions, self.transitions
        if constrained:
            start, transitions = start + self.start_constraint, transitions + self.transition_constraint
        best = start + emissions[:, 0]  # (B, C)
        came_from = []
        for i in range(1, W):
            top, argtop = (best.unsqueeze(2) + transitions).max(dim=1)  # (B, C) each: over `from`
            best = torch.where(mask[:, i].unsqueeze(1), top + emissions[:, i], best)
            came_from.append(argtop)
        last = (best + self.end_transitions).argmax(dim=1).tolist()  # (B,)
        pointers = torch.stack(came_from, dim=1).tolist() if came_from else [[] for _ in range(B)]  # (B, W-1, C)
        paths = []
        for b, length in enumerate(mask.sum(dim=1).tolist()):
            path = [last[b]] if length else []
            for i in range(length - 1, 0, -1):  # pointers[b][i - 1] leads from word i back to word i - 1
                path.append(pointers[b][i - 1][path[-1]])
            paths.append(path[::-1])
        return paths


def _penalty(allowed: torch.Tensor) -> torch.Tensor:
    """0.0 where allowed, -inf where not."""
    return torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))
