"""Right-padding rows of different lengths into one (B, T) batch tensor.

Every collator pads the same way: real tokens first, then `value` up to the longest row
(or a given length). Padding goes on the right because BERT's positions are absolute:
a sentence's first token is position 0 however much its batch is padded.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def pad_rows(rows: Sequence[Sequence[int] | torch.Tensor], value: int, length: int | None = None) -> torch.Tensor:
    """Rows (lists of ints or 1-D tensors) -> (B, T) LongTensor, padded on the right with `value`.

    T is the longest row's length, or `length` when given (it must hold every row).
    """
    if not rows:
        raise ValueError("pad_rows() got no rows: a batch needs at least one")
    longest = max(len(r) for r in rows)
    T = longest if length is None else length
    if T < longest:
        raise ValueError(f"length={length} is shorter than the longest row ({longest}); truncate the rows first")
    out = torch.full((len(rows), T), value, dtype=torch.long)  # (B, T)
    for b, row in enumerate(rows):
        out[b, : len(row)] = torch.as_tensor(row, dtype=torch.long)
    return out
