"""Data for BERT: pretraining examples (NSP pairs), MLM masking, collators.

    from bertedu.data import mask_tokens, create_pretraining_examples, PretrainingDataset
"""

from .masking import IGNORE_INDEX, mask_tokens, segmented_word_ids, wordpiece_word_ids
from .pretraining import (
    PretrainingDataset,
    PretrainingExample,
    build_pretraining_dataset,
    collate_pretraining,
    create_pretraining_examples,
    example_generator,
)

__all__ = [
    "mask_tokens",
    "wordpiece_word_ids",
    "segmented_word_ids",
    "IGNORE_INDEX",
    "PretrainingExample",
    "create_pretraining_examples",
    "PretrainingDataset",
    "collate_pretraining",
    "build_pretraining_dataset",
    "example_generator",
]
