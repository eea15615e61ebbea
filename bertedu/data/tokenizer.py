"""WordPiece tokenisation, the way BERT does it. Introduced in notebook 01.

BERT never sees characters or words: it sees ids of *word pieces* from a fixed
vocabulary (`vocab.txt`, one piece per line, id = line number). Text becomes pieces in
two stages, exactly as in the original google-research/bert `tokenization.py`:

1. **Basic tokenisation** (`basic_tokenize`): clean the text (drop NUL, U+FFFD and
   control characters, turn every kind of whitespace into a space), put spaces around
   CJK ideographs (Chinese is written without spaces, so each character becomes a word),
   split on whitespace, lower-case and strip accents (uncased models), and split
   punctuation off into words of its own.
2. **WordPiece** (`wordpiece`): cut each word greedily into the longest pieces found in
   the vocabulary, left to right; pieces that continue a word carry a `##` prefix.
   A word with no cut, or longer than 100 characters, becomes `[UNK]`.

Two implementations share one vocabulary and one encoding code path (special tokens,
truncation, padding): `ReferenceTokenizer`, written out in Python in this file so it can
be read, and `FastTokenizer`, the same rules run by the Rust `tokenizers` library. A test
proves that they agree with each other and with Hugging Face `transformers`.

    >>> tok = load_vocab_tokenizer(minilm_vocab_path())          # impl="reference"
    >>> tok.tokenize("Unaffable café!")
    ['una', '##ffa', '##ble', 'cafe', '!']
    >>> enc = tok.encode("The cat sat.", "It purred.")           # [CLS] A [SEP] B [SEP]

Known, deliberate choices where BERT implementations disagree (all tested):

- Lower-casing is done character by character, as the Rust `tokenizers` library and
  Python 2 (on which BERT was built) do. Python 3's `str.lower` would turn a word-final
  Greek capital sigma into `ς` rather than `σ`.
- "Control characters" are Unicode categories Cc, Cf, Co (the original dropped only Cc
  and Cf; Hugging Face drops private-use characters too). Unassigned code points are kept
  (and so become `[UNK]`), as the Rust library does.
- Special tokens written in the text (`"the [MASK] sat"`) are kept whole, as Hugging Face
  does; `split_special_tokens=True` treats them as ordinary text, as the original did.
"""

from __future__ import annotations

import os
import re
import tempfile
import unicodedata
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..model.constants import MERGES_NAME, VOCAB_NAME
from ..utils import permissions_as_umask

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)
CONTINUATION_PREFIX = "##"
MAX_INPUT_CHARS_PER_WORD = 100  # longer "words" are almost always junk (URLs, base64)
TRUNCATION_STRATEGIES = ("longest_first", "head_tail", "only_first", "only_second", "error")

# The CJK Unified Ideographs blocks, as listed in BERT's `_is_chinese_char`. Only these
# are split one per token: Japanese kana and Korean hangul are written with spaces (or
# are phonetic), so BERT treats them like any other letters.
CJK_RANGES = (
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0x3400, 0x4DBF),  # Extension A
    (0x20000, 0x2A6DF),  # Extension B
    (0x2A700, 0x2B73F),  # Extension C
    (0x2B740, 0x2B81F),  # Extension D
    (0x2B820, 0x2CEAF),  # Extension E (the Rust library starts this one at 0x2B920)
    (0xF900, 0xFAFF),  # Compatibility Ideographs
    (0x2F800, 0x2FA1F),  # Compatibility Ideographs Supplement
)


# ----------------------------------------------------------------------------------------
# The vocabulary
# ----------------------------------------------------------------------------------------


