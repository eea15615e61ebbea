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
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from pathlib import Path

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
