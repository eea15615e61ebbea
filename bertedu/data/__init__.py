"""Data for BERT: corpora, pretraining examples (NSP pairs), MLM masking, collators, tasks.

Fine-tuning inputs live here too: word labels to pieces and back (`bertedu.data.tagging`),
the QA sliding window and span decoding (`bertedu.data.qa`), and `pad_rows`
(`bertedu.data.padding`), the right-padding every collator uses.

    from bertedu.data import mask_tokens, create_pretraining_examples, PretrainingDataset
    from bertedu.data import load_corpus, load_task
"""

from .corpora import Corpus, load_corpus
from .formats import QAExample, TaggingExample, TaskData, TextClassificationExample

from .masking import IGNORE_INDEX, mask_tokens, segmented_word_ids, wordpiece_word_ids
from .pretraining import (
    PretrainingDataset,
    PretrainingExample,
    build_pretraining_dataset,
    collate_pretraining,
    create_packed_examples,
    create_pretraining_examples,
    example_generator,
)
from .task_data import TASKS, load_task

__all__ = [
    "Corpus",
    "load_corpus",
    "TaskData",
    "TextClassificationExample",
    "TaggingExample",
    "QAExample",
    "TASKS",
    "load_task",
    "mask_tokens",
    "wordpiece_word_ids",
    "segmented_word_ids",
    "IGNORE_INDEX",
    "PretrainingExample",
    "create_packed_examples",
    "create_pretraining_examples",
    "PretrainingDataset",
    "collate_pretraining",
    "build_pretraining_dataset",
    "example_generator",
]