def load_vocab(path: str | os.PathLike, required: Sequence[str] = SPECIAL_TOKENS) -> dict[str, int]:
    """Read a BERT `vocab.txt`: one token per line, its id is its line number (from 0).

    Introduced in notebook 01. Raises FileNotFoundError for a missing file and ValueError
    for an empty vocabulary, a repeated token or a missing special token in `required`.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"No vocabulary file at {path}. Pass the path of a BERT vocab.txt, for example "
            "bertedu.pretrained.minilm_vocab_path(), or train one with train_wordpiece()."
        )
    text = path.read_text(encoding="utf-8")
    # Split on "\n" only: str.splitlines() would also split on characters such as U+2028.
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    vocab: dict[str, int] = {}
    for index, line in enumerate(lines):
        token = line.removesuffix("\r")  # tolerate Windows line endings
        if token in vocab:
            raise ValueError(
                f"{path}: token {token!r} appears twice (lines {vocab[token] + 1} and "
                f"{index + 1}); ids would be ambiguous. Remove the duplicate line."
            )
        vocab[token] = index
    return check_vocab(vocab, required, source=str(path))


def check_vocab(
    vocab: Mapping[str, int], required: Sequence[str] = SPECIAL_TOKENS, source: str = "vocabulary"
) -> dict[str, int]:
    """Check that `vocab` is non-empty and holds the `required` special tokens."""
    if not vocab:
        raise ValueError(f"{source} is empty: a vocabulary needs at least the tokens {list(required)}.")
    missing = [token for token in required if token not in vocab]
    if missing:
        raise ValueError(
            f"{source} lacks the special token(s) {missing}. BERT needs {list(required)}; "
            "train_wordpiece() adds them, or add them as lines of vocab.txt."
        )
    return dict(vocab)


# ----------------------------------------------------------------------------------------
# The reference implementation, step 1: basic tokenisation
# ----------------------------------------------------------------------------------------


def is_whitespace(char: str) -> bool:
    """Space, tab, newline, carriage return, or any Unicode space separator (Zs)."""
    # \t \n \r are control characters to Unicode, but in text they separate words.
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def is_control(char: str) -> bool:
    """A control (Cc), format (Cf) or private-use (Co) character, other than \\t \\n \\r."""
    if char in "\t\n\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf", "Co")


def is_punctuation(char: str) -> bool:
    """Unicode punctuation (P*), or any ASCII character that is not a letter or digit."""
    cp = ord(char)
    # ASCII symbols such as $ ^ ` + < = > | ~ are not "P*" in Unicode, but BERT splits
    # them off too, so treat every non-alphanumeric printable ASCII character alike.
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def is_cjk(char: str) -> bool:
    """True for a CJK ideograph (see `CJK_RANGES`)."""
    cp = ord(char)
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def clean_text(text: str) -> str:
    """Drop NUL, U+FFFD (the decoding-error character) and control characters; map all
    whitespace to a plain space."""
    out = []
    for char in text:
        if char == "\0" or char == "\ufffd" or is_control(char):
            continue  # invisible or broken: carries no meaning for the model
        out.append(" " if is_whitespace(char) else char)
    return "".join(out)


def pad_cjk_chars(text: str) -> str:
    """Put spaces around every CJK ideograph, so that each becomes a word of its own."""
    return "".join(f" {char} " if is_cjk(char) else char for char in text)


def lowercase(word: str) -> str:
    """Lower-case character by character (see the module docstring about final sigma)."""
    return "".join(char.lower() for char in word)


def strip_accents(word: str) -> str:
    """`café` -> `cafe`: decompose (NFD) into base letters + combining marks, drop the marks."""
    decomposed = unicodedata.normalize("NFD", word)
    return "".join(char for char in decomposed if unicodedata.category(char) != "Mn")


def split_on_punctuation(word: str) -> list[str]:
    """`"don't!"` -> `["don", "'", "t", "!"]`: each punctuation character is its own word."""
    pieces: list[str] = []
    start_new = True
    for char in word:
        if is_punctuation(char):
            pieces.append(char)
            start_new = True
        else:
            if start_new:
                pieces.append("")
                start_new = False
            pieces[-1] += char
    return pieces


def basic_tokenize(text: str, lowercase_text: bool = True, chinese_chars: bool = True) -> list[str]:
    """Stage 1 of BERT tokenisation: text -> words (before WordPiece).

    Introduced in notebook 01. `lowercase_text=False` is the cased mode: no lower-casing
    and no accent stripping (accents distinguish words when case does).
    """
    text = clean_text(text)
    if chinese_chars:
        text = pad_cjk_chars(text)
    words = []
    for word in text.split():  # str.split() splits on any whitespace and drops empties
        if lowercase_text:
            word = strip_accents(lowercase(word))
        words.extend(split_on_punctuation(word))
    # Accent stripping can leave nothing (a lone combining mark): drop such empty words.
    return [word for word in words if word]


# ----------------------------------------------------------------------------------------
# The reference implementation, step 2: WordPiece
# ----------------------------------------------------------------------------------------


def wordpiece(
    word: str,
    vocab: Mapping[str, int],
    unk_token: str = UNK,
    max_input_chars_per_word: int = MAX_INPUT_CHARS_PER_WORD,
) -> list[str]:
    """Stage 2: cut one word into the longest vocabulary pieces, left to right.

    Introduced in notebook 01. `"unaffable"` -> `["una", "##ffa", "##ble"]` with
    bert-base-uncased's vocabulary. Greedy longest-match-first: at each position take the
    longest piece in the vocabulary; if no piece fits, the whole word (not just the rest)
    becomes `[UNK]`.
    """
    if len(word) > max_input_chars_per_word:
        return [unk_token]
    pieces = []
    start = 0
    while start < len(word):
        end = len(word)
        piece = None
        while start < end:  # try the longest candidate first, then shorten it
            candidate = word[start:end]
            if start > 0:
                candidate = CONTINUATION_PREFIX + candidate  # marks "continues a word"
            if candidate in vocab:
                piece = candidate
                break
            end -= 1
        if piece is None:
            return [unk_token]
        pieces.append(piece)
        start = end
    return pieces


# ----------------------------------------------------------------------------------------
# Truncation: pure functions on token lists
# ----------------------------------------------------------------------------------------


def longest_first_lengths(n_a: int, n_b: int, budget: int) -> tuple[int, int]:
    """How many tokens of A and B survive `longest_first` truncation to `budget` tokens.

    As in BERT's `_truncate_seq_pair`: remove one token at a time from the end of the
    longer segment (from B on a tie). The longer text probably carries less per token.
    """
    while n_a + n_b > budget:
        if n_a > n_b:
            n_a -= 1
        else:
            n_b -= 1
    return n_a, n_b


def head_tail(tokens: list[str], keep: int, head_fraction: float = 0.25) -> list[str]:
    """Keep `round(head_fraction * keep)` tokens from the start and the rest from the end.

    Sun et al. 2019 ("How to Fine-Tune BERT for Text Classification") found that for long
    documents the start and the end carry the most: head 128 + tail 382 of 510 was best.
    """
    if not 0.0 <= head_fraction <= 1.0:
        raise ValueError(f"head_fraction must be between 0 and 1, got {head_fraction}.")
    if len(tokens) <= keep:
        return list(tokens)
    n_head = round(head_fraction * keep)
    n_tail = keep - n_head
    return tokens[:n_head] + (tokens[len(tokens) - n_tail :] if n_tail else [])


def truncate(
    tokens_a: list[str],
    tokens_b: list[str] | None,
    budget: int,
    strategy: str = "longest_first",
    head_fraction: float = 0.25,
) -> tuple[list[str], list[str] | None]:
    """Cut segments A (and B) so that together they hold at most `budget` tokens.

    `budget` excludes [CLS]/[SEP]. Strategies: "longest_first" (cut the end of the
    longer segment first), "head_tail" (same lengths, but each cut segment keeps its
    start and its end), "only_first" / "only_second" (cut only that segment), "error".
    """
    n_a, n_b = len(tokens_a), len(tokens_b or [])
    if n_a + n_b <= budget:
        return tokens_a, tokens_b
    if strategy == "error":
        raise ValueError(
            f"The input is {n_a + n_b} tokens but only {budget} fit (max_length minus the "
            f"special tokens), and truncation='error'. Use truncation='longest_first' to cut "
            f"the end, 'head_tail' to keep the start and the end, or 'only_first' / "
            f"'only_second' for pairs; or raise max_length."
        )
    if strategy in ("only_first", "only_second"):
        if tokens_b is None and strategy == "only_second":
            raise ValueError("truncation='only_second' needs a pair (text_b); use 'longest_first'.")
        cut_a = strategy == "only_first"
        other = n_b if cut_a else n_a
        if other > budget:
            raise ValueError(
                f"truncation={strategy!r}: the other segment alone has {other} tokens, more "
                f"than the {budget} that fit. Use truncation='longest_first'."
            )
        if cut_a:
            return tokens_a[: budget - n_b], tokens_b
        return tokens_a, tokens_b[: budget - n_a]
    if strategy not in ("longest_first", "head_tail"):
        raise ValueError(f"Unknown truncation {strategy!r}; choose from {TRUNCATION_STRATEGIES} or False.")
    keep_a, keep_b = longest_first_lengths(n_a, n_b, budget)
    if strategy == "head_tail":
        tokens_a = head_tail(tokens_a, keep_a, head_fraction)
        if tokens_b is not None:
            tokens_b = head_tail(tokens_b, keep_b, head_fraction)
        return tokens_a, tokens_b
    return tokens_a[:keep_a], (tokens_b[:keep_b] if tokens_b is not None else None)


# ----------------------------------------------------------------------------------------
# The tokenizer objects
# ----------------------------------------------------------------------------------------


@dataclass
class Encoding:
    """One encoded example: `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, then padding.

    All fields are lists of the same length T. `token_type_ids` is 0 for [CLS] A [SEP]
    and 1 for B [SEP] (0 on padding); `attention_mask` is 1 on real tokens, 0 on padding;
    `special_tokens_mask` is 1 on the [CLS]/[SEP]/[PAD] that encoding added (the
    positions MLM masking must never pick).
    """

    input_ids: list[int]
    token_type_ids: list[int]
    attention_mask: list[int]
    tokens: list[str]
    special_tokens_mask: list[int]

    def __len__(self) -> int:
        return len(self.input_ids)


class WordPieceTokenizer:
    """What both implementations share: the vocabulary, ids, encoding, decoding.

    Introduced in notebook 01. Subclasses only say how text becomes word pieces
    (`_tokenize_plain`). Build one with `load_vocab_tokenizer`.
    """

    impl = "base"

    def __init__(
        self,
        vocab: Mapping[str, int],
        lowercase: bool = True,
        chinese_chars: bool = True,
        model_max_length: int = 512,
        split_special_tokens: bool = False,
    ):
        self.vocab = check_vocab(vocab)
        self.ids_to_tokens = {i: token for token, i in self.vocab.items()}
        self.lowercase = lowercase
        self.chinese_chars = chinese_chars
        self.model_max_length = model_max_length
        self.split_special_tokens = split_special_tokens
        self.pad_token, self.unk_token, self.cls_token, self.sep_token, self.mask_token = SPECIAL_TOKENS
        self.pad_token_id = self.vocab[PAD]
        self.unk_token_id = self.vocab[UNK]
        self.cls_token_id = self.vocab[CLS]
        self.sep_token_id = self.vocab[SEP]
        self.mask_token_id = self.vocab[MASK]
        self.special_tokens = SPECIAL_TOKENS
        self.special_ids = {self.vocab[token] for token in SPECIAL_TOKENS}
        # Longest first, so that no special token is matched by a prefix of another.
        alternatives = "|".join(re.escape(t) for t in sorted(SPECIAL_TOKENS, key=len, reverse=True))
        self._special_pattern = re.compile(f"({alternatives})")

    # -- text -> pieces --------------------------------------------------------------------

    def _tokenize_plain(self, text: str) -> list[str]:
        raise NotImplementedError

    def tokenize(self, text: str) -> list[str]:
        """Text -> word pieces, without [CLS]/[SEP]."""
        if not isinstance(text, str):
            raise TypeError(f"tokenize() takes a str, got {type(text).__name__}.")
        if self.split_special_tokens:
            return self._tokenize_plain(text)
        pieces = []
        # re.split with a group keeps the separators: odd positions are special tokens.
        for i, part in enumerate(self._special_pattern.split(text)):
            if i % 2:
                pieces.append(part)  # "[MASK]" typed in the text stays one token
            elif part:
                pieces.extend(self._tokenize_plain(part))
        return pieces

    def tokenize_batch(self, texts: Sequence[str]) -> list[list[str]]:
        return [self.tokenize(text) for text in texts]

    # -- pieces <-> ids --------------------------------------------------------------------

    def convert_tokens_to_ids(self, tokens: str | Iterable[str]) -> int | list[int]:
        """Piece(s) -> id(s); a piece not in the vocabulary maps to [UNK]'s id."""
        if isinstance(tokens, str):
            return self.vocab.get(tokens, self.unk_token_id)
        return [self.vocab.get(token, self.unk_token_id) for token in tokens]

    def convert_ids_to_tokens(self, ids: int | Iterable[int]) -> str | list[str]:
        """Id(s) -> piece(s). Accepts ints, lists or a 1-D tensor."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        if isinstance(ids, int):
            return self._id_to_token(ids)
        return [self._id_to_token(i) for i in ids]

    def _id_to_token(self, i: int) -> str:
        try:
            return self.ids_to_tokens[int(i)]
        except KeyError:
            raise IndexError(f"Token id {i} is outside the vocabulary (0..{self.vocab_size - 1}).") from None

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def __len__(self) -> int:
        return len(self.vocab)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(vocab_size={self.vocab_size}, lowercase={self.lowercase}, "
            f"model_max_length={self.model_max_length})"
        )

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """Ids -> text: pieces joined by spaces, `##` pieces glued to the previous piece.

        Lower-casing, stripped accents and the spaces around punctuation are not undone:
        `"Hello, World!"` decodes to `"hello , world !"`.
        """
        tokens = self.convert_ids_to_tokens(ids)
        if isinstance(tokens, str):
            tokens = [tokens]
        if skip_special_tokens:
            tokens = [t for t in tokens if t not in self.special_tokens]
        words: list[str] = []
        for token in tokens:
            if token.startswith(CONTINUATION_PREFIX) and words:
                words[-1] += token[len(CONTINUATION_PREFIX) :]
            else:
                words.append(token.removeprefix(CONTINUATION_PREFIX))
        return " ".join(words)

    # -- encoding ----------------------------------------------------------------------------

    def encode(
        self,
        text_a: str,
        text_b: str | None = None,
        max_length: int | None = None,
        truncation: str | bool | None = None,
        pad_to: int | None = None,
        head_fraction: float = 0.25,
    ) -> Encoding:
        """Encode one text or a pair as `[CLS] A [SEP]` / `[CLS] A [SEP] B [SEP]`.

        Introduced in notebook 01.

        Args:
            text_a, text_b: the text, or the two texts of a pair (`text_b=""` is a pair
                with an empty B; `None` is a single text).
            max_length: the most tokens, specials included. When the encoding is longer,
                it is truncated with `truncation`.
            truncation: "longest_first" (the default when `max_length` is given),
                "head_tail" (keep `head_fraction` of the room for the start, the rest for
                the end: 128 + 382 at 512), "only_first", "only_second", "error" (raise),
                or False (never truncate, never check); True means "longest_first". With `max_length=None`, a text
                longer than `model_max_length` raises ValueError unless `truncation` is
                given, in which case it is truncated to `model_max_length`.
            pad_to: pad with [PAD] up to this many tokens.
        """
        tokens_a = self.tokenize(text_a)
        tokens_b = self.tokenize(text_b) if text_b is not None else None
        return self.encode_tokens(tokens_a, tokens_b, max_length, truncation, pad_to, head_fraction)

    def encode_tokens(
        self,
        tokens_a: list[str],
        tokens_b: list[str] | None = None,
        max_length: int | None = None,
        truncation: str | bool | None = None,
        pad_to: int | None = None,
        head_fraction: float = 0.25,
    ) -> Encoding:
        """`encode` for text that is already cut into pieces (used by the data pipeline)."""
        n_special = 2 if tokens_b is None else 3
        n_total = len(tokens_a) + len(tokens_b or []) + n_special
        if max_length is None and truncation is not False:
            if truncation is None:
                if n_total > self.model_max_length:
                    raise ValueError(
                        f"This input is {n_total} tokens, longer than model_max_length="
                        f"{self.model_max_length} (the model has no position embeddings "
                        f"past that). Pass max_length={self.model_max_length} with "
                        "truncation='longest_first' (cut the end) or 'head_tail' (keep the "
                        "start and the end), or truncation=False to keep every token."
                    )
            else:
                max_length = self.model_max_length
        if max_length is not None and truncation is not False:
            if max_length < n_special:
                raise ValueError(f"max_length={max_length} cannot even hold the {n_special} special tokens.")
            # None or True (what Hugging Face users pass): the default, longest_first
            strategy = "longest_first" if truncation is None or truncation is True else truncation
            tokens_a, tokens_b = truncate(tokens_a, tokens_b, max_length - n_special, strategy, head_fraction)

        tokens = [CLS, *tokens_a, SEP]
        token_type_ids = [0] * len(tokens)
        if tokens_b is not None:
            tokens += [*tokens_b, SEP]
            token_type_ids += [1] * (len(tokens_b) + 1)
        special_tokens_mask = [1] + [0] * len(tokens_a) + [1]
        if tokens_b is not None:
            special_tokens_mask += [0] * len(tokens_b) + [1]
        attention_mask = [1] * len(tokens)

        if pad_to is not None:
            if pad_to < len(tokens):
                raise ValueError(
                    f"pad_to={pad_to} is shorter than the encoding ({len(tokens)} tokens); "
                    f"pass max_length={pad_to} to truncate it first."
                )
            n_pad = pad_to - len(tokens)
            tokens += [PAD] * n_pad
            token_type_ids += [0] * n_pad
            attention_mask += [0] * n_pad  # the model must not attend to padding
            special_tokens_mask += [1] * n_pad
        return Encoding(
            input_ids=self.convert_tokens_to_ids(tokens),
            token_type_ids=token_type_ids,
            attention_mask=attention_mask,
            tokens=tokens,
            special_tokens_mask=special_tokens_mask,
        )

    def encode_batch(
        self,
        texts: Sequence[str | tuple[str, str]],
        max_length: int | None = None,
        pad: bool = True,
        truncation: str | bool | None = None,
        return_special_tokens_mask: bool = False,
    ) -> dict:
        """Encode texts (or `(text_a, text_b)` pairs) into a batch padded to the longest.

        Returns `{"input_ids", "token_type_ids", "attention_mask"}` (+ `"special_tokens_mask"`
        when asked) as LongTensors of shape (B, T); with `pad=False`, lists of lists.
        """
        if isinstance(texts, str):
            raise TypeError("encode_batch() takes a list of texts; use encode() for one text.")
        firsts = [t if isinstance(t, str) else t[0] for t in texts]
        seconds = [None if isinstance(t, str) else t[1] for t in texts]
        pieces_a = self.tokenize_batch(firsts)
        has_b = [i for i, b in enumerate(seconds) if b is not None]
        pieces_b: list[list[str] | None] = [None] * len(texts)
        for i, pieces in zip(has_b, self.tokenize_batch([seconds[i] for i in has_b])):
            pieces_b[i] = pieces
        encodings = [
            self.encode_tokens(a, b, max_length=max_length, truncation=truncation)
            for a, b in zip(pieces_a, pieces_b)
        ]
        keys = ["input_ids", "token_type_ids", "attention_mask"]
        if return_special_tokens_mask:
            keys.append("special_tokens_mask")
        if not pad:
            return {key: [getattr(e, key) for e in encodings] for key in keys}

        import torch  # only batches need torch; tokenising alone does not

        longest = max((len(e) for e in encodings), default=0)
        # Padding: [PAD] ids, segment 0, not attended to, and special (never masked for MLM).
        fill = {"input_ids": self.pad_token_id, "token_type_ids": 0, "attention_mask": 0}
        fill["special_tokens_mask"] = 1
        batch = {}
        for key in keys:
            rows = [getattr(e, key) + [fill[key]] * (longest - len(e)) for e in encodings]
            batch[key] = torch.tensor(rows, dtype=torch.long).reshape(len(encodings), longest)  # (B, T)
        return batch


class ReferenceTokenizer(WordPieceTokenizer):
    """WordPiece written out in Python (`basic_tokenize` + `wordpiece`). Introduced in notebook 01."""

    impl = "reference"

    def _tokenize_plain(self, text: str) -> list[str]:
        pieces = []
        for word in basic_tokenize(text, self.lowercase, self.chinese_chars):
            pieces.extend(wordpiece(word, self.vocab, UNK, MAX_INPUT_CHARS_PER_WORD))
        return pieces


def build_backend(vocab: Mapping[str, int] | None, lowercase: bool = True, chinese_chars: bool = True):
    """A `tokenizers.Tokenizer` running BERT's rules: the fast path and the trainer's base.

    No post-processor: [CLS]/[SEP] are added by `WordPieceTokenizer.encode_tokens`, so both
    implementations share one encoding path.
    """
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import WordPiece

    # An empty vocabulary (None) is what the trainer starts from.
    model = WordPiece(
        dict(vocab) if vocab is not None else {},
        unk_token=UNK,
        max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD,
        continuing_subword_prefix=CONTINUATION_PREFIX,
    )
    backend = Tokenizer(model)
    backend.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=chinese_chars, strip_accents=lowercase, lowercase=lowercase
    )
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece(prefix=CONTINUATION_PREFIX, cleanup=False)
    return backend


class FastTokenizer(WordPieceTokenizer):
    """The same rules run by the Rust `tokenizers` library (`.backend`). Introduced in notebook 01."""

    impl = "fast"

    def __init__(self, vocab: Mapping[str, int], **kwargs):
        super().__init__(vocab, **kwargs)
        self.backend = _backend_like(self)

    def _tokenize_plain(self, text: str) -> list[str]:
        return self.backend.encode(text, add_special_tokens=False).tokens

    def tokenize(self, text: str) -> list[str]:
        if not isinstance(text, str):
            raise TypeError(f"tokenize() takes a str, got {type(text).__name__}.")
        return self._tokenize_plain(text)

    def tokenize_batch(self, texts: Sequence[str]) -> list[list[str]]:
        return [e.tokens for e in self.backend.encode_batch(list(texts), add_special_tokens=False)]


IMPLEMENTATIONS = {"reference": ReferenceTokenizer, "fast": FastTokenizer}


def _backend_like(tokenizer: WordPieceTokenizer):
    """A new backend with `tokenizer`'s vocabulary, casing, CJK and special-token rules."""
    backend = build_backend(tokenizer.vocab, tokenizer.lowercase, tokenizer.chinese_chars)
    if not tokenizer.split_special_tokens:
        # Registered special tokens are matched in the raw text before normalisation.
        backend.add_special_tokens(list(tokenizer.special_tokens))
    return backend


