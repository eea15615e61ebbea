"""FULL-SENTENCES packing (bertedu.data.packing): whole sentences, across documents, one separator between them."""

import random

import pytest

from bertedu.data.packing import SEPARATOR, pack_full_sentences

SEP = 99


def test_a_hand_checked_example():
    # doc 0: sentences of 3 and 2 tokens; doc 1: 2 and 4 tokens; max 7 tokens per block
    docs = [[[1, 2, 3], [4, 5]], [[6, 7], [8, 9, 10, 11]]]
    blocks = pack_full_sentences(docs, max_tokens=7, separator_id=SEP)
    assert [b.input_ids for b in blocks] == [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]
    # with room for the separator, the next document continues the block after it
    blocks = pack_full_sentences(docs, max_tokens=8, separator_id=SEP)
    assert [b.input_ids for b in blocks] == [[1, 2, 3, 4, 5, SEP, 6, 7], [8, 9, 10, 11]]
    assert blocks[0].doc_ids == [0, 0, 0, 0, 0, SEPARATOR, 1, 1]
    assert blocks[1].doc_ids == [1, 1, 1, 1]


def test_an_overlong_sentence_is_cut_into_its_own_blocks():
    docs = [[[1, 2], [3, 4, 5, 6, 7, 8, 9], [10]]]
    blocks = pack_full_sentences(docs, max_tokens=3, separator_id=SEP)
    assert [b.input_ids for b in blocks] == [[1, 2], [3, 4, 5], [6, 7, 8], [9], [10]]


def test_empty_sentences_and_documents_are_skipped():
    docs = [[], [[1], []], [], [[2, 3]]]
    blocks = pack_full_sentences(docs, max_tokens=10, separator_id=SEP)
    assert [b.input_ids for b in blocks] == [[1, SEP, 2, 3]]
    assert pack_full_sentences([], 10, SEP) == []


@pytest.mark.parametrize("seed", range(5))
def test_properties_on_random_corpora(seed):
    rng = random.Random(seed)
    max_tokens = rng.randint(2, 20)
    docs, next_id = [], 0
    for _ in range(rng.randint(1, 8)):
        doc = []
        for _ in range(rng.randint(0, 6)):
            n = rng.randint(1, 25)
            doc.append(list(range(next_id, next_id + n)))  # every token id unique and increasing
            next_id += n
        docs.append(doc)
    sep = 10**9  # never a token id here
    blocks = pack_full_sentences(docs, max_tokens, sep)
    tokens = [t for b in blocks for t in b.input_ids if t != sep]
    assert tokens == list(range(next_id))  # every token once, in corpus order
    for b in blocks:
        assert 1 <= len(b) <= max_tokens
        assert len(b.doc_ids) == len(b.input_ids)
        assert b.input_ids[0] != sep and b.input_ids[-1] != sep
        for i, (t, d) in enumerate(zip(b.input_ids, b.doc_ids)):
            if t == sep:  # a separator sits exactly between two different documents
                assert d == SEPARATOR and b.doc_ids[i - 1] < b.doc_ids[i + 1]
            elif i > 0 and b.doc_ids[i - 1] != SEPARATOR:
                assert d == b.doc_ids[i - 1]  # no document change without a separator
    # a block ends only where the next sentence would not fit (whole sentences, greedily)
    sentence_of = {t: (d, s) for d, doc in enumerate(docs) for s, sent in enumerate(doc) for t in sent}
    for b, nxt in zip(blocks, blocks[1:]):
        d, s = sentence_of[nxt.input_ids[0]]
        first_sentence = docs[d][s]
        d_last, s_last = sentence_of[b.input_ids[-1]]
        if len(docs[d_last][s_last]) > max_tokens:
            continue  # the last piece of a cut sentence is a block of its own
        if first_sentence[0] == nxt.input_ids[0] and len(first_sentence) <= max_tokens:
            extra = d_last != d  # a separator would be needed
            assert len(b) + extra + len(first_sentence) > max_tokens


def test_rejects_a_block_too_small_for_a_token_and_a_separator():
    with pytest.raises(ValueError, match="max_tokens must be at least 2"):
        pack_full_sentences([[[1]]], 1, SEP)
