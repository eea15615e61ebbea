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
