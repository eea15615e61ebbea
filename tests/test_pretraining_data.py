"""bertedu.data.pretraining: NSP pairs, static/dynamic/whole-word masking, batches, resume."""

import random

import pytest
import torch
from torch.utils.data import DataLoader

from bertedu import BertConfig, BertForPreTraining
from bertedu.data import (
    IGNORE_INDEX,
    PretrainingDataset,
    build_pretraining_dataset,
    collate_pretraining,
    create_pretraining_examples,
    wordpiece_word_ids,
)

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4  # a trained vocabulary's specials
V = 1000
IDS = {"cls_token_id": CLS, "sep_token_id": SEP}


def synthetic_corpus(n_docs=300, seed=0, min_sentences=1, max_sentences=25, min_len=1, max_len=30):
    """Documents of sentences of random ids (never a special id)."""
    rng = random.Random(seed)
    return [
        [
            [rng.randrange(5, V) for _ in range(rng.randint(min_len, max_len))]
            for _ in range(rng.randint(min_sentences, max_sentences))
        ]
        for _ in range(n_docs)
    ]


def flat(document):
    return [t for sentence in document for t in sentence]


@pytest.fixture(scope="module")
def corpus():
    return synthetic_corpus(2000)


@pytest.fixture(scope="module")
def examples(corpus):
    return create_pretraining_examples(corpus, max_seq_length=32, rng=1, **IDS)


def test_nsp_half_not_next_and_negatives_from_other_documents(examples):
    assert len(examples) > 12_000  # NotNext share: standard error 0.0045
    not_next = sum(e.next_sentence_label for e in examples) / len(examples)
    assert abs(not_next - 0.5) < 0.02
    for e in examples:
        if e.next_sentence_label == 1:  # NotNext
            assert e.doc_b != e.doc_a
        else:  # IsNext: B continues A in the same document (truncation may leave a gap)
            assert e.next_sentence_label == 0
            assert e.doc_b == e.doc_a and e.span_a[1] <= e.span_b[0]


def test_segments_are_the_documents_tokens(corpus, examples):
    docs = [flat(d) for d in corpus]
    for e in examples:
        n_a = e.span_a[1] - e.span_a[0]
        n_b = e.span_b[1] - e.span_b[0]
        assert n_a >= 1 and n_b >= 1
        assert e.input_ids[1 : 1 + n_a] == docs[e.doc_a][e.span_a[0] : e.span_a[1]]
        assert e.input_ids[2 + n_a : -1] == docs[e.doc_b][e.span_b[0] : e.span_b[1]]


def test_layout_and_lengths(examples):
    for e in examples:
        T = len(e.input_ids)
        assert T <= 32
        n_a = e.span_a[1] - e.span_a[0]
        assert e.input_ids[0] == CLS and e.input_ids[n_a + 1] == SEP and e.input_ids[-1] == SEP
        assert sum(t in (CLS, SEP) for t in e.input_ids) == 3
        assert e.token_type_ids == [0] * (n_a + 2) + [1] * (T - n_a - 2)
        assert e.special_tokens_mask == [1] + [0] * n_a + [1] + [0] * (T - n_a - 3) + [1]
    # Segments are packed: most examples fill the sequence.
    assert sum(len(e) == 32 for e in examples) / len(examples) > 0.6


def test_short_seq_prob_makes_shorter_examples(corpus):
    def short_fraction(p):
        ex = create_pretraining_examples(corpus[:300], max_seq_length=64, short_seq_prob=p, rng=0, **IDS)
        return sum(len(e) < 64 for e in ex) / len(ex)

    # Without it, only documents' last chunks (and NotNext B's from documents' ends) are short.
    assert short_fraction(0.1) > short_fraction(0.0) + 0.03
    assert short_fraction(0.5) > short_fraction(0.0) + 0.2


