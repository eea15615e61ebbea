"""Word labels to word pieces and back (bertedu.data.tagging)."""

import pytest
import torch
import torch.nn.functional as F

from bertedu.data.tagging import align_word_labels, encode_words, word_predictions
from bertedu.pretrained import minilm_vocab_path
from bertedu.data.tokenizer import load_vocab_tokenizer


@pytest.mark.parametrize("impl", ["reference", "fast"])
def test_word_labels_go_to_the_first_piece(impl):
    tok = load_vocab_tokenizer(minilm_vocab_path(), impl=impl)
    words = ["The", "unaffable", "Zoë", "left", "."]
    enc = encode_words(tok, words, pad_to=12)
    assert enc.tokens[:9] == ["[CLS]", "the", "una", "##ffa", "##ble", "zoe", "left", ".", "[SEP]"]
    assert enc.word_ids == [None, 0, 1, 1, 1, 2, 3, 4, None, None, None, None]
    assert enc.attention_mask == [1] * 9 + [0] * 3
    labels = align_word_labels(enc.word_ids, [0, 3, 1, 0, 0])
    assert labels == [-100, 0, 3, -100, -100, 1, 0, 0, -100, -100, -100, -100]
    # The way back: each word takes its first piece's prediction (here, its label).
    logits = F.one_hot(torch.tensor([0 if y == -100 else y for y in labels]), 4).float()  # (T, 4)
    logits[3] = logits[4] = F.one_hot(torch.tensor(2), 4).float()  # other pieces disagree: ignored
    assert word_predictions(logits, enc.word_ids) == [0, 3, 1, 0, 0]


def test_truncated_words_get_the_fill_value(tok):
    enc = encode_words(tok, ["unaffable", "cat", "dog"], max_length=5)  # [CLS] una ##ffa ##ble [SEP]
    assert enc.word_ids == [None, 0, 0, 0, None]
    assert word_predictions([9, 7, 8, 8, 9], enc.word_ids, num_words=3, fill=0) == [7, 0, 0]
    with pytest.raises(TypeError, match="ids"):
        align_word_labels(enc.word_ids, ["B-PER", "O", "O"])
