"""Notebook 14's study: which part of a long document to read, on frozen features.

    window_starts      the first piece of each sliding window (the last aligned to the end)
    views              what a method reads of one document: a list of piece lists of K pieces
    ViewEncoder        a frozen encoder's mean-pooled vector of each view, each view encoded once
    majority_baseline  the same folds, predicting the training folds' most common label
    pooled             a document's probabilities: the mean of its views' (a vote)
    max_pooled         a document's vector: the elementwise maximum of its views' (hierarchical)
    cross_validated    accuracy per document: a softmax-regression head fitted on the other folds
                       (to convergence, its L2 chosen on held-out books), window predictions pooled

Methods (Sun et al. 2019, section 5.3): "head" the first K pieces, "tail" the last K, "head+tail"
the first `n_head` and the last K - n_head, "sliding windows" every window of K pieces.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..model.tasks import mean_pool
from ..training.probe import fit_logistic, pick_l2

METHODS = ("head", "tail", "head+tail", "sliding windows")


def window_starts(n: int, k: int, stride: int) -> list[int]:
    """Starts of windows of `k` pieces over `n`, every `stride`, plus one last window that ends
    at the end if the others leave pieces unread. Introduced in notebook 14 (and notebook 11's QA)."""
    starts = list(range(0, max(n - k, 0) + 1, stride))
    if starts[-1] + k < n:
        starts.append(n - k)
    return starts


def views(pieces: Sequence[str], method: str, k: int, n_head: int) -> list[list[str]]:
    """What `method` (`METHODS`) reads of a document: one or more lists of at most `k` pieces."""
    pieces = list(pieces)
    if method == "head":
        return [pieces[:k]]
    if method == "tail":
        return [pieces[-k:]]
    if method == "head+tail":
        return [pieces[:n_head] + pieces[max(n_head, len(pieces) - (k - n_head)):]]
    if method == "sliding windows":
        return [pieces[s : s + k] for s in window_starts(len(pieces), k, k)]
    raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")


class ViewEncoder:
    """`encoder` (a BertModel, eval mode) on `[CLS] view [SEP]`, mean-pooled over its tokens: (D,)
    per view. A view read by two methods (the head is also the first sliding window) is encoded once."""

    def __init__(self, encoder, tokenizer, batch_size: int = 64):
        self.encoder, self.tokenizer, self.batch_size = encoder, tokenizer, batch_size
        self.cache: dict[tuple, torch.Tensor] = {}

    @torch.no_grad()
    def __call__(self, piece_lists: Sequence[Sequence[str]]) -> torch.Tensor:
        """piece_lists: N views of equal length -> (N, D)."""
        tok = self.tokenizer
        new = list(dict.fromkeys(tuple(p) for p in piece_lists if tuple(p) not in self.cache))
        for i in range(0, len(new), self.batch_size):
            chunk = new[i : i + self.batch_size]
            x = torch.tensor([[tok.cls_token_id, *tok.convert_tokens_to_ids(p), tok.sep_token_id] for p in chunk])
            vectors = mean_pool(self.encoder(x).last_hidden_state, torch.ones_like(x))  # (B, D)
            self.cache.update(zip(chunk, vectors))
        return torch.stack([self.cache[tuple(p)] for p in piece_lists])  # (N, D)


L2_GRID = (1e-2, 1e-1, 1.0)  # the head's L2 strengths tried on held-out books


def pooled(probs: torch.Tensor, owner: torch.Tensor, n_docs: int) -> torch.Tensor:
    """Each document's class probabilities (n_docs, C): the mean of its views' (n_views, C), every
    view one equal vote."""
    counts = torch.bincount(owner, minlength=n_docs).unsqueeze(1)  # (n_docs, 1) views per document
    return torch.zeros(n_docs, probs.shape[1], dtype=probs.dtype).index_add_(0, owner, probs) / counts


def max_pooled(X: torch.Tensor, owner: torch.Tensor, n_docs: int) -> torch.Tensor:
    """One vector per document (n_docs, D): the elementwise maximum of its views' vectors X
    (n_views, D), the "hierarchical" reading of Sun et al. 2019 (section 5.3): encode every piece,
    pool, then classify the document once. A feature that one window shows strongly survives."""
    out = torch.full((n_docs, X.shape[1]), float("-inf"), dtype=X.dtype)
    return out.scatter_reduce(0, owner.unsqueeze(1).expand_as(X), X, "amax")  # (n_docs, D)


def cross_validated(X: torch.Tensor, y: torch.Tensor, owner: torch.Tensor, fold: torch.Tensor,
                    n_classes: int, grid: Sequence[float] = L2_GRID) -> torch.Tensor:
    """Per document, whether it is classified right when its fold is the test fold.

    X (n_views, D) the views' vectors, owner (n_views,) each view's document, y and fold
    (n_docs,). For each test fold the head is fitted on the views of the other folds: its L2
    strength chosen by `pick_l2` with one of them as dev (the held-out books), then refitted on
    both. A document's prediction is the mean of its views' probabilities (`pooled`).
    """
    n_docs, folds = len(y), fold.unique().tolist()
    correct = torch.zeros(n_docs, dtype=torch.bool)
    for k in folds:
        train_folds = [f for f in folds if f != k]
        part = {f: fold[owner] == f for f in train_folds}  # (n_views,) masks
        l2, _ = pick_l2((X[part[train_folds[0]]], y[owner][part[train_folds[0]]]),
                        (X[part[train_folds[-1]]], y[owner][part[train_folds[-1]]]), n_classes, grid)
        train = fold[owner] != k
        predict = fit_logistic(X[train], y[owner][train], n_classes, l2=l2)
        probs = pooled(predict(X), owner, n_docs)  # (n_docs, C)
        correct[fold == k] = (probs.argmax(-1) == y)[fold == k]
    return correct


def majority_baseline(y: torch.Tensor, fold: torch.Tensor) -> torch.Tensor:
    """Per document, whether the most common label of the OTHER folds (the training labels) is its label."""
    correct = torch.zeros(len(y), dtype=torch.bool)
    for k in fold.unique().tolist():
        majority = torch.bincount(y[fold != k]).argmax()
        correct[fold == k] = y[fold == k] == majority
    return correct