_built_backends: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def tokenizer_backend(tokenizer: WordPieceTokenizer):
    """The `tokenizers.Tokenizer` that runs `tokenizer`'s rules.

    The fast implementation's own `.backend`; for the reference one, a backend built over
    the same vocabulary on first use and kept while the tokenizer lives. What needs the
    backend: character offsets into the original text (`bertedu.data.qa.tokenize_with_offsets`),
    which only its normaliser keeps.
    """
    if isinstance(tokenizer, (FastTokenizer, ByteLevelBPETokenizer)):
        return tokenizer.backend
    backend = _built_backends.get(tokenizer)
    if backend is None:
        backend = _built_backends[tokenizer] = _backend_like(tokenizer)
    return backend


def load_vocab_tokenizer(
    vocab_path: str | os.PathLike | Mapping[str, int],
    lowercase: bool = True,
    impl: str = "reference",
    *,
    chinese_chars: bool = True,
    model_max_length: int = 512,
    split_special_tokens: bool = False,
) -> WordPieceTokenizer:
    """A BERT tokenizer over a `vocab.txt` (or a token -> id dict). Introduced in notebook 01.

    `impl="reference"` is the readable Python version, `impl="fast"` the `tokenizers` one;
    they give identical output. `lowercase=False` for cased vocabularies.

    A `vocab.txt` with a `merges.txt` beside it is a byte-level BPE vocabulary
    (`train_byte_level_bpe`): it loads as a `ByteLevelBPETokenizer`, which has one
    implementation, cased, whatever `impl`, `lowercase` and `chinese_chars` say.
    """
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"Unknown tokenizer impl {impl!r}; choose one of {sorted(IMPLEMENTATIONS)}.")
    if not isinstance(vocab_path, Mapping) and merges_path(vocab_path).is_file():
        return ByteLevelBPETokenizer(load_vocab(vocab_path), load_merges(merges_path(vocab_path)),
                                     model_max_length=model_max_length, split_special_tokens=split_special_tokens)
    vocab = check_vocab(vocab_path) if isinstance(vocab_path, Mapping) else load_vocab(vocab_path)
    return IMPLEMENTATIONS[impl](
        vocab,
        lowercase=lowercase,
        chinese_chars=chinese_chars,
        model_max_length=model_max_length,
        split_special_tokens=split_special_tokens,
    )


