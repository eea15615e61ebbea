"""Sentence-order prediction examples (bertedu.data.sop): consecutive pairs, swapped = label 1."""

import random

import pytest

from bertedu.data.sop import IN_ORDER, SWAPPED, SopExample, create_sop_examples, make_sop_example


def test_one_example_by_hand():
    assert make_sop_example("It rained.", "The game was off.", swap=False) == SopExample(
        "It rained.", "The game was off.", IN_ORDER)
    assert make_sop_example("It rained.", "The game was off.", swap=True) == SopExample(
        "The game was off.", "It rained.", SWAPPED)
    assert (IN_ORDER, SWAPPED) == (0, 1)  # transformers' sentence_order_label


def test_pairs_are_consecutive_and_never_cross_documents():
    docs = [["a0", "a1", "a2", "a3", "a4"], ["b0"], ["c0", "c1"]]
    examples = create_sop_examples(docs, swap_prob=0.0)
    assert [(e.segment_a, e.segment_b, e.sop_label) for e in examples] == [
        ("a0", "a1", 0), ("a2", "a3", 0), ("c0", "c1", 0)]  # a4 and b0 have no partner
    swapped = create_sop_examples(docs, swap_prob=1.0)
    assert [(e.segment_a, e.segment_b, e.sop_label) for e in swapped] == [
        ("a1", "a0", 1), ("a3", "a2", 1), ("c1", "c0", 1)]


def test_swap_share_and_seeding():
    docs = [[f"d{d}s{s}" for s in range(20)] for d in range(100)]  # 1,000 pairs
    examples = create_sop_examples(docs, swap_prob=0.5, rng=3)
    share = sum(e.sop_label for e in examples) / len(examples)
    assert len(examples) == 1000 and 0.45 < share < 0.55
    assert create_sop_examples(docs, rng=3) == examples
    assert create_sop_examples(docs, rng=random.Random(3)) == examples
    assert create_sop_examples(docs, rng=4) != examples
    # the label says which way round: a swapped pair reads the later sentence first
    for e in examples:
        later_first = int(e.segment_a.split("s")[1]) > int(e.segment_b.split("s")[1])
        assert later_first == (e.sop_label == SWAPPED)


def test_token_lists_work_as_sentences():
    examples = create_sop_examples([[[1, 2], [3]]], swap_prob=1.0)
    assert examples == [SopExample([3], [1, 2], SWAPPED)]


def test_rejects_a_swap_probability_outside_0_1():
    with pytest.raises(ValueError, match="swap_prob"):
        create_sop_examples([["a", "b"]], swap_prob=1.5)
