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


# ---- the packed pretraining examples and `bertedu pretrain --packing full-sentences` -----


def test_packed_examples_are_cls_block_sep_with_words_kept():
    from bertedu.data import create_packed_examples

    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "##c", "d", "e"])}
    docs = [[["a", "b", "##c"], ["d"]], [["e", "a"]]]  # word pieces: "b ##c" is one word
    examples = create_packed_examples(docs, max_seq_length=10, vocab=vocab)
    assert len(examples) == 1
    e = examples[0]
    assert e.input_ids == [2, 5, 6, 7, 8, 3, 9, 5, 3]  # [CLS] a b ##c d [SEP] e a [SEP]
    assert e.token_type_ids == [0] * 9 and e.special_tokens_mask == [1, 0, 0, 0, 0, 1, 0, 0, 1]
    assert e.word_ids == [-1, 0, 1, 1, 2, -1, 3, 4, -1]
    assert (e.doc_a, e.doc_b) == (0, 1)
    # a tight length: whole sentences only, one block per document here
    tight = create_packed_examples(docs, max_seq_length=6, vocab=vocab)
    assert [x.input_ids for x in tight] == [[2, 5, 6, 7, 8, 3], [2, 9, 5, 3]]


@pytest.mark.slow
def test_pretrain_trains_roberta_style_packing_and_refuses_nsp_with_it(tmp_path, capsys):
    from bertedu.cli import main
    from bertedu.data import build_pretraining_dataset
    from bertedu.data.corpora import load_corpus
    from bertedu.data.tokenizer import load_vocab_tokenizer

    args = ["pretrain", "--preset", "tiny", "--steps", "2", "--batch-size", "4", "--corpus", "wiki-en",
            "--max-documents", "12", "--vocab-size", "600", "--no-progress", "--max-seq-length", "48",
            "--packing", "full-sentences"]
    assert main([*args, "--out", str(tmp_path / "nsp")]) == 2
    assert "--no-nsp" in capsys.readouterr().err
    out = tmp_path / "roberta"
    assert main([*args, "--no-nsp", "--out", str(out)]) == 0
    tokenizer = load_vocab_tokenizer(out / "vocab.txt")
    documents = list(load_corpus("wiki-en"))[:12]
    data = build_pretraining_dataset(documents, tokenizer, max_seq_length=48, packing="full-sentences")
    assert max(len(e) for e in data.examples) <= 48 and all(set(e.token_type_ids) == {0} for e in data.examples)
    # every word piece of the text is in exactly one example: nothing truncated, nothing repeated
    pieces = sum(len(p) for doc in documents for p in tokenizer.tokenize_batch(doc))
    assert sum(len(e) - sum(e.special_tokens_mask) for e in data.examples) == pieces
    sample = data[0]
    assert "next_sentence_label" in sample and sample["labels"].ne(-100).any()
