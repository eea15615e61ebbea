import os

import pytest
import torch

from bertedu.pretrained import minilm_vocab_path
from bertedu.tokenizer import load_vocab_tokenizer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def tok():
    """The reference tokenizer over all-MiniLM-L6-v2's uncased vocabulary."""
    return load_vocab_tokenizer(minilm_vocab_path())


@pytest.fixture(scope="session")
def fast_tok():
    """The fast tokenizer over the same vocabulary."""
    return load_vocab_tokenizer(minilm_vocab_path(), impl="fast")


def ragged_batch(vocab_size: int, lengths=(9, 5, 7, 2), type_vocab_size: int = 2, pad_id: int = 0):
    """A padded batch of sequences of the given real lengths, with two segments each."""
    B, T = len(lengths), max(lengths)
    g = torch.Generator().manual_seed(1234)
    input_ids = torch.randint(1, vocab_size, (B, T), generator=g)
    attention_mask = torch.zeros(B, T, dtype=torch.long)
    token_type_ids = torch.zeros(B, T, dtype=torch.long)
    for i, n in enumerate(lengths):
        attention_mask[i, :n] = 1
        token_type_ids[i, n // 2 : n] = min(1, type_vocab_size - 1)
    input_ids[attention_mask == 0] = pad_id
    return input_ids, token_type_ids, attention_mask
