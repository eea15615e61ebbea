"""Notebook 14's study pieces: chapter openings with genre labels placed among Wikipedia filler
(bertedu/data/long_documents.py) and what each method reads, how window predictions are pooled and
the cross-validated head (bertedu/course/long_inputs.py)."""

import pytest
import torch

from bertedu.course import long_inputs
from bertedu.data.long_documents import GENRES, PLACES, _spread, genre_chapters, genre_of_book, placed, wiki_filler


def test_views_by_hand():
    pieces = [f"p{i}" for i in range(20)]
    assert long_inputs.views(pieces, "head", 8, 3) == [pieces[:8]]
    assert long_inputs.views(pieces, "tail", 8, 3) == [pieces[12:]]
    assert long_inputs.views(pieces, "head+tail", 8, 3) == [pieces[:3] + pieces[15:]]
    assert long_inputs.views(pieces, "sliding windows", 8, 3) == [pieces[0:8], pieces[8:16], pieces[12:20]]
    assert long_inputs.views(pieces[:5], "head+tail", 8, 3) == [pieces[:5]]  # short: read whole, once
    assert long_inputs.window_starts(5, 8, 8) == [0]
    with pytest.raises(ValueError, match="unknown method"):
        long_inputs.views(pieces, "middle", 8, 3)


def test_genres_and_spread():
    assert genre_of_book(1) == "law" and genre_of_book(19) == "poetry" and genre_of_book(66) == "letters"
    assert sum(last - first + 1 for first, last in GENRES.values()) == 66
    assert _spread(list(range(7)))[:3] == [3, 1, 5] and sorted(_spread(list(range(7)))) == list(range(7))


def test_genre_chapters_are_whole_chapters(fast_tok):
    docs = genre_chapters(fast_tok, min_pieces=200, max_pieces=400, per_book=1)
    assert len({d.book for d in docs}) == len(docs) > 20  # at most one per book
    assert all(200 <= len(d.pieces) <= 400 for d in docs)
    from bertedu.data.corpora import bible_verses
    verses = bible_verses("web")
    first = docs[0]
    chapter = [t for v, t in sorted(verses.items()) if v // 1000 == first.book * 1000 + first.chapter]
    assert first.pieces == fast_tok.tokenize(" ".join(chapter))  # first verse to last


def test_cross_validation_and_majority_baseline():
    g = torch.Generator().manual_seed(0)
    y = torch.arange(60) % 3
    X = torch.nn.functional.one_hot(y, 3).float() * 4 + torch.randn(60, 3, generator=g)  # separable
    fold, owner = torch.arange(60) // 3 % 3, torch.arange(60)  # every label in every fold
    correct = long_inputs.cross_validated(X, y, owner, fold, 3)
    assert correct.float().mean() > 0.95
    majority = long_inputs.majority_baseline(torch.tensor([0, 0, 1, 0, 1, 1]), torch.tensor([0, 0, 0, 1, 1, 1]))
    assert majority.tolist() == [False, False, True, True, False, False]  # each fold gets the OTHER fold's majority


def test_pooling_by_the_mean_vote_or_the_maximum_vector():
    probs = torch.tensor([[0.9, 0.1], [0.4, 0.6], [0.5, 0.5], [0.3, 0.7], [0.5, 0.5]])  # (5 views, 2)
    owner = torch.tensor([0, 0, 0, 1, 1])  # document 0 has three views, document 1 two
    torch.testing.assert_close(long_inputs.pooled(probs, owner, 2), torch.tensor([[0.6, 0.4], [0.4, 0.6]]))
    X = torch.tensor([[1.0, -2.0], [0.0, 5.0], [-1.0, 0.0], [2.0, 2.0], [3.0, -1.0]])  # (5 views, D=2)
    torch.testing.assert_close(long_inputs.max_pooled(X, owner, 2), torch.tensor([[1.0, 5.0], [3.0, 2.0]]))
    shuffled = torch.tensor([4, 2, 0, 3, 1])  # the order of the views does not matter
    torch.testing.assert_close(long_inputs.max_pooled(X[shuffled], owner[shuffled], 2), long_inputs.max_pooled(X, owner, 2))


def test_placed_puts_the_passage_at_a_known_place():
    passage, fillers = ["p"] * 3, (["a"] * 3, ["b"] * 3)
    assert placed(passage, fillers, "start") == ["p"] * 3 + ["a"] * 3 + ["b"] * 3
    assert placed(passage, fillers, "middle") == ["a"] * 3 + ["p"] * 3 + ["b"] * 3
    assert placed(passage, fillers, "end") == ["a"] * 3 + ["b"] * 3 + ["p"] * 3
    assert PLACES == ("start", "middle", "end")
    doc = placed(passage, fillers, "end")
    assert long_inputs.views(doc, "tail", 3, 1) == [passage]  # the tail reads the passage whole
    assert long_inputs.views(doc, "head+tail", 3, 1) == [["a", "p", "p"]]  # one piece of the head, two of the tail
    with pytest.raises(ValueError, match="unknown place"):
        placed(passage, fillers, "anywhere")


def test_wiki_filler_is_the_start_of_the_embedded_wikipedia(fast_tok):
    from bertedu.data.corpora import wiki_en_articles
    filler = wiki_filler(fast_tok, 500)
    _, first_article = next(iter(wiki_en_articles()))
    first = fast_tok.tokenize(" ".join(first_article))
    assert len(filler) == 500 and filler[: len(first)] == first[:500]  # article after article, from the first
