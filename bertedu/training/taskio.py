"""Task families for fine-tuning: examples <-> model inputs, and model outputs <-> predictions.

Introduced in the fine-tuning notebooks (08-11); `bertedu.training.finetune` runs them. Each task
family gets a `TaskIO`:

    classification / pair-classification   [CLS] A [SEP] (B [SEP]) -> one label
                                            accuracy, F1 (binary on labels[1]; macro if > 2)
    tagging                                 words -> pieces, first piece carries the tag
                                            (a CRF head: its Viterbi tags instead of argmax)
                                            entity-level precision / recall / F1, error counts
    qa                                      [CLS] question [SEP] window [SEP], sliding window
                                            SQuAD exact match / F1 (percentages); with
                                            unanswerable questions (SQuAD 2.0) also HasAns /
                                            NoAns, "no answer" being the [CLS] span

`predict(model, io, examples)` runs a model over a split and decodes its predictions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol

import torch

from ..errors import SettingError
from ..model.constants import IGNORE_INDEX
from ..data.padding import pad_rows
from ..data.qa import collate_qa, decode_qa, qa_features
from ..data.tagging import align_word_labels, encode_words, word_predictions
from .metrics import (
    accuracy,
    best_null_threshold,
    entity_prf,
    f1_score,
    squad_metrics,
    squad_v2_metrics,
    tagging_errors,
)
from ..utils import autocast, eval_mode

class InputSettings(Protocol):
    """What `task_io` reads of a run's settings (`FinetuneConfig` has all of it): declared here,
    so this module needs nothing from finetune.py, which builds on it."""

    doc_stride: int
    max_query_length: int
    max_answer_length: int
    segment_ids: bool

    def resolved_max_seq_length(self, kind: str) -> int: ...


class Predictions(list):
    """One prediction per example (a list, as `decode` always returned), with `scores`: per
    example, what the prediction rests on. Classification: {label: probability}; tagging: each
    word's probability of its tag (None with a CRF, whose Viterbi path has none); QA: the
    answer span's score (start logit + end logit) and character offsets, and with unanswerable
    questions its null margin. `bertedu finetune` writes both to predictions_*.jsonl."""

    def __init__(self, predictions, scores):
        super().__init__(predictions)
        self.scores = list(scores)


def word_probabilities(row: torch.Tensor, word_ids: list, num_words: int) -> Optional[list]:
    """Each word's probability of its predicted tag (the softmax at its first piece, rounded to
    6 places); None for a word cut by truncation, and None altogether for a CRF's tags (a 1-D row)."""
    if row.dim() != 2:
        return None
    probs = row.float().softmax(-1)  # (T, C)
    first = {}
    for position, word in enumerate(word_ids):
        if word is not None and word not in first:
            first[word] = position
    return [round(float(probs[first[w]].max()), 6) if w in first else None for w in range(num_words)]


def _inputs(items: list[dict], pad_token_id: int) -> dict[str, torch.Tensor]:
    return {
        "input_ids": pad_rows([it["input_ids"] for it in items], pad_token_id),  # (B, T)
        "token_type_ids": pad_rows([it["token_type_ids"] for it in items], 0),  # (B, T)
        "attention_mask": pad_rows([[1] * len(it["input_ids"]) for it in items], 0),  # (B, T); padding unseen
    }


class TaskIO:
    """What fine-tuning needs to know about a task family (one subclass per family).

    encode(examples, training) -> items (what the data set holds; QA: one per window)
    collate(items, generator=None) -> batch dict for the model (labels when all have them)
    rows(output, items) -> one output per item, padding cut off
    decode(examples, items, rows) -> one prediction per example
    gold(example), score(examples, predictions) -> the metrics dict
    """

    main_metric = "accuracy"

    def __init__(self, task, tokenizer, max_seq_length: int):
        self.task, self.tokenizer, self.max_seq_length = task, tokenizer, max_seq_length

    def gold(self, example):
        raise NotImplementedError