# ----------------------------------------------------------------------------------------
# Training a vocabulary
# ----------------------------------------------------------------------------------------


def _is_file_list(corpus) -> bool:
    """A list/tuple of paths (Path objects, or strings naming existing files)."""
    if not isinstance(corpus, (list, tuple)) or not corpus:
        return False
    return all(isinstance(c, os.PathLike) or (isinstance(c, str) and os.path.isfile(c)) for c in corpus)


def _lines_of(files: Sequence[str | os.PathLike]) -> Iterator[str]:
    for file in files:
        path = Path(file)
        if not path.is_file():
            raise FileNotFoundError(f"Corpus file {path} does not exist.")
        try:
            with path.open(encoding="utf-8") as handle:
                yield from handle
        except UnicodeDecodeError as error:
            raise ValueError(f"Corpus file {path} is not UTF-8 text ({error}).") from None


def train_wordpiece(
    files_or_iterator: str | os.PathLike | Sequence[str | os.PathLike] | Iterable[str],
    vocab_size: int,
    out_path: str | os.PathLike | None = None,
    lowercase: bool = True,
    min_frequency: int = 2,
    chinese_chars: bool = True,
    limit_alphabet: int = 1000,
) -> Path | dict[str, int]:
    """Learn a WordPiece vocabulary from a corpus with the `tokenizers` trainer.

    Introduced in notebook 01. The corpus is a file, a list of files (Path objects or
    names of existing files), or any iterable of strings (it is streamed, never held in
    memory). The specials come first: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4. With
    `out_path` (a file, or a folder to hold `vocab.txt`), writes vocab.txt in BERT's format
    and returns its Path; otherwise returns the token -> id dict. Either loads with
    `load_vocab_tokenizer` and either impl.

    Two runs on the same corpus can differ slightly: the `tokenizers` trainer breaks ties
    between equally frequent merges in hash-map order (tokenizers issue #1794). Keep the
    written vocab.txt rather than retraining when results must be reproducible.
    """
    from tokenizers.trainers import WordPieceTrainer

    corpus = _CountedTexts(_corpus_lines(files_or_iterator))
    backend = build_backend(None, lowercase, chinese_chars)
    trainer = WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        limit_alphabet=limit_alphabet,
        continuing_subword_prefix=CONTINUATION_PREFIX,
        show_progress=False,  # no progress bars in stored notebook outputs
    )
    backend.train_from_iterator(iter(corpus), trainer=trainer)
    if corpus.non_blank == 0:
        raise ValueError("The corpus is empty (no non-blank text): nothing to learn a vocabulary from.")

    tokens = _tokens_by_id(backend.get_vocab())
    if out_path is None:
        return {token: i for i, token in enumerate(tokens)}
    return write_vocab(tokens, out_path)


