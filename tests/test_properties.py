"""Property tests (hypothesis): the tokenizers on any Unicode, the data readers on any bytes.

- The reference and fast WordPiece tokenizers and `transformers.BertTokenizerFast` over
  the same vocab.txt give the same pieces for random text mixing scripts, control and
  zero-width characters, combining marks, emoji, CJK and very long words; none raises.
  The reference reads Unicode categories from Python's `unicodedata` (14.0 on Python 3.11);
  `tokenizers` has its own, older tables. Where they differ the two disagree by design:
  U+11C30 BHAIKSUKI VOWEL SIGN I, a nonspacing mark (Mn) since Unicode 9.0, is an accent the
  reference strips and an unknown character `tokenizers` keeps ([UNK]). So random characters are
  drawn among those whose category Unicode 3.2 (`unicodedata.ucd_3_2_0`) already gave them.
- Every data reader, given random bytes or a real test file with bytes flipped, inserted
  or cut, either reads it or raises the project's `DataFormatError` (never another
  exception, never a hang: each example has a deadline).

Settings are chosen to keep the file well under a minute on the 2-core course machine;
`pytest --hypothesis-show-statistics tests/test_properties.py` shows the run counts.
"""

import atexit
import os
import shutil
import tempfile
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from bertedu.data.files import load_path
from bertedu.data.formats import (
    DataFormatError,
    read_conll,
    read_glue_tsv,
    read_squad_json,
)
from bertedu.data.user_files import detect_format, read_cola_tsv, read_table
from bertedu.pretrained import minilm_vocab_path
from bertedu.data.tokenizer import load_vocab_tokenizer

DATA = Path(__file__).resolve().parent / "data"
# No .hypothesis/ folder in the checkout: examples are not replayed between runs (database=None)
# and hypothesis's own caches go to a temporary folder.
_HOME = tempfile.mkdtemp(prefix="bertedu-hypothesis-")
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)
set_hypothesis_home_dir(_HOME)
TOKENIZER_SETTINGS = settings(max_examples=300, deadline=2000, database=None, suppress_health_check=[HealthCheck.too_slow])
READER_SETTINGS = settings(max_examples=150, deadline=2000, database=None, suppress_health_check=[HealthCheck.too_slow])

# ---- random Unicode -------------------------------------------------------------------------------
CONTROL = "\x00\x01\x07\x08\x0b\x0c\x1b\x7f\x85\t\n\r"
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u00ad"  # zero-width space / (non-)joiner, word joiner, BOM, soft hyphen
COMBINING = "\u0301\u0308\u0327\u0303\u20dd\u036f"
EMOJI = "😀👍🏽🇫🇷👨‍👩‍👧❤️🤖"
CJK = "中文字符测试漢字日本語한국어"
OTHER_SCRIPTS = "Здравствуйمرحباשלוםनमस्तेΓειάσουไทย"
PUNCTUATION = ".,;:!?¿¡-—–'\"«»()[]{}…@#$%^&*_+=~`|\\/<>"


def category_since_unicode_3_2(char: str) -> bool:
    """The character had its current Unicode category already in Unicode 3.2: Python's tables and
    the older ones inside `tokenizers` read it alike."""
    return unicodedata.ucd_3_2_0.category(char) == unicodedata.category(char)


pieces = st.one_of(
    st.text(alphabet=st.sampled_from(CONTROL + ZERO_WIDTH + COMBINING + PUNCTUATION + " "), max_size=5),
    st.sampled_from(list(EMOJI) + list(CJK) + list(OTHER_SCRIPTS)),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)).filter(category_since_unicode_3_2),
            max_size=8),  # anything encodable (whose category has not changed since Unicode 3.2)
    st.from_regex(r"[A-Za-zÀ-ÿ]{1,12}", fullmatch=True),
    st.text(alphabet="abcdefghéü", min_size=60, max_size=400),  # very long words
    st.sampled_from(["[MASK]", "[CLS]", "Café", "naïve", "e\u0301", "ﬁ", "Ⅻ", "①", "ǅ"]),
)
texts = st.lists(pieces, max_size=12).map("".join)


