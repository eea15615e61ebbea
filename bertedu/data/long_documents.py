"""Long documents with the deciding passage at a known place: notebook 14's data.

The deciding passage is the opening of a whole chapter of a Bible translation (its first `k`
word pieces, from the chapter's first verse on), labelled with the genre of its book in the
standard division of the Protestant canon (`GENRES`). A document is three parts of `k` pieces:
that passage at the start, in the middle or at the end (`placed`), and two stretches of
Wikipedia prose (`wiki_filler`), which say nothing about the genre, in the other two places.
So what a method reads decides whether it sees the passage at all.

    GENRES             genre -> (first book, last book), pythonbible's book numbers
    GenreDocument      book, chapter, genre and the chapter's word pieces
    genre_chapters     whole chapters of `min_pieces` to `max_pieces` pieces, a few per book,
                       spread over the book
    wiki_filler        Wikipedia's word pieces, article after article (a body with no genre)
    placed             a document of three parts with the deciding passage at a known place

May import what `bertedu.data` may import.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .corpora import bible_verses

GENRES = {"law": (1, 5), "history": (6, 17), "poetry": (18, 22), "prophets": (23, 39),
          "gospels+acts": (40, 44), "letters": (45, 66)}  # Genesis-Deuteronomy, ..., Romans-Revelation


@dataclass(frozen=True)
class GenreDocument:
    """One whole chapter: `pieces` from its first verse to its last."""

    book: int
    chapter: int
    genre: str
    pieces: list


def genre_of_book(book: int) -> str:
    """The genre (`GENRES`) of a pythonbible book number (1 Genesis ... 66 Revelation)."""
    return next(genre for genre, (first, last) in GENRES.items() if first <= book <= last)


def _chapters_by_book(translation: str) -> dict[int, dict[int, list[str]]]:
    by_book: dict[int, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for verse_id, text in sorted(bible_verses(translation).items()):
        by_book[verse_id // 1_000_000][verse_id // 1000 % 1000].append(text)
    return by_book


def genre_chapters(tokenizer, min_pieces: int, max_pieces: int, per_book: int,
                   translation: str = "web") -> list[GenreDocument]:
    """Whole chapters of `min_pieces` to `max_pieces` word pieces, at most `per_book` of each book.

    Introduced in notebook 14. A chapter qualifies by its length; to tokenise only what is used,
    the candidates are the chapters whose word count makes that length likely (1.0 to 1.5 pieces
    a word), taken evenly spread over the book, and each is kept if its pieces really fit.
    """
    documents = []
    for book, chapters in sorted(_chapters_by_book(translation).items()):
        candidates = [c for c, verses in sorted(chapters.items())
                      if min_pieces <= 1.5 * sum(len(v.split()) for v in verses)
                      and sum(len(v.split()) for v in verses) <= max_pieces]
        kept = []
        for c in _spread(candidates):
            if len(kept) == per_book:
                break
            pieces = tokenizer.tokenize(" ".join(chapters[c]))
            if min_pieces <= len(pieces) <= max_pieces:
                kept.append(GenreDocument(book, c, genre_of_book(book), pieces))
        documents += sorted(kept, key=lambda d: d.chapter)
    return documents


def _spread(items: list) -> list:
    """`items` reordered so that any first n of them are spread over the whole list: the middle,
    then the middles of the halves, and so on (a deterministic, even sample)."""
    order, seen, parts = [], set(), [(0, len(items))]
    while parts:
        next_parts = []
        for lo, hi in parts:
            if lo >= hi:
                continue
            mid = (lo + hi) // 2
            if mid not in seen:
                seen.add(mid)
                order.append(items[mid])
            next_parts += [(lo, mid), (mid + 1, hi)]
        parts = next_parts
    return order


# ----------------------------------------------------------------------------------------
# The deciding passage at a known place (notebook 14's task)
# ----------------------------------------------------------------------------------------

PLACES = ("start", "middle", "end")


def wiki_filler(tokenizer, n_pieces: int) -> list[str]:
    """The first `n_pieces` word pieces of the embedded English Wikipedia, article after article:
    real prose that says nothing about a Bible book's genre (the body a deciding passage sits in)."""
    from .corpora import wiki_en_articles

    pieces: list[str] = []
    for _, sentences in wiki_en_articles():
        pieces += tokenizer.tokenize(" ".join(sentences))
        if len(pieces) >= n_pieces:
            return pieces[:n_pieces]
    raise ValueError(f"the embedded Wikipedia holds {len(pieces)} pieces, fewer than the {n_pieces} asked for")


def placed(passage: list, fillers: tuple[list, list], where: str) -> list:
    """A document of three equal parts: the deciding `passage` at the start, in the middle or at
    the end (`PLACES`), the two `fillers` in the other two places, in their order."""
    first, second = fillers
    if where not in PLACES:
        raise ValueError(f"unknown place {where!r}; choose one of {PLACES}")
    parts = {"start": [passage, first, second], "middle": [first, passage, second], "end": [first, second, passage]}
    return [piece for part in parts[where] for piece in part]
