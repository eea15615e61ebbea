"""Building a WordPiece vocabulary, written out. Introduced in notebook 01 ("How the
vocabulary is built").

BERT's 30,522 pieces were learnt from text. The recipe (Schuster and Nakajima 2012; Wu et
al. 2016, §4.1) starts from characters and grows the vocabulary one merge at a time:

1. Count the words of the corpus (BERT's basic tokeniser: `basic_tokenize`).
2. Spell every word in characters; a character that continues a word carries `##`:
   `"hug"` -> `h ##u ##g`. The first vocabulary is the special tokens and these characters.
3. Count every adjacent pair of pieces over the corpus, each word weighted by its count.
   Merge the pair with the highest score into one piece (`h` + `##u` -> `hu`,
   `##u` + `##g` -> `##ug`), everywhere it occurs, and add the piece to the vocabulary.
4. Repeat until the vocabulary has `vocab_size` pieces (or no pair occurs `min_frequency`
   times).

Two scores, one loop (`score=`):

- `"ratio"`: count(ab) / (count(a) * count(b)), the score the Hugging Face course teaches for
  WordPiece (LLM course, chapter 6, "WordPiece tokenization"). Up to the size of the corpus
  this is p(ab) / (p(a) p(b)), how many times more often `a` is followed by `b` than if
  pieces were drawn independently: it prefers pairs whose parts are rarely seen apart,
  however rare the pair. It is a proxy, not a likelihood. Schuster and Nakajima 2012 choose
  the merge that most increases the likelihood of the training data under a language
  model; under a unigram model over pieces that gain is about count(ab) * log(N * ratio)
  (N pieces in all), so the ratio ranks pairs by their gain per occurrence and ignores how
  often the pair occurs (notebook 01 computes both on the toy corpus). `"likelihood"` is
  accepted as an older name of this score. Google's own trainer was never published
  (google-research/bert's README: "This repository does not include code for *learning* a
  new WordPiece vocabulary").
- `"frequency"`, BPE's: count(ab). Hugging Face `tokenizers`' `WordPieceTrainer` is its BPE
  trainer with the `##` prefix (tokenizers issue #697: "we use the same algorithm as BPE to
  train a WordPiece model"); with this score and the same tie-breaking this module
  reproduces it (tests/test_wordpiece_train.py). What the two scores do on the embedded
  corpora, and what the vocabulary size does to held-out text: notebook 01 §4 and
  docs/tokenization.md.

Ties are broken deterministically, as `tokenizers` does as far as it is deterministic:
among pairs of equal score, the one whose left piece entered the vocabulary first wins,
then the one whose right piece did. Pieces enter in the order of the vocabulary: the
specials, the characters by code point, the `##` characters by code point, then the merged
pieces in the order they were made. (`tokenizers` numbers the `##` characters in hash-map
order, which changes from run to run: its issue #1794. That is the one place where the two
can break a tie differently.)

The pair counts are kept up to date incrementally: a merge re-spells only the words that
contain the merged pair, and rescores only the pairs whose counts changed, so a few
thousand merges on a few hundred thousand characters take seconds.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from .tokenizer import CONTINUATION_PREFIX, SPECIAL_TOKENS, UNK, basic_tokenize, load_vocab_tokenizer

SCORES = ("ratio", "frequency")
SCORE_ALIASES = {"likelihood": "ratio"}  # the older name of the ratio score

Pair = tuple[str, str]


@dataclass(frozen=True)
class Merge:
    """One step of training: `left` + `right` became `piece`. The counts are those at that
    step: `count` is count(ab), `left_count` count(a), `right_count` count(b); `score` is the
    value that chose the pair."""

    left: str
    right: str
    piece: str
    count: int
    left_count: int
    right_count: int
    score: float


@dataclass
class WordPieceVocab:
    """A trained vocabulary: `tokens` in vocab.txt order (id = position) and the `merges`
    that made the pieces after the alphabet, in order."""

    tokens: list[str]
    merges: list[Merge] = field(default_factory=list)

    @property
    def vocab(self) -> dict[str, int]:
        """token -> id, what `load_vocab_tokenizer` and `write_vocab` take."""
        return {token: i for i, token in enumerate(self.tokens)}

    def __len__(self) -> int:
        return len(self.tokens)


def count_words(texts: Iterable[str], lowercase: bool = True) -> Counter[str]:
    """How often each word of BERT's basic tokeniser occurs in `texts`."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(basic_tokenize(text, lowercase_text=lowercase))
    return counts


