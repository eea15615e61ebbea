"""Sentence splitting for English and Chinese.

Introduced in the pretraining-data notebook.

BERT's next-sentence task needs documents cut into sentences: the original
`create_pretraining_data.py` reads one sentence per line. Real text does not come that
way, so these small rule-based splitters cut it. They are deliberately simple (a
learner can read every rule) and good enough for pretraining data, where an occasional
wrong cut costs little:

- English: a sentence ends at `.`, `!` or `?` (plus any closing quotes or brackets) that
  is followed by whitespace and then a capital letter, a digit or an opening quote —
  unless the word before the full stop is a known abbreviation (`Mr.`, `e.g.`, `U.S.`)
  or a single capital initial (`George W. Bush`). A decimal point (`3.14`) is never
  followed by whitespace, so it never ends a sentence.
- Chinese: a sentence ends at `。！？；…` (and their ASCII forms `!?;`), with the
  closing quotes and brackets that follow kept in the sentence (`他说：“好。”`).
  Chinese puts no space between sentences, so no look-ahead is needed.

    >>> split_sentences_en("Mr. Smith paid $3.50. He left! Did he?")
    ['Mr. Smith paid $3.50.', 'He left!', 'Did he?']
    >>> split_sentences_zh("他说：“好。”我们走吧！")
    ['他说：“好。”', '我们走吧！']
"""

from __future__ import annotations

import re

# Words that end with a full stop but rarely end a sentence. Compared lower-cased and
# without their final ".", so "e.g." is stored as "e.g" and "U.S." as "u.s". Left out on
# purpose: words that often *do* end a sentence ("etc.", "Inc.", "p.m.").
ABBREVIATIONS = frozenset(
    """
    mr mrs ms dr prof rev hon st sr jr gen maj col lt sgt capt cmdr adm gov sen rep pres fr
    mt ft ave blvd
    e.g i.e cf vs viz al approx esp incl
    u.s u.k u.n u.s.a d.c ph.d m.d b.a m.a
    jan feb mar apr jun jul aug sep sept oct nov dec
    """.split()
)
# Abbreviations that are only abbreviations before a number: "No. 5", "p. 12", "c. 1500"
# (but "The answer was no. Then ..." ends a sentence).
NUMBER_ABBREVIATIONS = frozenset("no nos vol vols p pp ch chap sec fig figs op c ca fl a.d b.c".split())

# A candidate end: one or more of .!? (or an ellipsis), then closing quotes/brackets,
# then whitespace, then (looking ahead) what may start a sentence.
_EN_BOUNDARY = re.compile(r"""([.!?…]+["'”’)\]]*)\s+(?=["'“‘(\[]?[A-Z0-9])""")
# The word just before a full stop: letters and inner dots ("e.g", "U.S", "Mr").
_WORD_BEFORE_STOP = re.compile(r"([A-Za-z][A-Za-z.]*)$")
_INITIALS = re.compile(r"^(?:[A-Z]\.)*[A-Z]$")  # "W", "R.S", "J.R.R"

# Chinese ends: full stop, exclamation, question mark, semicolon, ellipsis (and the
# ASCII/half-width forms that turn up in mixed text), then closing quotes/brackets.
ZH_SENTENCE_END = "。！？；…!?;"
# ASCII quotes are left out: whether '"' opens or closes cannot be told from the character.
ZH_CLOSING = "”’」』）》〉】〕)"
_ZH_SENTENCE = re.compile(f"[^{re.escape(ZH_SENTENCE_END)}]*[{re.escape(ZH_SENTENCE_END)}]+[{re.escape(ZH_CLOSING)}]*")


def _is_abbreviation(text_before: str, next_char: str) -> bool:
    """True when `text_before` (the text up to a final ".") ends in an abbreviation or
    a single capital initial; `next_char` starts the text after the space."""
    match = _WORD_BEFORE_STOP.search(text_before)
    if match is None:
        return False
    word = match.group(1)
    if _INITIALS.match(word) and word != "I" and not next_char.isdigit():
        return True  # initials: "George W. Bush", "J. R. R. Tolkien", "R.S. Thomas" (not "so did I.")
    word = word.lower()
    return word in ABBREVIATIONS or (word in NUMBER_ABBREVIATIONS and next_char.isdigit())


def split_sentences_en(text: str) -> list[str]:
    """Cut English text into sentences (rule-based; see the module docstring).

    Whitespace inside a sentence is kept as it is; each sentence is stripped.
    """
    sentences = []
    start = 0
    for match in _EN_BOUNDARY.finditer(text):
        ending = match.group(1)
        # Only a single "." can belong to an abbreviation; "!", "?" and "..." always end.
        if ending.rstrip("\"'”’)]") == "." and _is_abbreviation(text[start : match.start(1)], text[match.end()]):
            continue
        sentence = text[start : match.end(1)].strip()
        if sentence:
            sentences.append(sentence)
        start = match.end()
    rest = text[start:].strip()
    if rest:
        sentences.append(rest)
    return sentences


def split_sentences_zh(text: str) -> list[str]:
    """Cut Chinese text into sentences at 。！？；… (closing quotes stay with the sentence)."""
    sentences = []
    end = 0
    for match in _ZH_SENTENCE.finditer(text):
        sentence = match.group(0).strip()
        if sentence:
            sentences.append(sentence)
        end = match.end()
    rest = text[end:].strip()  # a last sentence without a final full stop
    if rest:
        sentences.append(rest)
    return sentences


def cjk_fraction(text: str) -> float:
    """The fraction of non-space characters that are CJK ideographs (0.0 for empty text)."""
    from bertedu.data.tokenizer import is_cjk

    chars = [char for char in text if not char.isspace()]
    if not chars:
        return 0.0
    return sum(is_cjk(char) for char in chars) / len(chars)


def guess_language(text: str) -> str:
    """"zh" when at least a third of the characters are CJK ideographs, else "en"."""
    return "zh" if cjk_fraction(text) >= 1 / 3 else "en"


SPLITTERS = {"en": split_sentences_en, "zh": split_sentences_zh}


def split_sentences(text: str, lang: str = "en") -> list[str]:
    """Cut `text` into sentences with the splitter for `lang` ("en", "zh" or "auto").

    Line breaks are treated as spaces (English) or ignored (Chinese); split text into
    paragraphs first if line breaks mean something. `lang="auto"` picks by `guess_language`.
    """
    if lang == "auto":
        lang = guess_language(text)
    if lang not in SPLITTERS:
        raise ValueError(f"No sentence splitter for language {lang!r}; choose from {sorted(SPLITTERS)} or 'auto'.")
    if lang == "zh":
        # Chinese has no spaces between words: a line break inside a sentence is layout.
        text = re.sub(r"\s*\n\s*", "", text)
    return SPLITTERS[lang](text)