class ClassificationIO(TaskIO):
    """Single sentences and pairs: `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, one label."""

    main_metric = "accuracy"

    def __init__(self, task, tokenizer, max_seq_length: int, segment_ids: bool = True):
        super().__init__(task, tokenizer, max_seq_length)
        self.label_ids = {label: i for i, label in enumerate(task.labels)}
        self.segment_ids = segment_ids  # False: every token in segment 0, [SEP] alone ends text A

    def encode(self, examples, training: bool = False) -> list[dict]:
        texts = [e.text_a if e.text_b is None else (e.text_a, e.text_b) for e in examples]
        # longest_first: a pair loses tokens from its longer side first
        enc = self.tokenizer.encode_batch(texts, max_length=self.max_seq_length, pad=False,
                                          truncation="longest_first") if texts else {"input_ids": []}
        items = []
        for i, e in enumerate(examples):
            if e.label is not None and e.label not in self.label_ids:
                raise ValueError(f"{self.task.name}: label {e.label!r} of example {e.id!r} is not one of "
                                 f"{self.task.labels}")
            segments = enc["token_type_ids"][i] if self.segment_ids else [0] * len(enc["input_ids"][i])
            items.append({"input_ids": enc["input_ids"][i], "token_type_ids": segments,
                          "label": self.label_ids.get(e.label)})
        return items

    def collate(self, items: list[dict], generator=None) -> dict[str, torch.Tensor]:
        batch = _inputs(items, self.tokenizer.pad_token_id)
        if all(it["label"] is not None for it in items):
            batch["labels"] = torch.tensor([it["label"] for it in items])  # (B,)
        return batch

    def rows(self, out, items) -> list[torch.Tensor]:
        return list(out.logits.float().cpu())  # B rows of (C,)

    def decode(self, examples, items, rows) -> Predictions:
        probabilities = [r.float().softmax(-1).tolist() for r in rows]
        return Predictions([self.task.labels[int(r.argmax())] for r in rows],
                           [{label: round(p, 6) for label, p in zip(self.task.labels, probs)} for probs in probabilities])

    def gold(self, example):
        return example.label

    def score(self, examples, predictions) -> dict:
        golds = [self.label_ids[e.label] for e in examples]
        preds = [self.label_ids[p] for p in predictions]
        if len(self.task.labels) == 2:  # F1 of the second label: pos, paraphrase, equivalent
            f1 = f1_score(preds, golds, "binary", pos_label=1)
        else:
            f1 = f1_score(preds, golds, "macro")
        return {"accuracy": accuracy(preds, golds), "f1": f1}


class TaggingIO(TaskIO):
    """Words (or Chinese characters) with BIO tags; a word's first piece carries its tag,
    its other pieces and the specials get -100 (left out of the loss)."""

    main_metric = "f1"

    def __init__(self, task, tokenizer, max_seq_length: int):
        super().__init__(task, tokenizer, max_seq_length)
        self.label_ids = {label: i for i, label in enumerate(task.labels)}
        self.outside = self.label_ids.get("O", 0)

    def encode(self, examples, training: bool = False) -> list[dict]:
        items = []
        for e in examples:
            unknown = set(e.tags) - set(self.label_ids)
            if unknown:
                raise ValueError(f"{self.task.name}: tags {sorted(unknown)} of example {e.id!r} are not among "
                                 f"the task's labels {self.task.labels}")
            # Words past max_seq_length - 2 pieces are cut: they get no token, and "O" below.
            enc = encode_words(self.tokenizer, e.tokens, max_length=self.max_seq_length)
            items.append({"input_ids": enc.input_ids, "token_type_ids": enc.token_type_ids,
                          "labels": align_word_labels(enc.word_ids, [self.label_ids[t] for t in e.tags]),
                          "word_ids": enc.word_ids, "num_words": len(e.tokens)})
        return items

    def collate(self, items: list[dict], generator=None) -> dict[str, torch.Tensor]:
        batch = _inputs(items, self.tokenizer.pad_token_id)
        batch["labels"] = pad_rows([it["labels"] for it in items], IGNORE_INDEX)  # (B, T); padding never counts
        return batch

    def rows(self, out, items) -> list[torch.Tensor]:
        if getattr(out, "tags", None) is not None:  # a CRF head: its Viterbi path, at the first pieces
            tags = out.tags.cpu()  # (B, T)
            return [tags[i, : len(it["input_ids"])] for i, it in enumerate(items)]  # (T_i,) each
        logits = out.logits.float().cpu()  # (B, T, C)
        return [logits[i, : len(it["input_ids"])] for i, it in enumerate(items)]  # (T_i, C) each

    def decode(self, examples, items, rows) -> Predictions:
        labels = self.task.labels
        return Predictions([[labels[p] for p in word_predictions(r, it["word_ids"], it["num_words"], fill=self.outside)]
                            for it, r in zip(items, rows)],
                           [word_probabilities(r, it["word_ids"], it["num_words"]) for it, r in zip(items, rows)])

    def gold(self, example):
        return list(example.tags)

    def score(self, examples, predictions) -> dict:
        """Entity precision, recall, F1 and per_type; "errors" counts invalid BIO and the wrong entities by kind."""
        golds = [e.tags for e in examples]
        return {**entity_prf(golds, predictions), "errors": tagging_errors(golds, predictions)}