def spell(word: str) -> list[str]:
    """A word in characters, `##` on every character after the first: `hug` -> `h ##u ##g`."""
    return [word[0]] + [CONTINUATION_PREFIX + char for char in word[1:]]


def join_pieces(left: str, right: str) -> str:
    """The piece a merge makes: `h` + `##u` -> `hu`, `##u` + `##g` -> `##ug`."""
    return left + right.removeprefix(CONTINUATION_PREFIX)


def pair_score(count_ab: int, count_a: int, count_b: int, score: str = "ratio") -> float:
    """The ratio score count(ab) / (count(a) * count(b)) ("ratio", or its older name
    "likelihood"), or BPE's count(ab) ("frequency")."""
    if SCORE_ALIASES.get(score, score) == "ratio":
        return count_ab / (count_a * count_b)
    return float(count_ab)


def alphabet(word_counts: Mapping[str, int], limit: int | None = None) -> list[str]:
    """The first pieces: every character by code point, then `##` + every character that
    continues some word, by code point. With `limit`, only the `limit` most frequent
    characters (ties by code point), as `tokenizers`' `limit_alphabet` does."""
    char_counts: Counter[str] = Counter()
    continuing = set()
    for word, count in word_counts.items():
        for char in word:
            char_counts[char] += count
        continuing.update(word[1:])
    kept = sorted(char_counts, key=lambda c: (-char_counts[c], c))[:limit]
    kept = sorted(kept)
    return kept + [CONTINUATION_PREFIX + char for char in kept if char in continuing]


def merge_word(pieces: list[str], left: str, right: str, piece: str) -> list[str]:
    """Replace each `left right` in `pieces` by `piece`, left to right (`##a ##a ##a` with
    (`##a`, `##a`) -> `##aa ##a`)."""
    out, i = [], 0
    while i < len(pieces):
        if i + 1 < len(pieces) and pieces[i] == left and pieces[i + 1] == right:
            out.append(piece)
            i += 2
        else:
            out.append(pieces[i])
            i += 1
    return out


class SpeltCorpus:
    """The distinct words of a corpus, each spelt in the current pieces, with the counts a
    merge needs kept up to date: how often each piece and each adjacent pair occurs (every
    word weighted by its count), which words hold a pair, which pairs hold a piece."""

    def __init__(self, word_counts: Mapping[str, int], characters: set[str]):
        self.spellings: list[list[str]] = []
        self.counts: list[int] = []
        self.piece_counts: Counter[str] = Counter()
        self.pair_counts: Counter[Pair] = Counter()
        self.words_with: defaultdict[Pair, set[int]] = defaultdict(set)
        self.pairs_with: defaultdict[str, set[Pair]] = defaultdict(set)
        for word, count in sorted(word_counts.items()):
            if not set(word) <= characters:
                continue  # a character outside a limited alphabet: the word cannot be spelt
            self.spellings.append(spell(word))
            self.counts.append(count)
            self._count(len(self.spellings) - 1, +1)

    def _count(self, i: int, sign: int) -> set[Pair]:
        """Add (sign +1) or take away (-1) word i's pieces and pairs; return its pairs."""
        pieces, count = self.spellings[i], self.counts[i] * sign
        for piece in pieces:
            self.piece_counts[piece] += count
        pairs = set()
        for pair in zip(pieces, pieces[1:]):
            self.pair_counts[pair] += count
            pairs.add(pair)
            if sign > 0:
                self.words_with[pair].add(i)
                self.pairs_with[pair[0]].add(pair)
                self.pairs_with[pair[1]].add(pair)
        return pairs

    def score(self, pair: Pair, score: str) -> float:
        return pair_score(self.pair_counts[pair], self.piece_counts[pair[0]], self.piece_counts[pair[1]], score)

    def merge(self, pair: Pair, piece: str) -> set[Pair]:
        """Merge `pair` into `piece` in every word that holds it; return the pairs whose
        counts may have changed (those of the re-spelt words, before and after)."""
        changed = set()
        for i in sorted(self.words_with.pop(pair, ())):
            changed |= self._count(i, -1)
            self.spellings[i] = merge_word(self.spellings[i], *pair, piece)
            changed |= self._count(i, +1)
        return changed

    def pairs_of(self, piece: str, min_count: int) -> set[Pair]:
        """The pairs that hold `piece` and occur at least `min_count` times (a pair's count
        only grows when a merge re-spells a word, so the others are forgotten)."""
        self.pairs_with[piece] = {pair for pair in self.pairs_with[piece] if self.pair_counts[pair] >= min_count}
        return self.pairs_with[piece]


