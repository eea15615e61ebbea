"""Notebook 14's study pieces: whole Bible chapters with genre labels (bertedu/data/long_documents.py)
and what each method reads, the cached encoder, the cross-validated head and the book bootstrap
(bertedu/course/long_inputs.py)."""

import pytest
import torch

from bertedu.course import long_inputs
from bertedu.data.long_documents import GENRES, _spread, genre_chapters, genre_of_book


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


def test_cross_validation_baseline_and_paired_bootstrap():
    g = torch.Generator().manual_seed(0)
    y = torch.arange(60) % 3
    X = torch.nn.functional.one_hot(y, 3).float() * 4 + torch.randn(60, 3, generator=g)  # separable
    fold, owner = torch.arange(60) // 3 % 3, torch.arange(60)  # every label in every fold
    correct = long_inputs.cross_validated(X, y, owner, fold, 3)
    assert correct.float().mean() > 0.95
    majority = long_inputs.majority_baseline(torch.tensor([0, 0, 1, 0, 1, 1]), torch.tensor([0, 0, 0, 1, 1, 1]))
    assert majority.tolist() == [False, False, True, True, False, False]  # each fold gets the OTHER fold's majority
    book_of = torch.arange(60) // 2
    se, difference = long_inputs.book_bootstrap({"a": correct, "b": correct, "c": ~correct}, book_of)
    assert difference["a", "b"] == (0.0, 0.0)  # paired: the same resamples
    assert difference["a", "c"][0] > 0.9 and se["a"] >= 0.0
