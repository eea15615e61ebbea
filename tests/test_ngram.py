import math

import pytest
import torch

from bertedu.model.constants import IGNORE_INDEX
from bertedu.course.ngram import NeighbourCounts

CLS, SEP, MASK = 1, 2, 3
A, B, C, D, E = 10, 11, 12, 13, 14


def test_each_predictor_uses_what_it_is_named_for():
    # the most frequent token is A; after B comes C more often than D; between B and E there is only D
    counts = NeighbourCounts.from_rows([[CLS, A, A, A, SEP], [CLS, B, C, SEP], [CLS, B, C, SEP], [CLS, B, D, E, SEP]])
    assert counts.tokens == 10
    assert counts.predict(B, E) == {"unigram": A, "left": C, "left+right": D}
    # an unseen pair backs off to the left neighbour, an unseen left neighbour to the unigram
    assert counts.predict(B, A)["left+right"] == C
    assert counts.predict(MASK, MASK) == {"unigram": A, "left": A, "left+right": A}


def test_score_counts_only_labelled_positions():
    counts = NeighbourCounts.from_rows([[CLS, B, C, SEP], [CLS, B, C, SEP], [CLS, B, D, E, SEP]])
    input_ids = torch.tensor([[CLS, B, MASK, E, SEP], [CLS, B, MASK, SEP, 0]])
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels[0, 2], labels[1, 2] = D, C  # between B and E: D (only both neighbours know); after B: C
    scores = counts.score(input_ids, labels)
    assert scores == {"unigram": 0.0, "left": 0.5, "left+right": 1.0}  # unigram: always B (3 of 7 tokens)


def test_nothing_to_score_or_count_is_an_error():
    with pytest.raises(ValueError, match="no training tokens"):
        NeighbourCounts().predict(A, B)
    counts = NeighbourCounts.from_rows([[CLS, A, SEP]])
    with pytest.raises(ValueError, match="no labelled positions"):
        counts.score([[CLS, A, SEP]], [[IGNORE_INDEX] * 3])


def test_bigram_lm_is_interpolated_absolute_discounting_by_hand():
    from bertedu.course.ngram import BigramLM

    V = 5
    ids = torch.tensor([[0, 1, 2, 1, 2], [0, 1, 3, 1, 2]])  # pairs: 0->1 x2, 1->2 x3, 2->1, 1->3, 3->1
    lm = BigramLM.from_windows(ids, V, discount=0.5)
    assert lm.counts[1, 2] == 3 and lm.counts[1, 3] == 1 and lm.counts.sum() == 8
    unigram = (torch.tensor([0, 4, 3, 1, 0]).double() + 1) / (8 + V)  # the predicted pieces, add-one
    torch.testing.assert_close(lm.unigram, unigram)
    # after 1: c(1) = 4, two different followers; p(2 | 1) = (3 - 0.5) / 4 + 0.5 * 2 / 4 * p_uni(2)
    assert math.isclose(lm.log_probs[1, 2].exp(), 2.5 / 4 + 0.25 * unigram[2], rel_tol=1e-12)
    assert math.isclose(lm.log_probs[1, 0].exp(), 0.25 * unigram[0], rel_tol=1e-12)  # unseen after 1: the unigram share
    torch.testing.assert_close(lm.log_probs[4].exp(), unigram)  # 4 never seen first: the unigram itself
    torch.testing.assert_close(lm.log_probs.exp().sum(1), torch.ones(V, dtype=torch.float64))
    # next_token_losses: pieces 1..T-2 of each window, given the piece before
    expected = -(lm.log_probs[0, 1] + lm.log_probs[1, 2] + lm.log_probs[2, 1]) / 3
    assert math.isclose(float(lm.next_token_losses(ids[:1])[0]), float(expected), rel_tol=1e-12)
    with pytest.raises(ValueError, match="discount"):
        BigramLM.from_windows(ids, V, discount=1.0)