def learn_wordpiece(
    texts: Iterable[str] | Mapping[str, int],
    vocab_size: int,
    *,
    score: str = "ratio",
    min_frequency: int = 2,
    limit_alphabet: int | None = None,
    lowercase: bool = True,
) -> WordPieceVocab:
    """Learn a WordPiece vocabulary from `texts` (strings, or a word -> count mapping).

    Introduced in notebook 01. The specials come first, then the alphabet (`alphabet`),
    then one piece per merge until there are `vocab_size` tokens; only pairs that occur at
    least `min_frequency` times are merged. The alphabet is never cut to fit `vocab_size`
    (as in `tokenizers`); `limit_alphabet` keeps only the most frequent characters, and a
    word with another character is left out of training (it will be `[UNK]`; `tokenizers`
    instead drops the character and spells the rest). `score`: "ratio" (the Hugging Face course's
    WordPiece score; "likelihood" is its older name) or "frequency" (BPE, what `tokenizers`'
    WordPieceTrainer does); see the module docstring.
    """
    score = SCORE_ALIASES.get(score, score)
    if score not in SCORES:
        raise ValueError(f"Unknown score {score!r}; choose one of {SCORES}.")
    word_counts = texts if isinstance(texts, Mapping) else count_words(texts, lowercase)
    if not word_counts:
        raise ValueError("The corpus is empty (no words): nothing to learn a vocabulary from.")
    tokens = list(SPECIAL_TOKENS) + alphabet(word_counts, limit_alphabet)
    rank = {token: i for i, token in enumerate(tokens)}  # earlier in the vocabulary wins a tie
    corpus = SpeltCorpus(word_counts, {t for t in tokens if len(t) == 1})
    heap: list[tuple[float, int, int, Pair]] = []

    min_count = max(min_frequency, 1)

    def push(pairs: Iterable[Pair]) -> None:
        for pair in pairs:
            if corpus.pair_counts[pair] >= min_count:
                heapq.heappush(heap, (-corpus.score(pair, score), rank[pair[0]], rank[pair[1]], pair))

    push(corpus.pair_counts)
    merges = []
    while len(tokens) < vocab_size and heap:
        negative_score, _, _, pair = heapq.heappop(heap)
        count = corpus.pair_counts[pair]
        if count < min_count or -negative_score != corpus.score(pair, score):
            continue  # stale: the pair's counts changed after this entry was pushed
        piece = join_pieces(*pair)
        if piece not in rank:  # two merges can spell the same piece (##a + ##bc, ##ab + ##c)
            rank[piece] = len(tokens)
            tokens.append(piece)
        left_count, right_count = corpus.piece_counts[pair[0]], corpus.piece_counts[pair[1]]
        merges.append(Merge(*pair, piece, count, left_count, right_count, -negative_score))
        changed = corpus.merge(pair, piece)
        if score == "ratio":  # count(a) and count(b) fell: every pair with a or b scores higher
            changed |= corpus.pairs_of(pair[0], min_count) | corpus.pairs_of(pair[1], min_count)
        push(changed)
    return WordPieceVocab(tokens, merges)


@dataclass(frozen=True)
class VocabStats:
    """What a vocabulary does to held-out text: `words` (basic tokeniser), `pieces` (the
    sequence length WordPiece makes of them) and `unknown` (words that became `[UNK]`)."""

    words: int
    pieces: int
    unknown: int

    @property
    def pieces_per_word(self) -> float:
        return self.pieces / self.words

    @property
    def unk_rate(self) -> float:
        return self.unknown / self.words


def vocab_stats(
    vocab: Mapping[str, int] | WordPieceVocab, texts: Iterable[str], lowercase: bool = True
) -> VocabStats:
    """Tokenise `texts` with the package's WordPiece tokenizer over `vocab` (the fast one) and
    count words, pieces and `[UNK]`s. Introduced in notebook 01.

    Every word of the basic tokeniser starts with a piece without `##` (or is one `[UNK]`),
    so the words are counted as those pieces.
    """
    if isinstance(vocab, WordPieceVocab):
        vocab = vocab.vocab
    tokenizer = load_vocab_tokenizer(vocab, lowercase=lowercase, impl="fast", split_special_tokens=True)
    pieces = [piece for tokens in tokenizer.tokenize_batch(list(texts)) for piece in tokens]
    words = sum(not piece.startswith(CONTINUATION_PREFIX) for piece in pieces)
    if words == 0:
        raise ValueError("No words in the held-out texts: nothing to measure.")
    return VocabStats(words, len(pieces), pieces.count(UNK))


