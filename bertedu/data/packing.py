"""FULL-SENTENCES packing: RoBERTa's inputs, whole sentences laid end to end across documents.

Introduced in notebook 15. Liu et al. 2019 ("RoBERTa", section 4.2) compared four input
formats and kept this one:

    "Each input is packed with full sentences sampled contiguously from one or more
    documents, such that the total length is at most 512 tokens. Inputs may cross document
    boundaries. When we reach the end of one document, we begin sampling sentences from
    the next document and add an extra separator token between documents."

There is no sentence pair and no NSP label, so nothing is padded except a corpus's very
last block: almost every position the model computes is a real token.

    >>> blocks = pack_full_sentences(documents, max_tokens=126, separator_id=2)
    >>> [0, *blocks[0].input_ids, 2]     # <s> block </s>: what RoBERTa reads (128 tokens)

`documents` are lists of sentences, each sentence a list of token ids. The rules:

- sentences are taken in order and a block holds whole sentences only, as many as fit in
  `max_tokens` (the separator included);
- between the last sentence of one document and the first of the next goes
  `separator_id`, unless a block starts there (a block never begins with a separator);
- a sentence longer than `max_tokens` on its own is cut into pieces of `max_tokens`, each
  its own block (fairseq's "complete" mode would emit it as one over-long block instead);
- empty sentences and empty documents are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

SEPARATOR = -1  # the document index `PackedBlock.doc_ids` gives a separator token


@dataclass
class PackedBlock:
    """One packed input. `doc_ids[i]` is the document token i came from (`SEPARATOR` on a
    separator): for pictures and checks, not for the model."""

    input_ids: list[int] = field(default_factory=list)
    doc_ids: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.input_ids)


def pack_full_sentences(
    documents: Sequence[Sequence[Sequence[int]]],
    max_tokens: int,
    separator_id: int,
) -> list[PackedBlock]:
    """Documents of tokenised sentences -> FULL-SENTENCES blocks of at most `max_tokens`.

    Args:
        documents: a list of documents, each a list of sentences, each a list of token ids.
        max_tokens: the most tokens a block holds, separators included (RoBERTa: 510, so
            that `<s>` and `</s>` make 512).
        separator_id: the token put between two documents (RoBERTa's `</s>`).
    Returns:
        the blocks in corpus order; every token of every sentence is in exactly one block.
    """
    if max_tokens < 2:
        raise ValueError(f"max_tokens must be at least 2 (a token and a separator), got {max_tokens}")
    blocks: list[PackedBlock] = []
    block = PackedBlock()
    previous_doc = None  # the document the current block's last sentence came from

    def close_block() -> None:
        nonlocal block
        if block.input_ids:
            blocks.append(block)
        block = PackedBlock()

    for d, document in enumerate(documents):
        for sentence in document:
            sentence = list(sentence)
            if not sentence:
                continue
            if len(sentence) > max_tokens:  # too long for any block: cut it into its own blocks
                close_block()
                for start in range(0, len(sentence), max_tokens):
                    piece = sentence[start:start + max_tokens]
                    blocks.append(PackedBlock(piece, [d] * len(piece)))
                previous_doc = d
                continue
            # a new document continues the block after a separator (a block never starts with one)
            needs_separator = bool(block.input_ids) and previous_doc != d
            cost = len(sentence) + needs_separator
            if len(block) + cost > max_tokens:
                close_block()  # whole sentences only: this one starts the next block
                needs_separator = False
            if needs_separator:
                block.input_ids.append(separator_id)
                block.doc_ids.append(SEPARATOR)
            block.input_ids.extend(sentence)
            block.doc_ids.extend([d] * len(sentence))
            previous_doc = d
    close_block()
    return blocks