def test_truncation_cuts_the_front_or_the_back_at_random():
    # One 100-token sentence per document: every pair is far too long for 16 tokens.
    corpus = synthetic_corpus(400, seed=2, min_sentences=1, max_sentences=1, min_len=100, max_len=100)
    examples = create_pretraining_examples(corpus, max_seq_length=16, short_seq_prob=0.0, rng=0, **IDS)
    assert all(len(e) == 16 for e in examples)
    # A NotNext B is the whole 100-token sentence of another document before truncation:
    # about half of the tokens it lost came off its front, half off its back.
    not_next = [e for e in examples if e.next_sentence_label == 1]
    front = sum(e.span_b[0] for e in not_next)
    back = sum(100 - e.span_b[1] for e in not_next)
    assert len(not_next) > 150 and 0.45 < front / (front + back) < 0.55
    # The longer segment is cut each time: two 100-token segments end up 7 + 6.
    assert all(abs((e.span_a[1] - e.span_a[0]) - (e.span_b[1] - e.span_b[0])) <= 1 for e in not_next)


def test_unused_sentences_are_put_back():
    # All NotNext, nothing long enough to truncate: the A segments of a document tile it.
    corpus = synthetic_corpus(40, seed=3, min_sentences=2, max_sentences=8, min_len=2, max_len=6)
    examples = create_pretraining_examples(corpus, max_seq_length=512, nsp_prob=1.0, rng=0, **IDS)
    assert all(e.next_sentence_label == 1 for e in examples)
    for d, document in enumerate(corpus):
        a_spans = [e.span_a for e in examples if e.doc_a == d]
        assert len(a_spans) >= 1
        covered = [t for (start, end) in a_spans for t in flat(document)[start:end]]
        assert covered == flat(document)


def test_pairing_is_reproducible(corpus):
    make = lambda seed: create_pretraining_examples(corpus[:50], rng=seed, **IDS)
    assert make(3) == make(3)
    assert make(3) != make(4)


def test_bad_corpora_get_clear_errors():
    with pytest.raises(ValueError, match="only one"):
        create_pretraining_examples([[[5, 6, 7], [8, 9]]], **IDS)
    with pytest.raises(ValueError, match="empty"):
        create_pretraining_examples([[], [[]]], **IDS)
    with pytest.raises(TypeError, match="build_pretraining_dataset"):
        create_pretraining_examples([["A sentence.", "Another."]], **IDS)
    with pytest.raises(ValueError, match="vocab"):
        create_pretraining_examples([[["the", "cat"]], [["a", "dog"]]])
    with pytest.raises(ValueError, match="cls_token_id"):
        create_pretraining_examples([[[5, 6]], [[7, 8]]])


def test_word_ids_follow_the_wordpieces():
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "cafe", "the", "##s", "cat"]
    vocab = {t: i for i, t in enumerate(tokens)}
    pieces = ["un", "##aff", "##able", "cafe", "the", "cat", "##s"]
    rng = random.Random(0)
    # A sentence starts with a word's first piece, never with "##", as the tokenizer makes it.
    corpus = [[["the"] + [rng.choice(pieces) for _ in range(rng.randint(0, 12))] for _ in range(6)] for _ in range(30)]
    ids_to_tokens = {i: t for t, i in vocab.items()}
    examples = create_pretraining_examples(corpus, max_seq_length=24, rng=0, vocab=vocab)
    for e in examples:
        tokens = [ids_to_tokens[i] for i in e.input_ids]
        # A "##" piece left first in a segment by truncation starts a word of its own.
        assert e.word_ids == wordpiece_word_ids(tokens)


# ----------------------------------------------------------------------------------------
# Static and dynamic masking
# ----------------------------------------------------------------------------------------


def dataset(examples, **kwargs):
    return PretrainingDataset(
        examples, mask_token_id=MASK, vocab_size=V, pad_token_id=PAD, special_ids=range(5), **kwargs
    )


def same(x, y):
    return all(torch.equal(x[k], y[k]) for k in x)


def test_static_masking_is_fixed_and_copies_differ(examples):
    ex = examples[:200]
    ds = dataset(ex, masking="static", dupe_factor=3)
    assert len(ds) == 600
    assert same(ds[5], ds[5])
    ds.set_epoch(7)  # no effect on static masks
    first = ds[5]
    ds.set_epoch(0)
    assert same(first, ds[5])
    # The three copies of a pair: same tokens underneath, different masks.
    differ = sum(not torch.equal(ds[i]["labels"], ds[i + 200]["labels"]) for i in range(200))
    assert differ > 190
    for i in (0, 200, 400):
        restored = torch.where(ds[i]["labels"] == IGNORE_INDEX, ds[i]["input_ids"], ds[i]["labels"])
        assert restored.tolist() == ex[0].input_ids