@dataclass
class _Window:
    example: int  # index of the example in the split
    feature: object  # a data.qa.QAFeature


class QAIO(TaskIO):
    """SQuAD-style extractive QA with a sliding window: each example becomes one or more
    windows `[CLS] question [SEP] context piece [SEP]`; the answer is the best span over
    all windows of the example (`decode_qa`), cut out of the original context.

    SQuAD 2.0 (`version2`: the task has unanswerable questions), as in BERT's run_squad:
    an unanswerable question trains every window towards the [CLS] span (start = end = 0);
    its null score is the smallest [CLS] score (start_logit[0] + end_logit[0]) over the
    windows, and the answer is "" (no answer) when null score - best span score >
    `null_threshold`, which `choose_null_threshold` sets on dev. Scored with v2.0's metric.
    """

    main_metric = "f1"

    def __init__(self, task, tokenizer, max_seq_length: int, doc_stride: int = 128,
                 max_query_length: int = 64, max_answer_length: int = 30, version2: bool = False):
        super().__init__(task, tokenizer, max_seq_length)
        self.doc_stride, self.max_query_length = doc_stride, max_query_length
        self.max_answer_length = max_answer_length
        self.version2, self.null_threshold = version2, 0.0
        self.last_spans: list[str] = []  # the latest decode's best non-null answers ...
        self.last_null_margins: list[float] = []  # ... and null score - best span score ...
        self.last_scores: list[dict] = []  # ... and their scores and character offsets

    def encode(self, examples, training: bool = False) -> list[_Window]:
        windows = []
        for i, e in enumerate(examples):
            if training and not e.answers and not self.version2:
                continue  # SQuAD 1.1 style: a question without an answer has nothing to point at
            answer = e.answers[0] if e.answers else None  # train on the first gold answer
            features = qa_features(
                self.tokenizer, e.question, e.context, self.max_seq_length, self.doc_stride, self.max_query_length,
                answer_start=answer["answer_start"] if answer else None, answer_text=answer["text"] if answer else None,
            )
            if training and answer is None:
                for f in features:  # SQuAD 2.0: no answer is the [CLS] span in every window
                    f.start_position = f.end_position = 0
            windows.extend(_Window(i, f) for f in features)
        return windows

    def collate(self, items: list[_Window], generator=None) -> dict[str, torch.Tensor]:
        return collate_qa([w.feature for w in items], self.tokenizer.pad_token_id)

    def rows(self, out, items) -> list[tuple[torch.Tensor, torch.Tensor]]:
        start, end = out.start_logits.float().cpu(), out.end_logits.float().cpu()  # (B, T) each
        return [(start[i, : len(w.feature)], end[i, : len(w.feature)]) for i, w in enumerate(items)]

    def decode(self, examples, items, rows) -> list[str]:
        by_example: dict[int, list] = {}
        for w, r in zip(items, rows):
            by_example.setdefault(w.example, []).append((w.feature, r))
        spans, margins, scores = [], [], []
        for i, e in enumerate(examples):
            windows = by_example.get(i, [])
            try:
                best = decode_qa([s for _, (s, _) in windows], [t for _, (_, t) in windows],
                                 [f for f, _ in windows], e.context, self.max_answer_length)
                spans.append(best.text)
                null = min(float(s[0] + t[0]) for _, (s, t) in windows)  # [CLS]: position 0 of each window
                margins.append(null - best.score)
                scores.append({"score": round(best.score, 4), "start": best.start_char, "end": best.end_char})
            except ValueError:  # no window with a valid span (an empty context)
                spans.append("")
                margins.append(float("inf"))
                scores.append({"score": None, "start": None, "end": None})
        self.last_spans, self.last_null_margins, self.last_scores = spans, margins, scores
        return self._decide(spans, margins)

    def _decide(self, spans: list[str], margins: list[float]) -> Predictions:
        if not self.version2:
            return Predictions(spans, self.last_scores)
        scores = [{**score, "null_margin": round(m, 4)} for score, m in zip(self.last_scores, margins)]
        return Predictions(["" if m > self.null_threshold else s for s, m in zip(spans, margins)], scores)

    def choose_null_threshold(self, examples) -> list[str]:
        """SQuAD 2.0: set `null_threshold` to the one that maximises F1 on `examples` (dev),
        from the latest decode of those examples (`predict` them first); returns their
        predictions under it. The official evaluation's best_f1_thresh."""
        ids = [e.id or str(i) for i, e in enumerate(examples)]
        self.null_threshold, _ = best_null_threshold(
            dict(zip(ids, self.last_spans)), {q: self.gold(e) for q, e in zip(ids, examples)},
            dict(zip(ids, self.last_null_margins)))
        return self._decide(self.last_spans, self.last_null_margins)

    def gold(self, example):
        return [a["text"] for a in example.answers]

    def score(self, examples, predictions) -> dict:
        preds = {e.id or str(i): p for i, (e, p) in enumerate(zip(examples, predictions))}
        if self.version2:  # every question counts; an unanswerable one is right only with ""
            golds = {e.id or str(i): self.gold(e) for i, e in enumerate(examples)}
            return squad_v2_metrics(preds, golds) if golds else {}
        golds = {e.id or str(i): self.gold(e) for i, e in enumerate(examples) if e.answers}
        return squad_metrics(preds, golds) if golds else {}