def _corpus_lines(files_or_iterator) -> Iterable[str]:
    """A file, a list of files, or an iterable of strings -> a stream of strings."""
    if isinstance(files_or_iterator, (str, os.PathLike)):
        return _lines_of([files_or_iterator])
    if _is_file_list(files_or_iterator):
        return _lines_of(files_or_iterator)
    return iter(files_or_iterator)


class _CountedTexts:
    """Streams a corpus through once, checking that it yields str and counting non-blank texts."""

    def __init__(self, texts: Iterable[str]):
        self.texts = texts
        self.non_blank = 0

    def __iter__(self) -> Iterator[str]:
        for text in self.texts:
            if not isinstance(text, str):
                raise TypeError(f"The corpus must yield str, got {type(text).__name__}.")
            if text.strip():
                self.non_blank += 1
            yield text


def _tokens_by_id(vocab: Mapping[str, int]) -> list[str]:
    """The tokens in id order; the ids must be exactly 0..n-1 to be written as vocab.txt."""
    tokens = sorted(vocab, key=vocab.get)
    if [vocab[t] for t in tokens] != list(range(len(tokens))):
        raise RuntimeError("The trained vocabulary's ids are not 0..n-1; cannot write vocab.txt.")
    return tokens


def write_vocab(tokens: list[str], out_path: str | os.PathLike) -> Path:
    """Write tokens one per line, id = line number, as BERT's vocab.txt; return its Path.

    `out_path` is a file or a folder (then `vocab.txt` inside it). Written to a temporary
    file and renamed, so a crash never leaves half a vocabulary.
    """
    out_path = Path(out_path)
    if out_path.is_dir():
        out_path = out_path / VOCAB_NAME
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out_path.parent, prefix=".vocab-", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
        handle.write("".join(token + "\n" for token in tokens))
    permissions_as_umask(tmp)  # mkstemp made it 0600
    os.replace(tmp, out_path)
    return out_path