def test_dynamic_masking_changes_per_epoch_and_is_reproducible(examples):
    ex = examples[:200]
    ds = dataset(ex, masking="dynamic", seed=11)
    epoch0 = [ds[i] for i in range(200)]
    assert all(same(ds[i], epoch0[i]) for i in range(200))  # same epoch, same mask
    ds.set_epoch(1)
    assert sum(not torch.equal(ds[i]["labels"], epoch0[i]["labels"]) for i in range(200)) > 190
    again = dataset(ex, masking="dynamic", seed=11)
    again.set_epoch(1)
    assert all(same(again[i], ds[i]) for i in range(200))  # (seed, epoch, index) fixes the mask
    other_seed = dataset(ex, masking="dynamic", seed=12)
    assert not all(same(other_seed[i], epoch0[i]) for i in range(20))
    # Static copy c is dynamic masking's epoch c, frozen.
    static = dataset(ex, masking="static", dupe_factor=2, seed=11)
    assert same(static[200 + 7], ds.masked(7, epoch=1))


def test_dataset_masking_statistics(examples):
    ds = dataset(examples[:2000])
    selected = eligible = 0
    for i in range(len(ds)):
        labels = ds[i]["labels"]
        selected += (labels != IGNORE_INDEX).sum().item()
        eligible += len(labels) - 3
    assert abs(selected / eligible - 0.15) < 0.005


def test_whole_word_dataset_needs_word_boundaries(examples):
    with pytest.raises(ValueError, match="word boundaries"):
        dataset(examples[:10], whole_word=True)
    with pytest.raises(ValueError, match="static"):
        dataset(examples[:10], dupe_factor=2)


def test_collate_pads_and_feeds_the_model(examples):
    ds = dataset(examples[:64])
    batch = ds.collate([ds[i] for i in range(8)])
    lengths = [len(examples[i]) for i in range(8)]
    B, T = batch["input_ids"].shape
    assert (B, T) == (8, max(lengths))
    assert batch["attention_mask"].sum(1).tolist() == lengths
    pad = batch["attention_mask"] == 0
    assert (batch["input_ids"][pad] == PAD).all() and (batch["labels"][pad] == IGNORE_INDEX).all()
    assert (batch["token_type_ids"][pad] == 0).all()
    assert batch["next_sentence_label"].tolist() == [examples[i].next_sentence_label for i in range(8)]
    assert set(batch) == {"input_ids", "token_type_ids", "attention_mask", "labels", "next_sentence_label"}
    model = BertForPreTraining(BertConfig.tiny(vocab_size=V, max_position_embeddings=64))
    out = model(**batch)
    assert torch.isfinite(out.loss) and out.mlm_loss is not None and out.nsp_loss is not None
    padded = collate_pretraining([ds[i] for i in range(8)], pad_token_id=PAD, pad_to_multiple_of=16)
    assert padded["input_ids"].shape[1] % 16 == 0


def test_collate_masks_raw_examples_with_a_generator(examples):
    kwargs = dict(pad_token_id=PAD, mask_token_id=MASK, vocab_size=V, special_ids=range(5))
    a = collate_pretraining(examples[:16], generator=torch.Generator().manual_seed(0), **kwargs)
    b = collate_pretraining(examples[:16], generator=torch.Generator().manual_seed(0), **kwargs)
    assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["labels"], b["labels"])
    real = a["attention_mask"].bool()
    assert (a["labels"] != IGNORE_INDEX).any() and (a["labels"][~real] == IGNORE_INDEX).all()
    with pytest.raises(ValueError, match="not masked yet"):
        collate_pretraining(examples[:4], pad_token_id=PAD)


def test_resumed_loading_reproduces_the_uninterrupted_run(examples):
    """What train.py relies on: masks depend on (seed, epoch, index), the order on a seed."""
    seed, batch_size = 5, 16

    def batches(ds, epoch, skip=0, num_workers=0):
        ds.set_epoch(epoch)
        order = torch.randperm(len(ds), generator=torch.Generator().manual_seed(seed + epoch))
        sampler = order[skip * batch_size :].tolist()
        loader = DataLoader(ds, batch_size=batch_size, sampler=sampler, collate_fn=ds.collate, num_workers=num_workers)
        return list(loader)

    ex = examples[:160]
    full = batches(dataset(ex, seed=seed), epoch=2)
    resumed = batches(dataset(ex, seed=seed), epoch=2, skip=4)  # a new process, 4 batches done
    assert len(resumed) == len(full) - 4
    for x, y in zip(full[4:], resumed):
        assert same(x, y)
    # Worker processes draw the same masks as the main process.
    with_workers = batches(dataset(ex, seed=seed), epoch=2, num_workers=2)
    assert all(same(x, y) for x, y in zip(full, with_workers))


