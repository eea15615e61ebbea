"""The feed-forward non-linearities by name: the one list `BertConfig.hidden_act` is checked
against and the encoder and the MLM head read.

BERT uses the exact (erf) GELU, x * Phi(x) (Hendrycks and Gimpel 2016); the tanh
approximation is what the original TensorFlow code and GPT-2 compute ("gelu_new" in
Hugging Face configs).
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import torch
import torch.nn.functional as F

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": F.gelu,
    "gelu_tanh": partial(F.gelu, approximate="tanh"),
    "relu": F.relu,
}


def activation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The function called `name` (a key of `ACTIVATIONS`)."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]
