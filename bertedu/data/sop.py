"""Sentence-order prediction (SOP) examples: ALBERT's replacement for NSP.

Introduced in notebook 16. Lan et al. 2020 ("ALBERT", section 3.1):

    "SOP loss uses as positive examples the same technique as BERT (two consecutive
    segments from the same document), and as negative examples the same two consecutive
    segments but with their order swapped."

NSP's negatives take B from another document, so a difference of topic gives most of
them away; SOP's negatives hold exactly the same words as its positives, and only the
order, the discourse, tells them apart.

Here a segment is one sentence: each document's sentences are paired (0, 1), (2, 3), ...
and each pair is swapped with probability `swap_prob`. (ALBERT's data script makes its
segments as BERT's does, several sentences long and cut at a random sentence; the label
rule is the same.) `sop_label` 0 means in the original order, 1 swapped, as in
`bertedu.family.albert.AlbertForPreTraining` and transformers' `sentence_order_label`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

IN_ORDER, SWAPPED = 0, 1  # sentence_order_label

S = TypeVar("S")  # a sentence: a string, or a list of tokens or ids


@dataclass(frozen=True)
class SopExample(Generic[S]):
    """Segment A, segment B and the label: 0 if A came before B in the document, 1 if swapped."""

    segment_a: S
    segment_b: S
    sop_label: int


def make_sop_example(first: S, second: S, swap: bool) -> SopExample[S]:
    """Two consecutive sentences -> (first, second, 0), or (second, first, 1) when `swap`."""
    if swap:
        return SopExample(second, first, SWAPPED)
    return SopExample(first, second, IN_ORDER)


def create_sop_examples(
    documents: Sequence[Sequence[S]],
    swap_prob: float = 0.5,
    rng: random.Random | int = 0,
) -> list[SopExample[S]]:
    """SOP examples from every document's consecutive sentence pairs (0, 1), (2, 3), ...

    Args:
        documents: a list of documents, each a list of sentences (any type: text, tokens).
        swap_prob: the share of pairs swapped (label 1); ALBERT's is 0.5.
        rng: a `random.Random` or a seed for one; one draw per pair, in corpus order.
    A document's last sentence is left out when it has an odd number of them.
    """
    if not 0.0 <= swap_prob <= 1.0:
        raise ValueError(f"swap_prob must be between 0 and 1, got {swap_prob}")
    rng = rng if isinstance(rng, random.Random) else random.Random(rng)
    examples = []
    for document in documents:
        for i in range(0, len(document) - 1, 2):
            examples.append(make_sop_example(document[i], document[i + 1], rng.random() < swap_prob))
    return examples