def fast_alphabet(texts: Iterable[str], lowercase: bool = True, limit: int | None = None,
                  chunk: int = 5000) -> list[str]:
    """`alphabet(...)` of `texts` as `tokenizers` sees them: its BERT normaliser and
    pre-tokeniser (in Rust, a few thousand texts at a time) instead of `count_words`, so a
    corpus of millions of characters takes about a second. Every character by code point,
    then `##` + every character that continues some word; with `limit`, the `limit` most
    frequent characters (ties by code point)."""
    from .tokenizer import build_backend

    backend = build_backend(None, lowercase=lowercase)
    char_counts: Counter[str] = Counter()
    continuing: set[str] = set()
    batch: list[str] = []

    def count() -> None:
        words = [w for w, _ in backend.pre_tokenizer.pre_tokenize_str(backend.normalizer.normalize_str("\n".join(batch)))]
        char_counts.update("".join(words))
        for word in words:
            continuing.update(word[1:])
        batch.clear()

    for text in texts:
        batch.append(text)
        if len(batch) == chunk:
            count()
    count()
    kept = sorted(sorted(char_counts, key=lambda c: (-char_counts[c], c))[:limit])
    return kept + [CONTINUATION_PREFIX + char for char in kept if char in continuing]


def learn_reproducibly(
    texts: Callable[[], Iterable[str]],
    vocab_size: int,
    *,
    min_frequency: int = 2,
    lowercase: bool = True,
    limit_alphabet: int | None = 1000,
) -> list[str]:
    """`tokenizers`' WordPieceTrainer made deterministic: the same corpus gives the same
    vocab.txt, line for line, in every process (what `bertedu pretrain` trains; notebook 06).

    `texts()` is read twice: once for the alphabet (`fast_alphabet`), once by the trainer.
    The specials and that alphabet are handed to the trainer first (`learn_with_tokenizers`'s
    `first_tokens`), so no id comes from a hash map (its issue #1794) and the pieces and
    their order are those of `learn_wordpiece(..., score="frequency")`, at the speed of
    `tokenizers`. Characters outside a `limit_alphabet` alphabet are dropped from the words
    that hold them (the trainer's limit is set to 0: it adds no character of its own).
    Returns the tokens in id order; [] for a corpus without a word.
    """
    first = fast_alphabet(texts(), lowercase=lowercase, limit=limit_alphabet)
    if not first:
        return []
    return learn_with_tokenizers(texts(), vocab_size, min_frequency=min_frequency, lowercase=lowercase,
                                 first_tokens=[*SPECIAL_TOKENS, *first], limit_alphabet=0)


def learn_with_tokenizers(
    texts: Iterable[str],
    vocab_size: int,
    *,
    min_frequency: int = 2,
    lowercase: bool = True,
    first_tokens: Iterable[str] = SPECIAL_TOKENS,
    limit_alphabet: int | None = None,
) -> list[str]:
    """The same corpus through Hugging Face `tokenizers`' `WordPieceTrainer` (BERT's
    normaliser and pre-tokeniser, the `##` prefix, no alphabet limit): its tokens in id
    order. Notebook 01 and tests/test_wordpiece_train.py set it beside `learn_wordpiece`.

    `first_tokens` are handed to the trainer as its special tokens, so they take the first
    ids in this order. Passing the specials and `alphabet(...)` pins the ids `tokenizers`
    otherwise gives the `##` characters in hash-map order (its issue #1794), and with them
    how it breaks ties between equally frequent pairs. `limit_alphabet`: the trainer's own
    (None: no limit; 0: no character beyond `first_tokens`).
    """
    from tokenizers.trainers import WordPieceTrainer

    from .tokenizer import build_backend

    backend = build_backend(None, lowercase=lowercase)
    trainer = WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(first_tokens),
        continuing_subword_prefix=CONTINUATION_PREFIX,
        show_progress=False,
        **({} if limit_alphabet is None else {"limit_alphabet": limit_alphabet}),
    )
    backend.train_from_iterator(iter(texts), trainer=trainer)
    vocab = backend.get_vocab()
    return sorted(vocab, key=vocab.get)