def task_io(task, tokenizer, cfg: InputSettings) -> TaskIO:
    """The `TaskIO` for a `TaskData`'s kind, with `cfg`'s sequence settings."""
    length = cfg.resolved_max_seq_length(task.kind)
    if task.kind in ("classification", "pair-classification"):
        return ClassificationIO(task, tokenizer, length, getattr(cfg, "segment_ids", True))
    if task.kind == "tagging":
        return TaggingIO(task, tokenizer, length)
    if cfg.doc_stride >= length:
        raise SettingError(f"--doc-stride {cfg.doc_stride} must be below --max-seq-length {length}: each window "
                           "starts doc_stride pieces after the last (BERT on SQuAD: 128 at 384)")
    version2 = any(not e.answers for e in (*task.train, *task.dev))  # SQuAD 2.0's unanswerable questions
    return QAIO(task, tokenizer, length, cfg.doc_stride, cfg.max_query_length, cfg.max_answer_length, version2)


@torch.no_grad()
def predict(model, io: TaskIO, examples: list, batch_size: int = 32, items: Optional[list] = None,
            precision: str = "fp32") -> tuple[list, Optional[float]]:
    """(one prediction per example, mean loss or None) for a split, in eval mode.

    `items`: the examples already encoded (`io.encode(examples)`), to encode only once.
    The loss is the mean over batches that have labels, weighted by their size.
    """
    items = io.encode(examples) if items is None else items
    device = next(model.parameters()).device
    rows, loss_sum, loss_n = [], 0.0, 0
    with eval_mode(model), autocast(precision, device):
        for b in range(0, len(items), batch_size):
            chunk = items[b : b + batch_size]
            batch = {k: v.to(device) for k, v in io.collate(chunk).items()}
            out = model(**batch)
            if out.loss is not None:
                loss_sum, loss_n = loss_sum + float(out.loss) * len(chunk), loss_n + len(chunk)
            rows.extend(io.rows(out, chunk))
    return io.decode(examples, items, rows), (loss_sum / loss_n if loss_n else None)
