"""A linear head fitted to convergence on frozen features: the feature-based baseline done right.

Introduced in notebook 10 (section 5 (b)): BERT's section 5.3 uses a frozen encoder's vectors
as features for a classifier. A head trained by a dozen Adam steps has not finished learning,
so a comparison against fine-tuning would measure its budget, not the features. Here the head is
multinomial logistic regression (standardised features, an L2 penalty on the weights, not the
bias) minimised by L-BFGS until its gradient vanishes, and the penalty is chosen on a held-out
split (dev), never on test.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.nn.functional as F


def fit_logistic(X: torch.Tensor, labels: torch.Tensor, n_classes: int, l2: float = 1e-2,
                 max_iter: int = 500) -> Callable[[torch.Tensor], torch.Tensor]:
    """Fit softmax regression on `X` (N, D) with integer `labels` (N,); return `predict(X) -> (N, C)`
    probabilities. Loss: mean cross-entropy + l2 * ||W||^2 on features standardised by the
    training set's mean and standard deviation (fitted once, applied to every later X)."""
    X = X.double()
    mu, sd = X.mean(0), X.std(0) + 1e-6
    Z = (X - mu) / sd  # (N, D)
    W = torch.zeros(X.shape[1], n_classes, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(n_classes, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([W, b], max_iter=max_iter, tolerance_grad=1e-9, tolerance_change=1e-12,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = F.cross_entropy(Z @ W + b, labels) + l2 * W.pow(2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    W, b = W.detach(), b.detach()
    return lambda X_new: (((X_new.double() - mu) / sd) @ W + b).softmax(-1).float()  # (N, C)


def pick_l2(train: tuple[torch.Tensor, torch.Tensor], dev: tuple[torch.Tensor, torch.Tensor], n_classes: int,
            grid: Sequence[float] = (1e-3, 1e-2, 1e-1, 1.0)) -> tuple[float, dict[float, float]]:
    """The L2 strength of `grid` whose head, fitted on `train` = (X, labels), is most accurate on
    `dev` (the smallest on a tie), and every strength's dev accuracy."""
    scores = {}
    for l2 in grid:
        predict = fit_logistic(*train, n_classes, l2=l2)
        scores[l2] = (predict(dev[0]).argmax(-1) == dev[1]).float().mean().item()
    best = max(grid, key=lambda l2: (scores[l2], -l2))
    return best, scores
