"""Token tagging data: words in, word pieces out, and labels carried across.

Introduced in the token tagging notebook. A tagged sentence comes as words with one label
each (CoNLL rows, or Chinese characters); BERT reads word pieces. `encode_words` keeps
which word every piece came from, `align_word_labels` gives each word's label to its first
piece (the others get -100, left out of the loss), and `word_predictions` maps the
model's per-piece predictions back to one per word.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import torch

from ..model.constants import IGNORE_INDEX


@dataclass
class WordEncoding:
    """A sentence given as words, encoded `[CLS] pieces [SEP]`, with each piece's word.

    word_ids[t] is the index of the word that token t comes from; None for [CLS], [SEP]
    and padding. All lists have length T.
    """

    input_ids: list[int]
    token_type_ids: list[int]
    attention_mask: list[int]
    tokens: list[str]
    word_ids: list[Optional[int]]

    def __len__(self) -> int:
        return len(self.input_ids)


def encode_words(
    tokenizer, words: Sequence[str], max_length: Optional[int] = None, pad_to: Optional[int] = None
) -> WordEncoding:
    """Encode pre-split words (CoNLL rows, or Chinese characters) and remember which
    word each piece came from.

    Each word is tokenised on its own (BERT splits on whitespace first, so this gives
    the pieces the whole sentence would). A word that tokenises to nothing (a lone
    control character or combining mark) becomes [UNK], so every word keeps a token and
    a label. With `max_length`, pieces past max_length - 2 are cut (their words lose
    their tokens: see `word_predictions(..., num_words=...)`).
    """
    if isinstance(words, str):
        raise TypeError("encode_words takes a list of words; for raw text use tokenizer.encode")
    pieces_per_word = tokenizer.tokenize_batch(list(words)) if words else []
    pieces: list[str] = []
    word_ids: list[Optional[int]] = [None]  # [CLS]
    for i, word_pieces in enumerate(pieces_per_word):
        word_pieces = word_pieces or [tokenizer.unk_token]
        pieces.extend(word_pieces)
        word_ids.extend([i] * len(word_pieces))
    if max_length is None and len(pieces) + 2 > tokenizer.model_max_length:
        raise ValueError(
            f"these words make {len(pieces) + 2} tokens, more than model_max_length="
            f"{tokenizer.model_max_length}; pass max_length to cut them"
        )
    if max_length is not None:
        if max_length < 2:
            raise ValueError(f"max_length={max_length} cannot hold [CLS] and [SEP]")
        pieces, word_ids = pieces[: max_length - 2], word_ids[: max_length - 1]
    word_ids.append(None)  # [SEP]
    enc = tokenizer.encode_tokens(pieces, None, truncation=False, pad_to=pad_to)
    word_ids += [None] * (len(enc) - len(word_ids))  # padding
    return WordEncoding(enc.input_ids, enc.token_type_ids, enc.attention_mask, enc.tokens, word_ids)


def align_word_labels(word_ids: Sequence[Optional[int]], word_labels: Sequence[int]) -> list[int]:
    """Word labels -> one label per token: the first piece of each word carries the word's
    label; the word's other pieces, [CLS], [SEP] and padding get -100 (ignored by the loss).

    With bert-base-uncased's vocabulary, "unaffable" -> una ##ffa ##ble: "una" gets the
    label, "##ffa" and "##ble" get -100 (BERT section 5.3: "we use the representation of
    the first sub-token as the input to the token-level classifier").
    """
    labels = []
    previous = None
    for w in word_ids:
        if w is None or w == previous:
            labels.append(IGNORE_INDEX)  # special token, or a continuation piece
        else:
            if w >= len(word_labels):
                raise ValueError(f"word_ids refer to word {w}, but only {len(word_labels)} labels were given")
            label = word_labels[w]
            if isinstance(label, str):
                raise TypeError(f"labels must be integer ids, got the tag {label!r}; map tags to ids first")
            labels.append(int(label))
        previous = w
    return labels


def word_predictions(
    token_logits_or_preds, word_ids: Sequence[Optional[int]], num_words: Optional[int] = None, fill=None
) -> list:
    """Token predictions -> word predictions: each word takes its first piece's prediction.

    token_logits_or_preds: logits (T, C) (argmax is taken) or predicted ids (T,), for one
    sequence; T may exceed len(word_ids) (extra positions are padding).
    num_words: the sentence's length in words; words with no token (cut by truncation)
    get `fill`. Default: as many words as word_ids mention.
    """
    preds = token_logits_or_preds
    if not isinstance(preds, (torch.Tensor, list, tuple)):
        preds = torch.as_tensor(preds)  # e.g. a NumPy array
    if isinstance(preds, torch.Tensor) and preds.is_floating_point():
        if preds.dim() != 2:
            raise ValueError(f"logits must be (T, C) for one sequence, got shape {tuple(preds.shape)}")
        preds = preds.argmax(dim=-1)  # (T,)
    if hasattr(preds, "tolist"):
        preds = preds.tolist()
    if len(preds) < len(word_ids):
        raise ValueError(f"{len(preds)} token predictions for {len(word_ids)} tokens")
    seen = [w for w in word_ids if w is not None]
    if num_words is None:
        num_words = max(seen) + 1 if seen else 0
    out = [fill] * num_words
    done = set()
    for t, w in enumerate(word_ids):
        if w is not None and w not in done and w < num_words:
            out[w] = preds[t]  # the first piece speaks for the word
            done.add(w)
    return out