# ----------------------------------------------------------------------------------------
# Byte-level BPE: RoBERTa's (and GPT-2's) kind of vocabulary
# ----------------------------------------------------------------------------------------

MERGES_HEADER = "#version: 0.2"  # the first line of GPT-2's and RoBERTa's merges.txt


def merges_path(vocab_path: str | os.PathLike) -> Path:
    """Where a vocabulary's merges live: `merges.txt` beside its `vocab.txt`."""
    return Path(vocab_path).with_name(MERGES_NAME)


def load_merges(path: str | os.PathLike) -> list[tuple[str, str]]:
    """The merges of a byte-level BPE vocabulary, in the order they were learnt: one pair per
    line ("Ġ t"), after an optional `#version` line (the layout of RoBERTa's merges.txt)."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    merges = []
    for number, line in enumerate(lines, 1):
        if not line or (number == 1 and line.startswith("#version")):
            continue
        pair = line.split(" ")
        if len(pair) != 2:
            raise ValueError(f"{path}, line {number}: a merge is two pieces separated by one space, got {line!r}")
        merges.append((pair[0], pair[1]))
    return merges


def write_merges(merges: Sequence[tuple[str, str]], path: str | os.PathLike) -> Path:
    """Write merges as RoBERTa's merges.txt (a `#version` line, then one pair per line); atomic."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".merges-", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(MERGES_HEADER + "\n" + "".join(f"{a} {b}\n" for a, b in merges))
    permissions_as_umask(tmp)  # mkstemp made it 0600
    os.replace(tmp, path)
    return path


