"""Tests for bertedu.data.tokenizer: reference == fast == Hugging Face, encoding, training."""

from __future__ import annotations

import unicodedata

import pytest
import torch

from bertedu.pretrained import minilm_vocab_path
from bertedu.data.tokenizer import (
    SPECIAL_TOKENS,
    Encoding,
    basic_tokenize,
    build_backend,
    is_cjk,
    load_vocab,
    load_vocab_tokenizer,
    train_wordpiece,
)

# A varied text set: the places where tokenizers usually disagree.
TEXTS = {
    "prose": "The quick brown fox jumps over the lazy dog. It wasn't unbelievably slow, was it?",
    "punctuation": 'Hello!!! What?!... (yes) [no] {maybe} <tag> a+b=c; x*y/z | ~home @user #tag $5 '
    "%20 ^caret `tick` \"quoted\" 'single' — em – en … « guillemets » ¿qué? ¡sí!",
    "accents": "Café, naïve, Müller, résumé, façade, coöperate, ÉCOLE, São Paulo, Ångström, İstanbul",
    "numbers": "Pi is 3.14159, e≈2.71828; 1,000,000 people; 2nd place; 10:30pm; -42; 1e-9; ½ ² ①",
    "rare_symbols": "I ❤️ 🤗 emoji ☃ snowman ∑∫√ math ⁂ \x00nul \x07bell \u200bzwsp \ufeffbom "
    "\ufffdreplacement \ue000private a\u0378unassigned \u00adsoft\u00adhyphen",
    "chinese": "我是谁",
    "peoples_daily": "１月１日，人民日报发表元旦献词：迈向充满希望的新世纪——一九九八年新年讲话。",
    "japanese_korean": "東京は日本の首都です。서울은 한국의 수도입니다. カタカナ and ひらがな with 漢字!",
    "arabic_cyrillic": "مرحبا بالعالم — Привет, мир! Ёжик в тумане. Съешь же ещё этих булок.",
    "greek_final_sigma": "ΟΔΥΣΣΕΥΣ ΚΑΙ ΠΗΝΕΛΟΠΗ. Ο ΚΟΣΜΟΣ!",
    "empty": "",
    "whitespace_only": "   \t\n  \u3000 ",
    "very_long_word": "a" * 101 + " ok " + "b" * 100 + " " + "supercalifragilistic" * 6,
    "tabs_newlines": "tabs\tand\nnewlines\r\nand\u00a0nbsp\u2003emspace\u3000ideographic\u2028line",
    "apostrophes_hyphens": "don't can't rock'n'roll O'Neill's state-of-the-art well-known e-mail ‘curly’",
    "urls_emails": "Visit https://example.com/a/b?q=1&r=two#frag or mail john.doe+tag@example.org now",
    "special_tokens_in_text": "the [MASK] sat on the [SEP]mat, not [mask] or [ MASK ]",
}
# Pairs used against Hugging Face (B must be non-empty: HF treats text_pair="" as no pair).
PAIRS = [
    (TEXTS["prose"], TEXTS["accents"]),
    (TEXTS["chinese"], TEXTS["peoples_daily"]),
    (TEXTS["urls_emails"], TEXTS["punctuation"]),
    ("", TEXTS["numbers"]),
    (TEXTS["whitespace_only"], "just this"),
]


@pytest.fixture(scope="module")
def vocab_path():
    return minilm_vocab_path()


@pytest.fixture(scope="module")
def ref(vocab_path):
    return load_vocab_tokenizer(vocab_path, impl="reference")


@pytest.fixture(scope="module")
def fast(vocab_path):
    return load_vocab_tokenizer(vocab_path, impl="fast")


@pytest.fixture(scope="module", params=["reference", "fast"])
def tok(request, ref, fast):
    return {"reference": ref, "fast": fast}[request.param]


