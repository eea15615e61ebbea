"""pad_rows: the right-padding every collator uses (bertedu.data.padding)."""

import pytest
import torch

from bertedu.data.padding import pad_rows


def test_rows_are_padded_on_the_right_to_the_longest():
    batch = pad_rows([[5, 6, 7], [8], []], value=0)
    assert batch.dtype == torch.long
    assert batch.tolist() == [[5, 6, 7], [8, 0, 0], [0, 0, 0]]


def test_tensor_rows_a_fixed_length_and_a_fill_value():
    rows = [torch.tensor([1, 2]), torch.tensor([3, 4, 5])]
    assert pad_rows(rows, value=-100, length=5).tolist() == [[1, 2, -100, -100, -100], [3, 4, 5, -100, -100]]


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="no rows"):
        pad_rows([], value=0)
    with pytest.raises(ValueError, match="shorter than the longest row"):
        pad_rows([[1, 2, 3]], value=0, length=2)