def copy_vocabulary(vocab_path: str | os.PathLike, to: str | os.PathLike) -> Path:
    """Copy a vocab.txt to `to` (a file path), and its merges.txt beside it when it has one.
    The merges go first, each file by a rename, so a reader that sees the vocab.txt sees both."""
    import shutil

    source, to = Path(vocab_path), Path(to)
    to.parent.mkdir(parents=True, exist_ok=True)
    pairs = [(merges_path(source), merges_path(to))] if merges_path(source).is_file() else []
    for src, dst in pairs + [(source, to)]:
        if src.resolve() == dst.resolve():
            continue
        tmp = dst.with_name(f".{dst.name}.tmp")
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    return to


def build_bpe_backend(vocab: Mapping[str, int] | None = None, merges: Sequence[tuple[str, str]] | None = None):
    """A `tokenizers.Tokenizer` for byte-level BPE: bytes as printable characters, then merges.

    No post-processor and no prefix space: `ByteLevelBPETokenizer` adds both itself. With no
    vocabulary, the start of `train_byte_level_bpe`.
    """
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE

    model = BPE(dict(vocab), list(merges)) if vocab is not None else BPE()
    backend = Tokenizer(model)
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    return backend


class ByteLevelBPETokenizer(WordPieceTokenizer):
    """RoBERTa's kind of vocabulary with BERT's special tokens. Introduced in notebook 15.

    Text is read as UTF-8 bytes, each byte shown as a printable character (a space is `Ġ`),
    and the learnt merges join them into pieces, so every text has a spelling and `[UNK]`
    never appears; nothing is lower-cased. The special tokens keep BERT's names (`[CLS]` where
    RoBERTa writes `<s>`, `[SEP]` for `</s>`), so encoding, masking and every model of the
    library read it as they read WordPiece. `[MASK]` in a text takes the space before it, as
    RoBERTa's `<mask>` does, so its prediction is a whole `Ġword`. A text gets a space before
    its first word (RoBERTa's `add_prefix_space=True`), so a word is cut the same at the start
    of a sentence and inside one: the data pipeline tokenizes sentence by sentence. Run by
    `tokenizers` (`.backend`); `load_vocab_tokenizer` gives one for a vocab.txt with a
    merges.txt beside it.
    """

    impl = "fast"

    def __init__(self, vocab: Mapping[str, int], merges: Sequence[tuple[str, str]], model_max_length: int = 512,
                 split_special_tokens: bool = False):
        from tokenizers import AddedToken

        super().__init__(vocab, lowercase=False, chinese_chars=False, model_max_length=model_max_length,
                         split_special_tokens=split_special_tokens)
        self.merges = [tuple(m) for m in merges]
        self.backend = build_bpe_backend(self.vocab, self.merges)
        if not split_special_tokens:
            self.backend.add_special_tokens([AddedToken(t, lstrip=t == MASK, special=True) for t in SPECIAL_TOKENS])

    def _tokenize_plain(self, text: str) -> list[str]:
        return self.tokenize_batch([text])[0]

    def tokenize(self, text: str) -> list[str]:
        if not isinstance(text, str):
            raise TypeError(f"tokenize() takes a str, got {type(text).__name__}.")
        return self._tokenize_plain(text)

    def tokenize_batch(self, texts: Sequence[str]) -> list[list[str]]:
        spaced = [text if text[:1].isspace() else " " + text for text in texts]
        # by id, not .tokens: a [MASK] that took the space before it is still "[MASK]"
        return [[self.ids_to_tokens[i] for i in e.ids] for e in self.backend.encode_batch(spaced, add_special_tokens=False)]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """Ids -> the exact text: bytes joined back and read as UTF-8 (less the first word's Ġ)."""
        ids = [ids] if isinstance(ids, int) else [int(i) for i in ids]
        text = self.backend.decode(ids, skip_special_tokens=skip_special_tokens)
        return text[1:] if text.startswith(" ") else text


