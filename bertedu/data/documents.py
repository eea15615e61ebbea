"""Whole documents as MLM sequences: `[CLS] pieces [SEP]` runs, their held-out split, their batches.

The data of `bertedu pretrain --packing documents` (the minilm-mlm recipe, notes/minilm_mlm.md)
and of `bertedu distill`; notebook 18 (DistilBERT) reads its held-out sequences from here.

    split_documents      whole documents held out (not sentences), by a seeded shuffle
    held_out_split       that split at the fixed wiki-en measure's settings (5%, seed 0)
    wiki_en_held_out     the held-out wiki-en documents: the measure of minilm-mlm and of distillation
    document_sequences   each document's pieces cut into `[CLS] pieces [SEP]` runs
    make_batch           pad, then mask 15% of the pieces (80/10/10), all draws from one generator
    unigram_log_probs    log unigram frequencies of the pieces: a fresh decoder bias's start

Shapes: `B` batch, `T` tokens, `V` vocabulary.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterable, Sequence

import torch

from ..errors import SettingError
from .masking import mask_tokens, wordpiece_word_ids

HELD_OUT_FRACTION = 0.05  # 5 of wiki-en's 102 documents
HELD_OUT_SEED = 0  # fixed: every run is measured on the same documents, whatever its --seed
MIN_PIECES = 8  # a run shorter than this (a document's last few pieces) teaches nothing


def split_documents(documents: list, fraction: float, seed: int) -> tuple[list, list]:
    """(training, held-out) documents: whole documents are held out (not sentences), so
    NSP's negatives can't leak across. At least two are held out (NSP needs two)."""
    order = list(range(len(documents)))
    random.Random(seed).shuffle(order)
    n_eval = max(2, round(fraction * len(documents)))  # NSP negatives need two documents
    if len(documents) - n_eval < 2:
        raise SettingError(f"the corpus has {len(documents)} document(s): {n_eval} are held out for evaluation and "
                           f"training needs 2 more, so give at least {n_eval + 2} (one sentence per line, a blank "
                           "line between documents)")
    held = set(order[:n_eval])
    train_docs = [d for i, d in enumerate(documents) if i not in held]
    eval_docs = [d for i, d in enumerate(documents) if i in held]
    return train_docs, eval_docs


def held_out_split(documents: list, fraction: float = HELD_OUT_FRACTION,
                   seed: int = HELD_OUT_SEED) -> tuple[list, list]:
    """(training, held-out) documents, split by a seed that does not follow the run's --seed:
    for wiki-en, the documents `bertedu pretrain` holds out at its defaults (seed 0)."""
    return split_documents(documents, fraction, seed)


@functools.lru_cache(maxsize=1)
def wiki_en_held_out() -> tuple:
    """The held-out wiki-en documents (lists of sentences), read once per process."""
    from .corpora import wiki_en

    return tuple(held_out_split(list(wiki_en()))[1])


def document_sequences(documents: Iterable[Sequence[str]], tokenizer, max_seq_length: int) -> list[list[int]]:
    """Each document's word pieces, read in order and cut into `[CLS] pieces [SEP]` runs of
    at most `max_seq_length` ids (a run never crosses a document boundary; a last run of
    fewer than 8 pieces is dropped)."""
    body = max_seq_length - 2
    sequences = []
    for document in documents:
        ids: list[int] = []
        for sentence in document:
            ids.extend(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(sentence)))
        for start in range(0, len(ids), body):
            piece = ids[start:start + body]
            if len(piece) >= MIN_PIECES:
                sequences.append([tokenizer.cls_token_id, *piece, tokenizer.sep_token_id])
    return sequences


def make_batch(sequences: Sequence[Sequence[int]], tokenizer, generator: torch.Generator,
               mlm_probability: float = 0.15, whole_words: bool = False):
    """Pad, then mask (15% of non-special pieces; 80% [MASK], 10% random, 10% kept).

    whole_words: select whole words (a piece starting with ## belongs to the word before
    it) with one 80/10/10 decision per word, instead of single pieces. Every draw comes
    from `generator`. Returns input_ids, attention_mask (B, T) and labels (B, T), -100
    where not selected.
    """
    T = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), T), tokenizer.pad_token_id, dtype=torch.long)  # (B, T)
    for i, s in enumerate(sequences):
        ids[i, :len(s)] = torch.tensor(s)
    attention_mask = (ids != tokenizer.pad_token_id).long()  # (B, T)
    special = torch.zeros_like(ids)  # (B, T): [CLS], [SEP] and padding are never selected
    for token_id in tokenizer.special_ids:
        special |= (ids == token_id).long()
    word_ids = None
    if whole_words:  # (B, T); padding is a special token and gets -1
        word_ids = torch.tensor([wordpiece_word_ids(tokenizer.convert_ids_to_tokens(row.tolist()))
                                 for row in ids])
    masked, labels = mask_tokens(ids, special, mask_token_id=tokenizer.mask_token_id,
                                 vocab_size=len(tokenizer), mlm_probability=mlm_probability,
                                 generator=generator, special_ids=tokenizer.special_ids, word_ids=word_ids)
    return masked, attention_mask, labels


def unigram_log_probs(sequences: Iterable[Sequence[int]], vocab_size: int, special_ids) -> torch.Tensor:
    """log p(piece) over the training pieces, add-one smoothed, special tokens at the floor: (V,)."""
    counts = torch.ones(vocab_size)  # (V,)
    for s in sequences:
        counts += torch.bincount(torch.tensor(s), minlength=vocab_size).float()
    counts[sorted(special_ids)] = 1.0
    return (counts / counts.sum()).log()
