"""What the neighbouring tokens alone give: count-based masked-token predictors.

A reference line for pretraining curves. Before a BERT uses its context it predicts the
corpus's token frequencies (the *unigram* level). Counting, over the training text, which
token follows each token (*left*) and which token sits between each pair of tokens
(*left+right*) gives predictors that use one neighbour or both, with no learning at all.
Scored on the very masks a held-out evaluation uses, they say how much of a masked LM's
accuracy the immediate neighbours explain, and so whether a run is held back by its text
(it already beats the counts) or by its training (it does not yet).

    counts = NeighbourCounts.from_rows(train_rows)          # token ids of training sentences
    counts.score(batch["input_ids"], batch["labels"])       # {"unigram": ..., "left": ..., ...}

Each predictor backs off to the one below it when it has never seen its context (a masked
neighbour is such a context). Ties go to the token counted first, so results are exact.
Used by `benchmarks/pretrain_study.py` and `benchmarks/plateau.py` (through `count_baselines`,
which scores a `bertedu pretrain` run's own held-out masks).

`BigramLM` is the same idea as a language model with probabilities (notebook 17): p(next piece |
previous piece) from counts, so that "bigram statistics" can be measured as a loss beside GPT's.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from pathlib import Path

import torch

from ..data import collate_pretraining
from ..data.corpora import load_corpus
from ..data.tokenizer import load_vocab_tokenizer
from ..errors import SettingError
from ..model.constants import IGNORE_INDEX
from ..training.pretrain import PretrainConfig, build_datasets

PREDICTORS = ("unigram", "left", "left+right")


class NeighbourCounts:
    """Counts of each token alone, after its left neighbour, and between its two neighbours."""

    def __init__(self) -> None:
        self.unigram: Counter = Counter()
        self.left: defaultdict = defaultdict(Counter)
        self.both: defaultdict = defaultdict(Counter)
        self.tokens = 0

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[int]]) -> "NeighbourCounts":
        counts = cls()
        for row in rows:
            counts.add(row)
        return counts

    def add(self, row: Sequence[int]) -> None:
        """Count one training row (token ids, [CLS] and [SEP] included: they are neighbours
        too, but never predicted)."""
        row = list(row)
        for i in range(1, len(row) - 1):
            token = row[i]
            self.unigram[token] += 1
            self.left[row[i - 1]][token] += 1
            self.both[(row[i - 1], row[i + 1])][token] += 1
            self.tokens += 1

    def predict(self, left: int | None, right: int | None) -> dict[str, int]:
        """Each predictor's guess for a token between `left` and `right` (None: no neighbour)."""
        if not self.unigram:
            raise ValueError("no training tokens counted: call add() or from_rows() first")
        guess = {"unigram": self.unigram.most_common(1)[0][0]}
        seen = self.left.get(left)
        guess["left"] = seen.most_common(1)[0][0] if seen else guess["unigram"]
        seen = self.both.get((left, right))
        guess["left+right"] = seen.most_common(1)[0][0] if seen else guess["left"]
        return guess

    def score(self, input_ids, labels) -> dict[str, float]:
        """Accuracy of each predictor on the labelled positions of a batch (rows of
        `input_ids`, `labels` with IGNORE_INDEX where there is nothing to predict)."""
        correct, total = Counter(), 0
        for ids, row_labels in zip(_rows(input_ids), _rows(labels)):
            for i, label in enumerate(row_labels):
                if label == IGNORE_INDEX:
                    continue
                left = ids[i - 1] if i > 0 else None
                right = ids[i + 1] if i + 1 < len(ids) else None
                for name, token in self.predict(left, right).items():
                    correct[name] += token == label
                total += 1
        if total == 0:
            raise ValueError("no labelled positions to score")
        return {name: correct[name] / total for name in PREDICTORS}


class BigramLM:
    """p(next piece | previous piece) counted from training windows, for notebook 17's baselines.

    Interpolated absolute discounting (Ney et al. 1994), d = 0.75 as usual: each seen pair gives up d of its
    count, and the mass given up goes to all pieces by the unigram. With c(v, w) the count of w after v,
    c(v) = sum_w c(v, w) and n(v) the number of different w seen after v:

        p(w | v) = max(c(v, w) - d, 0) / c(v) + d n(v) / c(v) * p_uni(w)        (p_uni(w) when c(v) = 0)

    p_uni is add-one smoothed over the pieces predicted (every position but the first), as notebook 17's
    frequency baseline. `log_probs` (V, V): row v holds log p(. | v).
    """

    def __init__(self, counts: torch.Tensor, discount: float = 0.75):
        if not 0.0 < discount < 1.0:
            raise ValueError(f"discount must be in (0, 1), got {discount}")
        counts = counts.double()  # (V, V): counts[v, w] = c(v, w)
        self.counts, self.discount = counts, discount
        self.unigram = (counts.sum(0) + 1) / (counts.sum() + len(counts))  # (V,) add-one
        total = counts.sum(1, keepdim=True)  # (V, 1) c(v)
        seen = (counts > 0).sum(1, keepdim=True)  # (V, 1) n(v)
        kept = (counts - discount).clamp(min=0) / total.clamp(min=1)  # (V, V)
        spread = torch.where(total > 0, discount * seen / total.clamp(min=1), torch.ones_like(total))  # (V, 1)
        self.log_probs = (kept + spread * self.unigram).log()  # (V, V)

    @classmethod
    def from_windows(cls, ids: torch.Tensor, vocab_size: int, discount: float = 0.75) -> "BigramLM":
        """Count every pair of neighbours (x_t, x_{t+1}) of the windows ids (n, T)."""
        pairs = ids[:, :-1].flatten() * vocab_size + ids[:, 1:].flatten()  # (n (T - 1),)
        return cls(torch.bincount(pairs, minlength=vocab_size * vocab_size).view(vocab_size, vocab_size), discount)

    def next_token_losses(self, ids: torch.Tensor) -> torch.Tensor:
        """(n,) each window's mean -log p(x_{t+1} | x_t) over pieces 1..T-2 of ids (n, T), as GPT is scored."""
        return -self.log_probs[ids[:, :-2], ids[:, 1:-1]].mean(1)


def _rows(values) -> list[list[int]]:
    return values.tolist() if hasattr(values, "tolist") else [list(row) for row in values]


def count_baselines(cfg: PretrainConfig) -> dict:
    """What the neighbouring tokens alone give on a run's held-out task: the accuracy of
    this module's count-based predictors (unigram, left neighbour, both neighbours),
    counted over the run's training examples and scored on exactly the held-out examples
    and masks its evaluations use (same corpus, vocabulary, length and seed). No training.
    Needs `cfg.vocab` (the run's vocabulary) and an in-memory corpus."""
    if cfg.vocab is None or cfg.stream:
        raise SettingError("count_baselines needs --vocab (the run's vocabulary) and no --stream")
    tokenizer = load_vocab_tokenizer(cfg.vocab, impl="fast")
    dataset, eval_dataset = build_datasets(cfg, load_corpus(cfg.corpus), tokenizer, Path(cfg.out or "."))
    counts = NeighbourCounts.from_rows(example.input_ids for example in dataset.examples)
    batch = collate_pretraining([eval_dataset[i] for i in range(len(eval_dataset))], pad_token_id=tokenizer.pad_token_id)
    return {**counts.score(batch["input_ids"], batch["labels"]), "training_tokens": counts.tokens,
            "heldout_predictions": int((batch["labels"] != IGNORE_INDEX).sum())}