def train_byte_level_bpe(
    files_or_iterator: str | os.PathLike | Sequence[str | os.PathLike] | Iterable[str],
    vocab_size: int,
    out_path: str | os.PathLike,
    min_frequency: int = 2,
) -> Path:
    """Learn a byte-level BPE vocabulary (RoBERTa's kind) with the `tokenizers` trainer.

    Writes `vocab.txt` (BERT's five special tokens first, then the 256 byte characters, then
    the merged pieces) and `merges.txt` beside it; returns the vocab.txt's Path. `out_path` is
    a file or a folder. The corpus is read as by `train_wordpiece`. At least 261 pieces (five
    special tokens and 256 bytes).
    """
    import json

    from tokenizers import pre_tokenizers
    from tokenizers.trainers import BpeTrainer

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(SPECIAL_TOKENS) + len(alphabet):
        raise ValueError(f"vocab_size {vocab_size} is below the {len(SPECIAL_TOKENS) + len(alphabet)} pieces every "
                         "byte-level BPE vocabulary holds (5 special tokens and 256 bytes)")
    corpus = _CountedTexts(_corpus_lines(files_or_iterator))
    backend = build_bpe_backend()
    trainer = BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIAL_TOKENS),
                         initial_alphabet=alphabet, show_progress=False)
    backend.train_from_iterator((" " + text for text in corpus), trainer=trainer)  # the prefix space, as read
    if corpus.non_blank == 0:
        raise ValueError("The corpus is empty (no non-blank text): nothing to learn a vocabulary from.")
    merges = json.loads(backend.to_str())["model"]["merges"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]
    out_path = Path(out_path)
    if out_path.is_dir():
        out_path = out_path / VOCAB_NAME
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_merges(merges, merges_path(out_path))  # first: a vocab.txt in place means the merges are too
    return write_vocab(_tokens_by_id(backend.get_vocab()), out_path)
