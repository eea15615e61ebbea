"""Small helpers every notebook's first cell uses: seeds, threads, the scale switch."""

from __future__ import annotations

import os
import random

import torch


def seed_everything(seed: int = 0) -> torch.Generator:
    """Seed Python, NumPy (if present) and PyTorch; return a torch.Generator seeded the same."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # numpy is a dependency, but seeding must not be what breaks
        pass
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def course_scale() -> str:
    """"cpu" (small runs, what the stored notebooks show) or "gpu" (BERT-BASE, full data).

    The one switch for expensive work: set BERTEDU_SCALE=gpu or cpu; unset, it is "gpu"
    exactly when CUDA is available.
    """
    value = os.environ.get("BERTEDU_SCALE", "").strip().lower()
    if value in ("cpu", "gpu"):
        return value
    if value:
        raise ValueError(f"BERTEDU_SCALE must be 'cpu' or 'gpu', got {value!r}")
    return "gpu" if torch.cuda.is_available() else "cpu"


def setup_notebook(seed: int = 0, threads: int = 2) -> str:
    """Seeds, thread count and the scale; returns the scale ("cpu" or "gpu")."""
    torch.set_num_threads(threads)
    seed_everything(seed)
    return course_scale()