@pytest.fixture(scope="module")
def three_tokenizers():
    transformers = pytest.importorskip("transformers")
    from transformers.models.bert.tokenization_bert import load_vocab as hf_load_vocab

    vocab = minilm_vocab_path()
    # transformers 5 ignores vocab_file= (a 5-token vocabulary): pass the vocabulary, read by its own reader
    hf = transformers.BertTokenizerFast(vocab=dict(hf_load_vocab(str(vocab))), do_lower_case=True)
    assert len(hf) == 30522
    return load_vocab_tokenizer(vocab, impl="reference"), load_vocab_tokenizer(vocab, impl="fast"), hf


@TOKENIZER_SETTINGS
@given(text=texts)
def test_three_tokenizers_agree_on_any_unicode(three_tokenizers, text):
    reference, fast, hf = three_tokenizers
    expected = hf.tokenize(text)
    assert reference.tokenize(text) == expected
    assert fast.tokenize(text) == expected


@TOKENIZER_SETTINGS
@given(a=texts, b=texts, max_length=st.integers(3, 40))
def test_encoding_any_pair_never_raises_and_fits(three_tokenizers, a, b, max_length):
    reference, fast, _ = three_tokenizers
    for tok in (reference, fast):
        enc = tok.encode(a, b, max_length=max_length)
        n = len(enc.input_ids)
        assert n <= max_length and len(enc.token_type_ids) == len(enc.attention_mask) == n
    assert reference.encode(a, b, max_length=max_length).input_ids == fast.encode(a, b, max_length=max_length).input_ids


# ---- readers on random or damaged bytes ---------------------------------------------------------
READERS = {
    "glue": read_glue_tsv, "conll": read_conll, "squad": read_squad_json, "table": read_table,
    "cola": read_cola_tsv, "detect": detect_format, "load_path": load_path,
}
SAMPLES = {  # the suffix each reader expects, and a real file of that kind to damage
    "glue": ("train.tsv", DATA / "glue" / "MRPC" / "train.tsv"),
    "conll": ("eng.train", DATA / "conll2003" / "eng.train"),
    "squad": ("train-v2.0.json", DATA / "squad_v2" / "train-v2.0.json"),
    "table": ("reviews.csv", DATA / "user" / "reviews.csv"),
    "cola": ("train.tsv", DATA / "glue" / "CoLA" / "train.tsv"),
    "detect": ("news.jsonl", DATA / "user" / "news.jsonl"),
    "load_path": ("ner_zh.txt", DATA / "user" / "ner_zh.txt"),
}


def _read(reader: str, name: str, data: bytes) -> None:
    """Write `data` to a fresh file called `name` and read it; only DataFormatError may escape."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        try:
            READERS[reader](path)
        except DataFormatError as err:
            assert os.fspath(path) in str(err) or path.name in str(err)  # it names the file


@READER_SETTINGS
@given(reader=st.sampled_from(sorted(READERS)), data=st.one_of(
    st.binary(max_size=400),
    st.text(alphabet=st.sampled_from("ab \t\n,\"{}[]:-0123456789BIO-XDOCSTART#é中"), max_size=200).map(str.encode)))
def test_random_bytes_are_read_or_a_format_error(reader, data):
    _read(reader, SAMPLES[reader][0], data)


@READER_SETTINGS
@given(reader=st.sampled_from(sorted(READERS)), edits=st.lists(
    st.tuples(st.sampled_from(["flip", "insert", "delete", "cut"]), st.floats(0, 1), st.binary(min_size=1, max_size=4)),
    min_size=1, max_size=4))
def test_damaged_real_files_are_read_or_a_format_error(reader, edits):
    name, sample = SAMPLES[reader]
    data = bytearray(sample.read_bytes())
    for how, where, payload in edits:
        at = min(int(where * len(data)), max(len(data) - 1, 0))
        if how == "flip" and data:
            data[at] ^= payload[0] or 0xFF
        elif how == "insert":
            data[at:at] = payload
        elif how == "delete":
            del data[at : at + len(payload)]
        else:  # a copy cut short
            del data[at:]
    _read(reader, name, bytes(data))