# ----------------------------------------------------------------------------------------
# Real text with the real vocabulary
# ----------------------------------------------------------------------------------------

ENGLISH = [
    [
        "The quick brown fox jumps over the lazy dog.",
        "Unaffable foxes rarely befriend dogs.",
        "Nevertheless, this particular fox was remarkably sociable.",
        "It visited the farmyard every morning.",
    ],
    [
        "Photosynthesis converts light energy into chemical energy.",
        "Chlorophyll absorbs mostly blue and red wavelengths.",
        "The resulting glucose fuels the plant's metabolism.",
    ],
    [
        "In 1492, Columbus crossed the Atlantic Ocean.",
        "His voyages opened lasting contact between continents.",
        "Historians still debate their consequences.",
    ],
]
CHINESE = [
    [
        ["中国", "人民", "银行", "在", "北京", "召开", "会议", "。"],
        ["会议", "讨论", "了", "经济", "形势", "。"],
    ],
    [["今天", "天气", "很", "好", "。"], ["我们", "去", "公园", "散步", "。"]],
]


@pytest.fixture(scope="module")
def tokenizer():
    from bertedu.pretrained import minilm_vocab_path
    from bertedu.data.tokenizer import load_vocab_tokenizer

    return load_vocab_tokenizer(minilm_vocab_path(), impl="fast")


def test_build_from_real_text_with_whole_words(tokenizer):
    ds = build_pretraining_dataset(ENGLISH + CHINESE, tokenizer, max_seq_length=48, whole_word=True, seed=3)
    assert len(ds.examples) >= 5
    chinese_words = set()
    for doc in CHINESE:
        for sentence in doc:
            chinese_words.update(w for w in sentence if len(w) > 1)
    n_selected_words = 0
    for epoch in range(40):
        ds.set_epoch(epoch)
        for i in range(len(ds)):
            e, sample = ds.examples[i], ds[i]
            tokens = tokenizer.convert_ids_to_tokens(e.input_ids)
            assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and tokens.count("[SEP]") == 2
            assert len(tokens) <= 48
            selected = (sample["labels"] != IGNORE_INDEX).tolist()
            assert not any(s for s, t in zip(selected, tokens) if t in ("[CLS]", "[SEP]"))
            for w in set(e.word_ids) - {-1}:
                picks = [selected[j] for j, x in enumerate(e.word_ids) if x == w]
                assert all(picks) or not any(picks), f"word {w} of {tokens} split"
                n_selected_words += all(picks)
            # The real vocabulary's specials (ids 0, 100..103) are never random replacements.
            masked = sample["input_ids"].tolist()
            replaced = {
                m for s, m, o in zip(selected, masked, e.input_ids) if s and m != o and m != tokenizer.mask_token_id
            }
            assert not replaced & tokenizer.special_ids
    assert n_selected_words > 100
    # The Chinese words came from the corpus's segmentation: 中国 is one word of two characters.
    zh = next(e for e in ds.examples if "中" in tokenizer.convert_ids_to_tokens(e.input_ids))
    tokens = tokenizer.convert_ids_to_tokens(zh.input_ids)
    j = tokens.index("中")
    assert tokens[j + 1] == "国" and zh.word_ids[j] == zh.word_ids[j + 1] != zh.word_ids[j + 2]
    # English words cut into pieces (una ##ffa ##ble) are one word.
    en = next(e for e in ds.examples if "##ffa" in tokenizer.convert_ids_to_tokens(e.input_ids))
    tokens = tokenizer.convert_ids_to_tokens(en.input_ids)
    k = tokens.index("##ffa")
    assert tokens[k - 1 : k + 2] == ["una", "##ffa", "##ble"]
    assert en.word_ids[k - 1] == en.word_ids[k] == en.word_ids[k + 1] != en.word_ids[k + 2]
