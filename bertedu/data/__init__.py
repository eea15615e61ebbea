"""Data for BERT: pretraining examples (NSP pairs), MLM masking, collators.

    from bertedu.data import mask_tokens, create_pretraining_examples, PretrainingDataset
"""

from .masking import (
    chinese_word_ids,
    mask_tokens,
    wordpiece_word_ids,
)
from .pretraining import (
    PretrainingDataset,
    PretrainingExample,
    build_pretraining_dataset,
    collate_pretraining,
    create_pretraining_examples,
)

__all__ = [
    "mask_tokens",
    "wordpiece_word_ids",
    "chinese_word_ids",
    "PretrainingExample",
    "create_pretraining_examples",
    "PretrainingDataset",
    "collate_pretraining",
    "build_pretraining_dataset",
]
