"""Data for BERT: corpora, pretraining examples (NSP pairs), MLM masking, collators, tasks.

Everything that turns text and files into examples: the tokenizer (`tokenizer.py`, WordPiece
written out and the fast path on `tokenizers`, notebook 01) and how its vocabulary is learnt
(`wordpiece_train.py`, notebook 01), the embedded corpora
(`corpora.py`, `sentences.py`), vocabularies (`vocab.py`), MLM masking (`masking.py`,
notebook 05), NSP and SOP pairs and packing (`pretraining.py`, `sop.py`, `packing.py`,
`stream.py` for corpora larger than memory; `documents.py` for whole documents cut into
`[CLS] pieces [SEP]` runs, minilm-mlm's and distillation's; `long_documents.py`, whole Bible chapters
labelled by genre for notebook 14), the published task formats and a user's own
files (`formats.py`, `files.py`, `user_files.py`, `task_data.py`), and fine-tuning inputs:
word labels to pieces and back (`tagging.py`), the QA sliding window and span decoding
(`qa.py`), and `pad_rows` (`padding.py`), the right-padding every collator uses.

May import: `bertedu.model` (its constants), `bertedu.errors`, `bertedu.utils`; never
`bertedu.training`, `bertedu.course` or the CLI.

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
