"""Vocabularies for the corpora: WordPiece for English, one token per character for
Chinese. Introduced in the pretraining-data notebook.

- `build_vocab(corpus, vocab_size=8000)` trains a WordPiece vocabulary with the
  `tokenizers` trainer made deterministic (`bertedu.data.wordpiece_train.learn_reproducibly`),
  as Google did for BERT (30,522 pieces for English; a toy model does well with 8k).
- `build_bpe_vocab(corpus, vocab_size)` trains RoBERTa's byte-level BPE instead (vocab.txt
  and merges.txt; notebook 15).
- `build_char_vocab(corpus)` is what Google's Chinese BERT does: BERT's basic tokeniser
  already cuts Chinese into single characters, so the vocabulary is simply every
  character seen often enough (plus ASCII, so mixed text still works).
- The real 30,522-piece uncased vocabulary: `bertedu.pretrained.minilm_vocab_path()`.

All three are plain `vocab.txt` files that `load_vocab_tokenizer` reads with either
implementation. The corpus is a `--corpus` value ("wiki-en", "peoples-daily-zh", a path
...) or any iterable of documents (lists of sentences).
"""

from __future__ import annotations

import itertools
import os
import string
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from bertedu.data.tokenizer import (
    train_byte_level_bpe,
    write_vocab,
    CONTINUATION_PREFIX,
    SPECIAL_TOKENS,
    basic_tokenize,
    is_cjk,
    is_punctuation,
)

from .corpora import Document, load_corpus


def corpus_sentences(corpus: str | os.PathLike | Iterable[Document], max_documents: int | None = None) -> Iterator[str]:
    """The sentences of a corpus (a `--corpus` value or an iterable of documents), streamed."""
    documents = load_corpus(corpus) if isinstance(corpus, (str, os.PathLike)) else corpus
    for document in itertools.islice(documents, max_documents):
        if isinstance(document, str):
            raise TypeError("A corpus yields documents (lists of sentences), not strings; wrap each text in a list.")
        yield from document


def build_vocab(
    corpus: str | os.PathLike | Iterable[Document],
    vocab_size: int = 8000,
    out_path: str | os.PathLike | None = None,
    lowercase: bool = True,
    min_frequency: int = 2,
    max_documents: int | None = None,
) -> Path | dict[str, int]:
    """Train a WordPiece vocabulary on a corpus (the first `max_documents` documents).

    Writes `vocab.txt` to `out_path` (a file, or a folder) and returns its Path; without
    `out_path`, returns the token -> id dict. The specials come first: [PAD]=0 [UNK]=1
    [CLS]=2 [SEP]=3 [MASK]=4. The same corpus gives the same file, line for line
    (`bertedu.data.wordpiece_train.learn_reproducibly`: `tokenizers`' trainer with the
    alphabet's ids fixed; `train_wordpiece` orders some pieces differently run to run), so
    the same `bertedu pretrain` command twice is the same run.
    """
    from .wordpiece_train import learn_reproducibly

    if isinstance(corpus, (str, os.PathLike)) or iter(corpus) is not corpus:
        texts = lambda: corpus_sentences(corpus, max_documents)  # noqa: E731 (read twice)
    else:  # a one-pass iterator: held as a list
        sentences = list(corpus_sentences(corpus, max_documents))
        texts = lambda: iter(sentences)  # noqa: E731
    tokens = learn_reproducibly(texts, vocab_size, min_frequency=min_frequency, lowercase=lowercase,
                                limit_alphabet=1000)
    if not tokens:
        raise ValueError("The corpus is empty (no non-blank text): nothing to learn a vocabulary from.")
    if out_path is None:
        return {token: i for i, token in enumerate(tokens)}
    return write_vocab(tokens, out_path)


def build_bpe_vocab(
    corpus: str | os.PathLike | Iterable[Document],
    vocab_size: int,
    out_path: str | os.PathLike,
    min_frequency: int = 2,
    max_documents: int | None = None,
) -> Path:
    """Train a byte-level BPE vocabulary (RoBERTa's kind) on a corpus: vocab.txt and merges.txt
    at `out_path` (a file, or a folder); returns the vocab.txt's Path. See
    `bertedu.data.tokenizer.train_byte_level_bpe`."""
    return train_byte_level_bpe(corpus_sentences(corpus, max_documents), vocab_size, out_path,
                                min_frequency=min_frequency)