def _hf_vocab(vocab_path):
    # transformers' own reader, so that HF's side shares no code with ours.
    from transformers.models.bert.tokenization_bert import load_vocab as hf_load_vocab

    return dict(hf_load_vocab(str(vocab_path)))


@pytest.fixture(scope="module")
def hf_fast(vocab_path):
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    # transformers 5 ignores vocab_file= in the constructor (it would silently build a
    # 5-token vocabulary); pass the vocabulary itself.
    hf = transformers.BertTokenizerFast(vocab=_hf_vocab(vocab_path), do_lower_case=True)
    assert len(hf) == 30522
    return hf


@pytest.fixture(scope="module")
def hf_slow(vocab_path):
    """transformers' pure-Python BertTokenizer (BertTokenizerLegacy in v5), if present."""
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    cls = getattr(transformers, "BertTokenizerLegacy", None)
    if cls is None and int(transformers.__version__.split(".")[0]) < 5:
        cls = transformers.BertTokenizer  # the slow one before v5
    if cls is None:
        pytest.skip("this transformers has no pure-Python BertTokenizer")
    hf = cls(vocab_file=str(vocab_path), do_lower_case=True)
    assert len(hf) == 30522
    return hf


# ----------------------------------------------------------------------------------------
# The vocabulary and construction errors
# ----------------------------------------------------------------------------------------


def test_load_real_vocab(vocab_path, ref):
    vocab = load_vocab(vocab_path)
    assert len(vocab) == 30522 == ref.vocab_size == len(ref)
    assert [vocab[t] for t in SPECIAL_TOKENS] == [0, 100, 101, 102, 103]
    assert (ref.pad_token_id, ref.unk_token_id, ref.cls_token_id, ref.sep_token_id, ref.mask_token_id) == (
        0, 100, 101, 102, 103,
    )
    assert ref.special_ids == {0, 100, 101, 102, 103}
    assert ref.convert_ids_to_tokens([101, 7592]) == ["[CLS]", "hello"]
    assert ref.convert_tokens_to_ids(["hello", "no-such-piece"]) == [7592, 100]


