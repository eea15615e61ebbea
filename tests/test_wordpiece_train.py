"""The WordPiece trainer written out (bertedu/data/wordpiece_train.py): first merges checked
by hand, the incremental counts against recounting from scratch, the frequency score against
Hugging Face `tokenizers`' WordPieceTrainer token for token on real text, and what the
likelihood score does differently, measured."""

import itertools
import statistics
from collections import Counter

import pytest

from bertedu.data.corpora import peoples_daily, wiki_en
from bertedu.data.tokenizer import SPECIAL_TOKENS, UNK
from bertedu.data.wordpiece_train import (
    alphabet,
    count_words,
    join_pieces,
    learn_with_tokenizers,
    learn_wordpiece,
    merge_word,
    pair_score,
    spell,
    vocab_stats,
)

# The Hugging Face course's toy corpus (LLM course, chapter 6, "WordPiece tokenization").
TOY = {"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5}
TOY_TEXT = [" ".join(word for word, n in TOY.items() for _ in range(n))]


@pytest.fixture(scope="module")
def wiki():
    """Four Wikipedia articles to train on (about 130k characters) and the next two held out."""
    docs = list(itertools.islice(wiki_en(), 6))
    return [s for d in docs[:4] for s in d], [s for d in docs[4:] for s in d]


def test_spelling_joining_and_merging_a_word():
    assert spell("hugs") == ["h", "##u", "##g", "##s"]
    assert join_pieces("h", "##u") == "hu" and join_pieces("##u", "##g") == "##ug"
    assert merge_word(["##a", "##a", "##a"], "##a", "##a", "##aa") == ["##aa", "##a"]  # left to right, no overlap
    assert merge_word(["h", "##u", "##g", "##u", "##g"], "##u", "##g", "##ug") == ["h", "##ug", "##ug"]


def test_the_alphabet_is_every_character_then_the_continuing_ones():
    # b, h, p start words; g, n, s, u continue them. Every character also stands alone.
    assert alphabet(TOY) == ["b", "g", "h", "n", "p", "s", "u", "##g", "##n", "##s", "##u"]
    assert alphabet(TOY, limit=3) == ["g", "p", "u", "##g", "##u"]  # u 36, g 20, p 17: the three most frequent
    vocab = learn_wordpiece(TOY, 0)
    assert vocab.tokens == [*SPECIAL_TOKENS, *alphabet(TOY)] and vocab.merges == []


def test_first_likelihood_merges_by_hand():
    # count: h 15, p 17, b 4, ##u 36, ##g 20, ##n 16, ##s 5. Every pair with ##u scores
    # count(ab) / (count(a) * 36) = 1/36 (each of h, p, b and ##g, ##n is always beside ##u
    # where it occurs with it); ##g ##s: 5 / (20 * 5) = 1/20 wins.
    # Then all remaining pairs tie at 1/36 and the earliest pieces win: b (id 5) + ##u.
    # Then bu ##n: 4 / (4 * 16) = 1/16 beats ##u's pairs at 1/32 (count(##u) is 32 now).
    merges = learn_wordpiece(TOY_TEXT, len(SPECIAL_TOKENS) + 11 + 3).merges
    assert [(m.left, m.right, m.piece) for m in merges] == [
        ("##g", "##s", "##gs"), ("b", "##u", "bu"), ("bu", "##n", "bun")]
    assert [(m.count, m.left_count, m.right_count) for m in merges] == [(5, 20, 5), (4, 4, 36), (4, 4, 16)]
    assert [m.score for m in merges] == [1 / 20, 1 / 36, 1 / 16]


def test_first_frequency_merges_by_hand_and_tokenizers_agrees():
    # ##u ##g occurs 10 + 5 + 5 = 20 times; then ##u ##n 12 + 4 = 16; then h ##ug 10 + 5 = 15;
    # then p ##un 12.
    size = len(SPECIAL_TOKENS) + 11 + 4
    vocab = learn_wordpiece(TOY_TEXT, size, score="frequency")
    assert [(m.piece, m.count) for m in vocab.merges] == [("##ug", 20), ("##un", 16), ("hug", 15), ("pun", 12)]
    # No ties among these four counts, so the order in which tokenizers numbers its ## pieces
    # (hash-map order) moves them within the alphabet but changes no merge.
    theirs = learn_with_tokenizers(TOY_TEXT, size)
    assert theirs[-4:] == vocab.tokens[-4:] == ["##ug", "##un", "hug", "pun"]
    assert sorted(theirs) == sorted(vocab.tokens)


def recounted(word_counts, vocab_size, score, min_frequency=2):
    """The same training loop with every count recomputed from scratch at every merge."""
    tokens = [*SPECIAL_TOKENS, *alphabet(word_counts)]
    rank = {token: i for i, token in enumerate(tokens)}
    spellings = {word: spell(word) for word in word_counts}
    while len(tokens) < vocab_size:
        pieces, pairs = Counter(), Counter()
        for word, n in word_counts.items():
            for p in spellings[word]:
                pieces[p] += n
            for pair in zip(spellings[word], spellings[word][1:]):
                pairs[pair] += n
        candidates = [pair for pair, n in pairs.items() if n >= min_frequency]
        if not candidates:
            break
        best = min(candidates, key=lambda p: (-pair_score(pairs[p], pieces[p[0]], pieces[p[1]], score),
                                              rank[p[0]], rank[p[1]]))
        piece = join_pieces(*best)
        if piece not in rank:
            rank[piece] = len(tokens)
            tokens.append(piece)
        spellings = {word: merge_word(s, *best, piece) for word, s in spellings.items()}
    return tokens


@pytest.mark.parametrize("score", ["likelihood", "frequency"])
def test_incremental_counts_give_the_same_vocabulary_as_recounting(wiki, score):
    word_counts = count_words(wiki[0][:100])
    size = len(alphabet(word_counts)) + len(SPECIAL_TOKENS) + 120
    assert learn_wordpiece(word_counts, size, score=score).tokens == recounted(word_counts, size, score)


@pytest.mark.parametrize("corpus, n_docs, size", [("wiki-en", 4, 2000), ("peoples-daily-zh", 150, 4000)])
def test_frequency_score_is_tokenizers_wordpiece_trainer_token_for_token(corpus, n_docs, size):
    """tokenizers' WordPieceTrainer is its BPE trainer: merge the most frequent pair. Handed
    our specials and alphabet as its first ids (which fixes how it breaks ties), it learns
    exactly our frequency-scored vocabulary, in the same order."""
    docs = itertools.islice(wiki_en() if corpus == "wiki-en" else peoples_daily(), n_docs)
    texts = [s for d in docs for s in d]
    ours = learn_wordpiece(texts, size, score="frequency")
    first = [*SPECIAL_TOKENS, *alphabet(count_words(texts))]
    assert learn_with_tokenizers(texts, size, first_tokens=first) == ours.tokens
    # Left to number its ## pieces itself (hash-map order, tokenizers issue #1794), it still
    # has the same specials and characters, in the same order, and the same ## characters.
    plain = learn_with_tokenizers(texts, size)
    n_chars = len([t for t in first if len(t) == 1])
    assert plain[: len(SPECIAL_TOKENS) + n_chars] == ours.tokens[: len(SPECIAL_TOKENS) + n_chars]
    assert set(plain[: len(first)]) == set(first)


def test_chinese_characters_never_merge():
    texts = [s for d in itertools.islice(peoples_daily(), 150) for s in d]
    vocab = learn_wordpiece(texts, 100_000)  # asks for more than the corpus can give
    cjk_merges = [m for m in vocab.merges if any("\u4e00" <= ch <= "\u9fff" for ch in m.piece)]
    assert cjk_merges == []  # the basic tokeniser made every Han character a word of its own
    assert len(vocab) < 100_000  # training stopped when no pair occurred twice


def test_likelihood_score_prefers_rare_cohesive_pairs_and_spells_held_out_text_longer(wiki):
    """Measured on Wikipedia at 2,000 pieces: the likelihood score (WordPiece) merges pairs whose
    rarer part almost never occurs elsewhere, at low counts; the frequency score (BPE,
    tokenizers) merges common pairs. The vocabularies differ, and the frequency one spells
    held-out text in fewer pieces per word."""
    train, held_out = wiki
    counts = count_words(train)
    by_score = {score: learn_wordpiece(counts, 2000, score=score) for score in ("likelihood", "frequency")}
    likelihood, frequency = by_score["likelihood"], by_score["frequency"]
    assert set(likelihood.tokens) != set(frequency.tokens)

    def cohesion(m):  # the share of the rarer part's occurrences that are in the pair
        return m.count / min(m.left_count, m.right_count)

    assert statistics.median(map(cohesion, likelihood.merges)) == 1.0
    assert statistics.median(map(cohesion, frequency.merges)) < 0.5
    median_count = {score: statistics.median(m.count for m in v.merges) for score, v in by_score.items()}
    assert median_count["likelihood"] < median_count["frequency"]
    stats = {score: vocab_stats(v, held_out) for score, v in by_score.items()}
    assert stats["likelihood"].pieces_per_word > 1.5 * stats["frequency"].pieces_per_word
    assert stats["likelihood"].unknown == stats["frequency"].unknown  # the same alphabet: the same [UNK]s


def test_vocab_stats_counts_words_pieces_and_unknowns_by_hand():
    vocab = {t: i for i, t in enumerate([*SPECIAL_TOKENS, "h", "p", "##u", "##g", "hug"])}
    # words: hug | hug | pug | ! | bun  ->  hug | hug | p ##u ##g | [UNK] | [UNK]
    stats = vocab_stats(vocab, ["hug hug", "pug! bun"])
    assert (stats.words, stats.pieces, stats.unknown) == (5, 7, 2)
    assert stats.pieces_per_word == 7 / 5 and stats.unk_rate == 2 / 5


def test_a_limited_alphabet_leaves_rare_characters_unknown():
    texts = ["我们 我们 我们 的 的 的 人", "人们"]
    vocab = learn_wordpiece(texts, 0, limit_alphabet=3)
    # 们 4, 我 3, 的 3, 人 2: the three most frequent characters, none of them continues a word
    assert [t for t in vocab.tokens if t not in SPECIAL_TOKENS] == sorted("我们的")
    assert vocab_stats(vocab, ["我们的人"]).unknown == 1 and UNK in vocab.tokens


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="Unknown score"):
        learn_wordpiece(TOY, 100, score="pmi")
    with pytest.raises(ValueError, match="empty"):
        learn_wordpiece(["", "   "], 100)
    with pytest.raises(ValueError, match="No words"):
        vocab_stats(learn_wordpiece(TOY, 0), [""])


def test_a_word_with_a_character_outside_a_limited_alphabet_is_left_out_of_training():
    vocab = learn_wordpiece({"ab": 5, "qab": 4}, 100, score="frequency", limit_alphabet=2)  # q is dropped
    assert [(m.left, m.right, m.count) for m in vocab.merges] == [("a", "##b", 5)]  # no ##a ##b from "qab"


def test_likelihood_is_the_older_name_of_the_ratio_score():
    """Notebook 01 names count(ab) / (count(a) count(b)) the ratio score: it is the Hugging Face
    course's proxy, not a likelihood. The old name still selects it."""
    assert learn_wordpiece(TOY, 30, score="likelihood").tokens == learn_wordpiece(TOY, 30, score="ratio").tokens
    assert learn_wordpiece(TOY, 30).tokens == learn_wordpiece(TOY, 30, score="ratio").tokens
    assert pair_score(5, 20, 5, "likelihood") == pair_score(5, 20, 5, "ratio") == 5 / 100
    assert pair_score(5, 20, 5, "frequency") == 5.0