def build_char_vocab(
    corpus: str | os.PathLike | Iterable[Document],
    out_path: str | os.PathLike | None = None,
    min_count: int = 1,
    lowercase: bool = True,
    max_documents: int | None = None,
) -> Path | dict[str, int]:
    """A character-level vocabulary (Chinese BERT style) from a corpus.

    Each character is normalised as the tokenizer will normalise it (lower-cased, accents
    stripped) and gets the form(s) WordPiece will look up: a CJK character or a
    punctuation mark is always a word of its own (`中`); other characters also appear
    inside words (`１９９８` -> `１ ##９ ##９ ##８`), so they get both forms. Every
    character seen at least `min_count` times is kept, plus printable ASCII, after the
    five specials. Order: specials, ASCII, then the rest by falling frequency.
    """
    raw_counts: Counter[str] = Counter()
    for sentence in corpus_sentences(corpus, max_documents):
        raw_counts.update(sentence)  # counting characters in C is fast; normalise distinct ones below
    counts: Counter[str] = Counter()
    for raw_char, count in raw_counts.items():
        # What BERT's basic tokeniser turns this character into (lower-cased, accents
        # stripped: "É" -> "e"; nothing for whitespace and control characters).
        for char in "".join(basic_tokenize(raw_char, lowercase_text=lowercase)):
            counts[char] += count
            if not (is_cjk(char) or is_punctuation(char)):
                # Letters, digits and other symbols also occur inside words, where
                # WordPiece looks them up as "##x" ("１９９８" -> "１ ##９ ##９ ##８").
                counts[CONTINUATION_PREFIX + char] += count
    if not counts:
        raise ValueError("The corpus is empty (no non-blank text): nothing to build a vocabulary from.")

    ascii_chars = string.ascii_lowercase if lowercase else string.ascii_letters
    ascii_chars += string.digits + string.punctuation
    tokens = list(SPECIAL_TOKENS)
    for char in ascii_chars:
        tokens.append(char)
        if not is_punctuation(char):  # punctuation is always split off, never continues a word
            tokens.append(CONTINUATION_PREFIX + char)
    seen = set(tokens)
    for token, count in counts.most_common():
        if count >= min_count and token not in seen:
            tokens.append(token)
            seen.add(token)
    vocab = {token: i for i, token in enumerate(tokens)}
    if out_path is None:
        return vocab
    return write_vocab(tokens, out_path)


def task_texts(examples: Iterable, max_examples: int = 1000) -> Iterator[str]:
    """The text of a task's first `max_examples` examples, as strings: both sentences of a
    pair, a tagged sentence's words, a question and its context."""
    for example in itertools.islice(examples, max_examples):
        for field in ("text_a", "text_b", "question", "context"):
            if getattr(example, field, None):
                yield getattr(example, field)
        if getattr(example, "tokens", None):
            yield " ".join(example.tokens)


def unreadable_share(texts: Iterable[str], tokenizer, min_letters: int = 3) -> float:
    """The share of the words in `texts` that `tokenizer`'s vocabulary cannot read: a word that
    becomes [UNK] (Chinese on an English vocabulary), or a word of `min_letters` or more that
    is spelled one piece per character (English on a Chinese character vocabulary, whose
    ASCII pieces spell every word out). 0.0 for no words; near 0 for a vocabulary built for
    the text's language."""
    words = unreadable = 0
    for text in texts:
        for word in basic_tokenize(text):
            pieces = tokenizer.tokenize(word)
            words += 1
            spelled = len(word) >= min_letters and len(pieces) == len(word)
            unreadable += spelled or tokenizer.unk_token in pieces
    return unreadable / words if words else 0.0


def warn_if_unreadable(texts: Iterable[str], tokenizer, what: str, whose: str, then: str, most: float = 1 / 3) -> None:
    """Warn when more than `most` of the words in `texts` are unreadable to `tokenizer`
    (`unreadable_share`): "54% of {what} are [UNK] or spelled letter by letter in {whose}
    vocabulary{then}". Measured on the embedded tasks: at most 3% where the vocabulary fits the
    language, 54-99% where it does not (course-zh on ner-en, course-en on ner-zh), so a third
    sits far from both. `bertedu finetune`, `fill-mask` and `masked-accuracy` say it before
    they print numbers that would look like results."""
    share = unreadable_share(texts, tokenizer)
    if share > most:
        warnings.warn(f"{share:.0%} of {what} are [UNK] or spelled letter by letter in {whose} vocabulary{then}",
                      stacklevel=2)