def test_vocab_errors(tmp_path, vocab_path):
    with pytest.raises(FileNotFoundError, match="No vocabulary file"):
        load_vocab(tmp_path / "missing.txt")
    with pytest.raises(FileNotFoundError):
        load_vocab_tokenizer(tmp_path / "missing.txt", impl="fast")
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="empty"):
        load_vocab(tmp_path / "empty.txt")
    (tmp_path / "nospecial.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        load_vocab(tmp_path / "nospecial.txt")
    (tmp_path / "dup.txt").write_text("\n".join([*SPECIAL_TOKENS, "a", "a"]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="twice"):
        load_vocab(tmp_path / "dup.txt")
    with pytest.raises(ValueError, match="Unknown tokenizer impl 'rust'"):
        load_vocab_tokenizer(vocab_path, impl="rust")


# ----------------------------------------------------------------------------------------
# Reference == fast == Hugging Face
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(TEXTS))
def test_reference_fast_and_hf_agree(name, ref, fast, hf_fast):
    text = TEXTS[name]
    tokens = ref.tokenize(text)
    assert tokens == fast.tokenize(text)
    assert tokens == hf_fast.tokenize(text)
    expected = hf_fast(text)
    for impl in (ref, fast):
        enc = impl.encode(text)
        assert enc.input_ids == expected["input_ids"]
        assert enc.token_type_ids == expected["token_type_ids"]
        assert enc.attention_mask == expected["attention_mask"]


@pytest.mark.parametrize("i", range(len(PAIRS)))
def test_pairs_match_hf(i, ref, fast, hf_fast):
    a, b = PAIRS[i]
    expected = hf_fast(a, b)
    for impl in (ref, fast):
        enc = impl.encode(a, b)
        assert enc.input_ids == expected["input_ids"]
        assert enc.token_type_ids == expected["token_type_ids"]
        assert enc.attention_mask == expected["attention_mask"]


def test_matches_hf_slow_python_tokenizer(ref, hf_slow):
    for name, text in TEXTS.items():
        if name == "greek_final_sigma":
            continue  # see test_final_sigma_is_lowercased_per_character
        # The Python tokenizer drops unassigned code points (category Cn) as "control";
        # the Rust one, and so we, keep them (they become [UNK]).
        text = text.replace("\u0378", "")
        assert ref.tokenize(text) == hf_slow.tokenize(text), name
        assert ref.encode(text).input_ids == hf_slow(text)["input_ids"], name
    for a, b in PAIRS:
        assert ref.encode(a, b).input_ids == hf_slow(a, b)["input_ids"]


def test_final_sigma_is_lowercased_per_character(ref, fast, hf_slow):
    # Python 3's str.lower() turns a word-final capital sigma into "ς"; the Rust
    # tokenizers library (and Python 2, which BERT was built on) lower-case character by
    # character. We follow the fast path, so reference and fast agree.
    expected = ["κ", "##ο", "##σ", "##μ", "##ο", "##σ"]
    assert ref.tokenize("ΚΟΣΜΟΣ") == fast.tokenize("ΚΟΣΜΟΣ") == expected
    assert hf_slow.tokenize("ΚΟΣΜΟΣ")[-1].endswith("ς")


@pytest.mark.parametrize("lowercase", [True, False])
def test_basic_tokenize_matches_rust_on_every_code_point(lowercase):
    # Every character below U+20000 assigned in Unicode 3.2 whose category has not changed
    # since (the Rust library's tables and Python's unicodedata are different Unicode
    # versions; the characters added later are rare scripts, left out here). One string.
    old = unicodedata.ucd_3_2_0
    chars = [
        chr(cp)
        for cp in range(0x20000)
        if not 0xD800 <= cp <= 0xDFFF
        and old.category(chr(cp)) != "Cn"
        and old.category(chr(cp)) == unicodedata.category(chr(cp))
    ]
    assert len(chars) > 50_000
    text = " ".join(f"a{c}b" for c in chars)
    backend = build_backend({"[UNK]": 0}, lowercase=lowercase)
    normalized = backend.normalizer.normalize_str(text)
    rust_words = [word for word, _ in backend.pre_tokenizer.pre_tokenize_str(normalized)]
    assert basic_tokenize(text, lowercase) == rust_words


def test_cjk_extension_e_follows_bert_ranges():
    # BERT lists U+2B820..U+2CEAF; the Rust library starts that range at U+2B920.
    assert is_cjk(chr(0x2B820)) and is_cjk(chr(0x2CEAF)) and is_cjk("谁")
    assert not is_cjk("カ") and not is_cjk("서")


def test_chinese_is_one_token_per_character(tok):
    assert tok.tokenize("我是谁") == ["我", "[UNK]", "[UNK]"]  # 是/谁 are not in the uncased vocab
    text = "迈向充满希望的新世纪"
    assert len(tok.tokenize(text)) == len(text)
    assert basic_tokenize("我是谁ok") == ["我", "是", "谁", "ok"]


def test_cased_mode_keeps_case_and_accents(vocab_path, hf_fast):
    import transformers

    hf_cased = transformers.BertTokenizerFast(vocab=_hf_vocab(vocab_path), do_lower_case=False)
    text = "Café Müller said HELLO to naïve Bob."
    ref = load_vocab_tokenizer(vocab_path, lowercase=False)
    fast = load_vocab_tokenizer(vocab_path, lowercase=False, impl="fast")
    assert basic_tokenize(text, lowercase_text=False)[:2] == ["Café", "Müller"]
    assert ref.tokenize(text) == fast.tokenize(text) == hf_cased.tokenize(text)
    assert ref.tokenize(text) != hf_fast.tokenize(text)


def test_special_tokens_in_text(vocab_path, tok):
    assert tok.tokenize("the [MASK] sat") == ["the", "[MASK]", "sat"]
    assert tok.tokenize("the [mask] sat") == ["the", "[", "mask", "]", "sat"]
    as_text = load_vocab_tokenizer(vocab_path, impl=tok.impl, split_special_tokens=True)
    assert as_text.tokenize("the [MASK] sat") == ["the", "[", "mask", "]", "sat"]


def test_wordpiece_pieces_and_unk(tok):
    assert tok.tokenize("Unaffable") == ["una", "##ffa", "##ble"]
    assert tok.tokenize("x" * 100) != ["[UNK]"]  # 100 characters is still a word ...
    assert tok.tokenize("x" * 101) == ["[UNK]"]  # ... 101 is not


# ----------------------------------------------------------------------------------------
# Encoding: layout, truncation, padding, batches
# ----------------------------------------------------------------------------------------


def test_pair_layout_by_hand(tok):
    enc = tok.encode("the cat", "sat down", pad_to=10)
    assert isinstance(enc, Encoding) and len(enc) == 10
    assert enc.tokens == ["[CLS]", "the", "cat", "[SEP]", "sat", "down", "[SEP]", "[PAD]", "[PAD]", "[PAD]"]
    assert enc.input_ids == [101, 1996, 4937, 102, 2938, 2091, 102, 0, 0, 0]
    assert enc.token_type_ids == [0, 0, 0, 0, 1, 1, 1, 0, 0, 0]
    assert enc.attention_mask == [1, 1, 1, 1, 1, 1, 1, 0, 0, 0]
    assert enc.special_tokens_mask == [1, 0, 0, 1, 0, 0, 1, 1, 1, 1]
    single = tok.encode("the cat")
    assert single.tokens == ["[CLS]", "the", "cat", "[SEP]"] and single.token_type_ids == [0] * 4
    with pytest.raises(ValueError, match="pad_to=3"):
        tok.encode("the cat", pad_to=3)


def test_special_tokens_mask_and_padding_match_hf(tok, hf_fast):
    expected = hf_fast(
        "the [MASK] sat", "on it", padding="max_length", max_length=12, return_special_tokens_mask=True
    )
    enc = tok.encode("the [MASK] sat", "on it", pad_to=12)
    for key in ("input_ids", "token_type_ids", "attention_mask", "special_tokens_mask"):
        assert getattr(enc, key) == expected[key], key


def _rust_longest_first(n_a, n_b, budget):
    """What the Rust tokenizers library keeps: the shorter segment (A on a tie) keeps at
    most budget // 2 tokens, the longer one the rest."""
    if n_a + n_b <= budget:
        return n_a, n_b
    swap = n_a > n_b
    short, long_ = (n_b, n_a) if swap else (n_a, n_b)
    short = min(short, budget // 2)
    long_ = budget - short
    return (long_, short) if swap else (short, long_)


def test_longest_first_matches_hf(ref, hf_slow, hf_fast):
    for n_a in range(1, 8):
        for n_b in range(1, 8):
            for max_length in range(3, n_a + n_b + 4):
                a, b = " ".join(["a"] * n_a), " ".join(["b"] * n_b)  # n_a and n_b tokens
                ours = ref.encode(a, b, max_length=max_length).input_ids
                # BERT's _truncate_seq_pair (and transformers' Python tokenizer) pops one
                # token at a time from the longer segment, from B on a tie: so do we.
                assert ours == hf_slow(a, b, truncation="longest_first", max_length=max_length)["input_ids"]
                # The Rust library gives an odd budget's spare token to B rather than A
                # when both segments must be cut and A is not the longer; else identical.
                rust = hf_fast(a, b, truncation="longest_first", max_length=max_length)["input_ids"]
                kept = (ours.count(1037), ours.count(1038))  # 1037 = "a", 1038 = "b"
                rust_kept = _rust_longest_first(n_a, n_b, max_length - 3)
                assert (rust.count(1037), rust.count(1038)) == rust_kept
                if kept == rust_kept:
                    assert ours == rust
                else:
                    assert kept == (rust_kept[0] + 1, rust_kept[1] - 1) and n_a <= n_b
    text = TEXTS["prose"]
    for max_length in (2, 3, 8, 20):
        expected = hf_fast(text, truncation=True, max_length=max_length)["input_ids"]
        assert ref.encode(text, max_length=max_length).input_ids == expected


def test_head_tail_keeps_start_and_end(tok):
    pieces = [str(i) for i in range(600)]  # all single pieces in the vocabulary
    enc = tok.encode_tokens(pieces, max_length=512, truncation="head_tail")
    assert len(enc) == 512
    assert enc.tokens[1:129] == pieces[:128]  # head 128 ...
    assert enc.tokens[129:511] == pieces[-382:]  # ... + tail 382 (Sun et al. 2019)
    text = " ".join(pieces)
    enc = tok.encode(text, max_length=512, truncation="head_tail")
    tokens = tok.tokenize(text)
    assert len(enc) == 512 and enc.tokens[1] == tokens[0] and enc.tokens[-2] == tokens[-1]
    enc = tok.encode(text, max_length=12, truncation="head_tail", head_fraction=0.5)
    assert enc.tokens[1:-1] == tokens[:5] + tokens[-5:]


def test_only_first_and_only_second(tok):
    enc = tok.encode("a a a a a", "b b", max_length=7, truncation="only_first")
    assert enc.tokens == ["[CLS]", "a", "a", "[SEP]", "b", "b", "[SEP]"]
    enc = tok.encode("a a", "b b b b b", max_length=7, truncation="only_second")
    assert enc.tokens == ["[CLS]", "a", "a", "[SEP]", "b", "b", "[SEP]"]
    with pytest.raises(ValueError, match="other segment"):
        tok.encode("a a a a a", "b b b b b", max_length=7, truncation="only_first")


def test_error_truncation_and_too_long_inputs(tok):
    long_text = " ".join(["word"] * 600)
    with pytest.raises(ValueError, match=r"600 tokens.*only 126 fit.*'head_tail'"):
        tok.encode(long_text, max_length=128, truncation="error")
    with pytest.raises(ValueError, match="602 tokens, longer than model_max_length=512"):
        tok.encode(long_text)
    assert len(tok.encode(long_text, truncation="longest_first")) == 512
    assert len(tok.encode(long_text, truncation=False)) == 602
    assert tok.encode(long_text, truncation=True).tokens == tok.encode(long_text, truncation="longest_first").tokens
    assert len(tok.encode("word word", truncation="error")) == 4  # short enough: no error
    with pytest.raises(ValueError, match="Unknown truncation"):
        tok.encode(long_text, max_length=10, truncation="middle")


def test_encode_batch_matches_hf(tok, hf_fast):
    texts = [TEXTS["prose"], TEXTS["chinese"], "", TEXTS["accents"]]
    batch = tok.encode_batch(texts)
    expected = hf_fast(texts, padding=True, return_tensors="pt")
    assert set(batch) == {"input_ids", "token_type_ids", "attention_mask"}
    for key in batch:
        assert batch[key].dtype == torch.long
        torch.testing.assert_close(batch[key], expected[key])
    pairs = PAIRS[:3]
    # An even budget (21 - 3 specials), where Rust's longest_first tie-break agrees.
    batch = tok.encode_batch(pairs, max_length=21)
    a, b = [a for a, _ in pairs], [b for _, b in pairs]
    expected = hf_fast(a, b, padding=True, truncation=True, max_length=21, return_tensors="pt")
    assert batch["input_ids"].shape == (3, 21)
    for key in batch:
        torch.testing.assert_close(batch[key], expected[key])
    ragged = tok.encode_batch(["a", "a b c"], pad=False, return_special_tokens_mask=True)
    assert [len(ids) for ids in ragged["input_ids"]] == [3, 5]
    assert ragged["special_tokens_mask"][0] == [1, 0, 1]


def test_decode_round_trip(tok):
    text = "the quick brown fox jumps over the unaffable tokenization"
    ids = tok.encode(text).input_ids
    assert tok.decode(ids) == text
    assert tok.decode(ids, skip_special_tokens=False).startswith("[CLS] the quick")
    assert tok.decode(tok.encode("Café, OK!").input_ids) == "cafe , ok !"
    with pytest.raises(IndexError, match="outside the vocabulary"):
        tok.convert_ids_to_tokens([30522])


# ----------------------------------------------------------------------------------------
# Training a vocabulary
# ----------------------------------------------------------------------------------------

SENTENCES = [
    "the {a} {n} {v} over the {b} {m} near the {place}.",
    "a {a} {n} was {v} by the {b} {m} in {place}!",
    "do {n}s and {m}s {v} together, asked the {a} teacher?",
]
WORDS = {
    "a": ["quick", "lazy", "happy", "unhappy", "careful", "careless", "wonderful"],
    "b": ["brown", "slow", "bright", "brighter", "brightest", "old", "older"],
    "n": ["fox", "dog", "teacher", "runner", "reader", "painter", "builder"],
    "m": ["cat", "student", "singer", "writer", "walker", "jumper", "worker"],
    "v": ["jumped", "jumping", "walked", "walking", "painted", "reading", "builds"],
    "place": ["London", "Paris", "the park", "the river", "São Paulo", "北京", "the garden"],
}


def _corpus(n_lines=400):
    for i in range(n_lines):  # deterministic variations of a few templates
        template = SENTENCES[i % len(SENTENCES)]
        choice = {key: words[(i * (k + 3) + i // 7) % len(words)] for k, (key, words) in enumerate(WORDS.items())}
        yield template.format(**choice)


def test_train_wordpiece_round_trip(tmp_path):
    path = train_wordpiece(_corpus(), vocab_size=150, out_path=tmp_path / "out" / "vocab.txt")
    assert path == tmp_path / "out" / "vocab.txt"
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[:5] == list(SPECIAL_TOKENS) and lines[-1] == ""
    vocab = load_vocab(path)
    assert 50 < len(vocab) <= 150
    assert any(token.startswith("##") for token in vocab)
    ref = load_vocab_tokenizer(path, impl="reference")
    fast = load_vocab_tokenizer(path, impl="fast")
    held_out = [
        "the wonderful painter walked over the brightest student near the river.",
        "Careless readers and older singers keep reading, jumping, painting!",
        "a völlig unseen zebra in 北京 ate 42 quantum pickles?",
    ]
    pieces = [ref.tokenize(text) for text in held_out]
    assert pieces == [fast.tokenize(text) for text in held_out]
    assert any(p.startswith("##") for sentence in pieces for p in sentence)
    assert all(ref.encode(t).input_ids == fast.encode(t).input_ids for t in held_out)
    # The same corpus as a file or a list of files; a dict comes back without out_path.
    # (Not compared with `vocab`: the tokenizers trainer breaks ties between equally
    # frequent merges in hash-map order, so runs can differ: tokenizers issue #1794.)
    (tmp_path / "corpus.txt").write_text("\n".join(_corpus()) + "\n", encoding="utf-8")
    for corpus in (tmp_path / "corpus.txt", [str(tmp_path / "corpus.txt")]):
        trained = train_wordpiece(corpus, vocab_size=150)
        assert list(trained)[:5] == list(SPECIAL_TOKENS) and len(trained) == len(vocab)
        assert list(trained.values()) == list(range(len(trained)))


def test_train_wordpiece_errors(tmp_path):
    with pytest.raises(ValueError, match="empty"):
        train_wordpiece(iter(["", "  \n"]), vocab_size=100)
    with pytest.raises(FileNotFoundError):
        train_wordpiece(tmp_path / "nope.txt", vocab_size=100)
